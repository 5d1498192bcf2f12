#!/usr/bin/env bash
# H200 call F (issue 10): the tune at 2K/8K/16K after the L = 1 check moved to the synced verify
# steps, 10 rounds of 16-token blocks per context, in one process (it pays the MLX CUDA JIT first).
TARBALL=h200-12.tgz
source "$(dirname "$0")/h200-common.sh"
timeout 550 python3 -m mlatui bench $S --random-weights --phases tune --fill random-latents \
  --contexts 2048,8192,16384 --tokens 16 --reps 10 \
  --out "$OUT/r/tune.jsonl" > "$OUT/r/tune.md" 2> "$OUT/r/tune.log"
echo "tune exit $? at $(date +%T)"; tar czf "$OUT/$TARBALL" -C "$OUT" r
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw --format=csv >> "$OUT/r/gpu.txt" 2>&1
tar czf "$OUT/$TARBALL" -C "$OUT" r
