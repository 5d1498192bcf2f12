#!/usr/bin/env bash
# H200 call B (issue 10): the tune at 8K and 16K (machine still warm from call A: no JIT).
TARBALL=h200-10.tgz
source "$(dirname "$0")/h200-common.sh"
tune() {
  local name=$1 limit=$2; shift 2
  timeout "$limit" python3 -m mlatui bench $S --random-weights --phases tune --fill random-latents "$@" \
    --out "$OUT/r/$name.jsonl" > "$OUT/r/$name.md" 2> "$OUT/r/$name.log"
  echo "$name exit $? at $(date +%T)"
  tar czf "$OUT/$TARBALL" -C "$OUT" r
}
tune tune-8k 260 --contexts 8192 --reps 4 --max-rounds 4
tune tune-16k 280 --contexts 16384 --reps 4 --max-rounds 4
