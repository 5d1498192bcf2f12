#!/usr/bin/env bash
# H200 call C (issue 9): the A/A beside the long-context claim (random-latent fill, 1K/32K/128K).
set -u
mkdir -p "$OUT/r"
export MLATUI_CACHE_DIR="$OUT/r/cache"
timeout 230 python3 -m mlatui bench scenarios/glm47-flash.toml --random-weights --phases sweep \
  --null --fill random-latents --contexts 1024,32768,131072 --widths 1,2,4 --reps 6 --max-rounds 8 \
  --out "$OUT/r/long-aa.jsonl" > "$OUT/r/long-aa.md" 2> "$OUT/r/long-aa.log"
echo "long-aa exit $?"
tar czf "$OUT/h200-6.tgz" -C "$OUT" r
