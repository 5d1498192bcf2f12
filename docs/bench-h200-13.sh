#!/usr/bin/env bash
# H200 call G (issue 9, on the machine warm from call F): the sweep with the settle step, real patch
# then A/A (both passes), 2K/8K/16K, widths 1-4, random-latent fill, 16-24 rounds (48-72 L = 1
# quads per context); then decode-parity at 2K with 16 rounds if time is left.
TARBALL=h200-13.tgz FILL="--fill random-latents"
source "$(dirname "$0")/h200-common.sh"
run real-settle 200 --contexts 2048,8192,16384 --widths 1,2,3,4 --reps 16 --max-rounds 24
run aa-settle 280 --null --contexts 2048,8192,16384 --widths 1,2,3,4 --reps 16 --max-rounds 20
timeout 100 python3 -m mlatui bench decode-parity $S --random-weights --context 2048 --tokens 16 \
  --rounds 16 --out "$OUT/r/parity.jsonl" > "$OUT/r/parity.md" 2> "$OUT/r/parity.log"
echo "parity exit $? at $(date +%T)"; tar czf "$OUT/$TARBALL" -C "$OUT" r
