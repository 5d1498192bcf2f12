#!/usr/bin/env bash
# The H200 benchmark run behind docs/performance.md (MLX CUDA, random weights at real geometry).
# Run on the device after the two-call mlx-cuda install of ../shared/device/MLX_CUDA.md:
#   bash .whlB/install.sh && export PYTHONPATH=/tmp/site:. PYTHONUNBUFFERED=1; bash docs/bench-h200.sh
# Every command has its own time limit so one slow part cannot starve the others.
set -u
OUT=${OUT:-/tmp/mlatui-h200}
mkdir -p "$OUT"
py=python3
run() {  # run LIMIT_S NAME ARGS...
  local limit=$1 name=$2; shift 2
  echo "=== $name: mlatui $*" | tee -a "$OUT/commands.txt"
  local start=$(date +%s)
  timeout "$limit" $py -m mlatui "$@" > "$OUT/$name.md" 2> "$OUT/$name.log"
  echo "=== $name: exit $? in $(( $(date +%s) - start ))s" | tee -a "$OUT/commands.txt"
}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$OUT/gpu.txt" 2>&1
# issue 2 (b): whole model, stock vs patched, L = 1..4, T = 1K..32K
run 150 attn_glm_b bench attention --family glm4_moe_lite --bits 4 --random-weights --part b \
  --contexts 1024,4096,8192,16384,32768 --reps 9 --out "$OUT/attn_glm_b.jsonl"
run 110 attn_dsv3_b bench attention --family deepseek_v3 --bits 4 --random-weights --part b --layers 8 \
  --contexts 1024,4096,8192,16384,32768 --reps 9 --out "$OUT/attn_dsv3_b.jsonl"
# issue 2 (a): one attention layer, forced branches, at 8K
run 45 attn_glm_a bench attention --family glm4_moe_lite --random-weights --part a --contexts 8192 \
  --widths 1,2,4,8,16,32,64,128,256,398,512,1024,2048 --reps 9 --out "$OUT/attn_glm_a.jsonl"
run 45 attn_dsv3_a bench attention --family deepseek_v3 --random-weights --part a --contexts 8192 \
  --widths 1,2,4,8,16,32,64,128,170,256,398,512,1024 --reps 9 --out "$OUT/attn_dsv3_a.jsonl"
# issue 3: the pooled indexer, GLM-5.3-Flash geometry
run 75 indexer bench indexer --contexts 8192,32768,131072 --widths 1,2,4 --layer-contexts 8192,32768 \
  --reps 9 --warmup 2 --quiet --out "$OUT/indexer.jsonl"
# issue 4: the GLM-4.7-Flash scenario (sweep + tune), random 4-bit weights, synthetic acceptance
run 140 glm47 bench scenarios/glm47-flash.toml --random-weights --out "$OUT/glm47.jsonl"
ls -la "$OUT"
