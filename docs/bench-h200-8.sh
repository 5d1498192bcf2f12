#!/usr/bin/env bash
# H200 call E (issue 9): after the settle step (each arm's step before a quad is a light L = 1):
# the real patch at 2K/16K, widths 1, 2, 4, then the A/A at the same, random-latent fill.
set -u
mkdir -p "$OUT/r"
export MLATUI_CACHE_DIR="$OUT/r/cache"
S=scenarios/glm47-flash.toml
run() {
  local name=$1 limit=$2; shift 2
  timeout "$limit" python3 -m mlatui bench $S --random-weights --phases sweep --fill random-latents "$@" \
    --out "$OUT/r/$name.jsonl" > "$OUT/r/$name.md" 2> "$OUT/r/$name.log"
  echo "$name exit $? at $(date +%T)"
  tar czf "$OUT/h200-8.tgz" -C "$OUT" r
}
run real-settle 120 --contexts 2048,16384 --widths 1,2,4 --reps 8 --max-rounds 12
run aa-settle 140 --null --contexts 2048,16384 --widths 1,2,4 --reps 8 --max-rounds 10
