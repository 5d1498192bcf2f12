#!/usr/bin/env bash
# Second H200 call (the first one's whole-model runs hit their time limits): GLM-4.7-Flash whole
# model at 1K..32K, the indexer, and the glm47-flash scenario with fewer reps/tokens.
set -u
OUT=${OUT:-/tmp/mlatui-h200}
R=/tmp/res; mkdir -p $R
run() {
  local limit=$1 name=$2; shift 2
  echo "=== $name: mlatui $*" | tee -a $R/commands.txt
  local start=$(date +%s)
  timeout "$limit" python3 -m mlatui "$@" > $R/$name.md 2> $R/$name.log
  echo "=== $name: exit $? in $(( $(date +%s) - start ))s" | tee -a $R/commands.txt
}
run 230 attn_glm_b bench attention --family glm4_moe_lite --bits 4 --random-weights --part b \
  --contexts 1024,4096,8192,16384,32768 --reps 7 --out $R/attn_glm_b.jsonl
run 45 indexer bench indexer --contexts 8192,32768,131072 --widths 1,2,4 --layer-contexts 8192,32768 \
  --reps 9 --warmup 2 --quiet --out $R/indexer.jsonl
run 265 glm47 bench scenarios/glm47-flash.toml --random-weights --reps 5 --tokens 32 --out $R/glm47.jsonl
tar czf $OUT/results.tgz -C /tmp res
