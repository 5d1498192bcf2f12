#!/usr/bin/env bash
# H200 call A (issue 10): MLX CUDA JIT warm-up (throwaway), decode-parity at 2K (GLM-4.7-Flash
# full geometry, random 4-bit weights, synthetic draft), then the tune at 2K.
TARBALL=h200-9.tgz
source "$(dirname "$0")/h200-common.sh"
P="python3 -m mlatui bench decode-parity $S --random-weights"
timeout 170 $P --context 512 --tokens 8 --rounds 2 > "$OUT/r/jit.md" 2> "$OUT/r/jit.log"; echo "jit exit $? $(date +%T)"
timeout 150 $P --context 2048 --tokens 32 --rounds 6 --out "$OUT/r/parity-2k.jsonl" > "$OUT/r/parity-2k.md" 2> "$OUT/r/parity-2k.log"; echo "parity exit $? $(date +%T)"
tar czf "$OUT/$TARBALL" -C "$OUT" r
tune tune-2k 200 --contexts 2048 --reps 4 --max-rounds 6
