#!/usr/bin/env bash
# H200 call A (issue 9): GLM-4.7-Flash full geometry, random 4-bit weights, real prefills.
# The A/A null run (both stock, then both patched) and the real patch, contexts 2K/8K/16K,
# widths 1-4, through the one sampler (rounds of A B B A quads, paired CIs).
TARBALL=h200-4a.tgz FILL=""
source "$(dirname "$0")/h200-common.sh"
run aa 300 --null --contexts 2048,8192,16384 --widths 1,2,3,4 --reps 8 --max-rounds 16
run real 200 --contexts 2048,8192,16384 --widths 1,2,3,4 --reps 8 --max-rounds 16
