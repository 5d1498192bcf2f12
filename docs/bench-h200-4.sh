#!/usr/bin/env bash
# H200 call A (issue 9): GLM-4.7-Flash full geometry, random 4-bit weights, real prefills.
# The A/A null run (both stock, then both patched) and the real patch, contexts 2K/8K/16K,
# widths 1-4, through the one sampler (rounds of A B B A quads, paired CIs).
set -u
mkdir -p "$OUT/r"
export MLATUI_CACHE_DIR="$OUT/r/cache"
S=scenarios/glm47-flash.toml
run() {
  local name=$1 limit=$2; shift 2
  timeout "$limit" python3 -m mlatui bench $S --random-weights --phases sweep "$@" \
    --out "$OUT/r/$name.jsonl" > "$OUT/r/$name.md" 2> "$OUT/r/$name.log"
  echo "$name exit $? at $(date +%T)"
  tar czf "$OUT/h200-4a.tgz" -C "$OUT" r
}
run aa 300 --null --contexts 2048,8192,16384 --widths 1,2,3,4 --reps 8 --max-rounds 16
run real 200 --contexts 2048,8192,16384 --widths 1,2,3,4 --reps 8 --max-rounds 16
