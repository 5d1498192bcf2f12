#!/usr/bin/env bash
# H200 call D (issue 9), after the fix (both arms on one worker thread, ratios per quad):
# A/A and real patch at 2K/8K/16K, widths 1-4, and the long contexts 1K/32K/128K, widths 1, 2, 4,
# all with the timing-only random-latent fill (prefills of 47 layers would not fit one call).
TARBALL=h200-7.tgz FILL="--fill random-latents"
source "$(dirname "$0")/h200-common.sh"
run aa 170 --null --contexts 2048,8192,16384 --widths 1,2,3,4 --reps 8 --max-rounds 14
run real 120 --contexts 2048,8192,16384 --widths 1,2,3,4 --reps 8 --max-rounds 14
run long 200 --contexts 1024,32768,131072 --widths 1,2,4 --reps 6 --max-rounds 8
