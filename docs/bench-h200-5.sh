#!/usr/bin/env bash
# H200 call B (issue 9): long contexts with the timing-only random-latent fill (1K/32K/128K,
# widths 1, 2, 4, real patch), the thread diagnostic (A/A with one thread per arm vs both arms on
# one thread, same fill and contexts), and calibrate in bf16 4-bit.
TARBALL=h200-5.tgz FILL=""
source "$(dirname "$0")/h200-common.sh"
run long 170 --fill random-latents --contexts 1024,32768,131072 --widths 1,2,4 --reps 8 --max-rounds 12
run aa-threads 125 --null --fill random-latents --contexts 2048,16384 --widths 1,2,4 --reps 8 --max-rounds 10
run aa-shared 125 --null --shared-arm-thread --fill random-latents --contexts 2048,16384 --widths 1,2,4 --reps 8 --max-rounds 10
timeout 50 python3 -m mlatui calibrate --family glm4_moe_lite --contexts 8192 --dtype bfloat16 --bits 4 \
  > "$OUT/r/calibrate.md" 2> "$OUT/r/calibrate.log"; echo "calibrate exit $?"
tar czf "$OUT/h200-5.tgz" -C "$OUT" r
