#!/usr/bin/env bash
# H200 call B (issue 10): the tune at 8K and 16K (machine still warm from call A: no JIT).
TARBALL=h200-10.tgz
source "$(dirname "$0")/h200-common.sh"
tune tune-8k 260 --contexts 8192 --reps 4 --max-rounds 4
tune tune-16k 280 --contexts 16384 --reps 4 --max-rounds 4
