#!/usr/bin/env bash
# H200 call E (issue 9): after the settle step (each arm's step before a quad is a light L = 1):
# the real patch at 2K/16K, widths 1, 2, 4, then the A/A at the same, random-latent fill.
TARBALL=h200-8.tgz FILL="--fill random-latents"
source "$(dirname "$0")/h200-common.sh"
run real-settle 120 --contexts 2048,16384 --widths 1,2,4 --reps 8 --max-rounds 12
run aa-settle 140 --null --contexts 2048,16384 --widths 1,2,4 --reps 8 --max-rounds 10
