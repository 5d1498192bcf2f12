#!/usr/bin/env bash
# H200 call D (issue 9), after the fix (both arms on one worker thread, ratios per quad):
# A/A and real patch at 2K/8K/16K, widths 1-4, and the long contexts 1K/32K/128K, widths 1, 2, 4,
# all with the timing-only random-latent fill (prefills of 47 layers would not fit one call).
set -u
mkdir -p "$OUT/r"
export MLATUI_CACHE_DIR="$OUT/r/cache"
S=scenarios/glm47-flash.toml
run() {
  local name=$1 limit=$2; shift 2
  timeout "$limit" python3 -m mlatui bench $S --random-weights --phases sweep --fill random-latents "$@" \
    --out "$OUT/r/$name.jsonl" > "$OUT/r/$name.md" 2> "$OUT/r/$name.log"
  echo "$name exit $? at $(date +%T)"
  tar czf "$OUT/h200-7.tgz" -C "$OUT" r
}
run aa 170 --null --contexts 2048,8192,16384 --widths 1,2,3,4 --reps 8 --max-rounds 14
run real 120 --contexts 2048,8192,16384 --widths 1,2,3,4 --reps 8 --max-rounds 14
run long 200 --contexts 1024,32768,131072 --widths 1,2,4 --reps 6 --max-rounds 8
