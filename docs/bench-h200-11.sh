#!/usr/bin/env bash
# H200 call C (issue 10, after the synthetic draft moved into mlx-lm's sampler hook): the tune at
# 2K/8K/16K in one process (it pays the MLX CUDA JIT first), then decode-parity at 2K.
TARBALL=h200-11.tgz
source "$(dirname "$0")/h200-common.sh"
timeout 440 python3 -m mlatui bench $S --random-weights --phases tune --fill random-latents \
  --contexts 2048,8192,16384 --tokens 16 --reps 3 --max-rounds 4 \
  --out "$OUT/r/tune.jsonl" > "$OUT/r/tune.md" 2> "$OUT/r/tune.log"
echo "tune exit $? at $(date +%T)"; tar czf "$OUT/$TARBALL" -C "$OUT" r
timeout 110 python3 -m mlatui bench decode-parity $S --random-weights --context 2048 --tokens 16 \
  --rounds 10 --out "$OUT/r/parity.jsonl" > "$OUT/r/parity.md" 2> "$OUT/r/parity.log"
echo "parity exit $? at $(date +%T)"; tar czf "$OUT/$TARBALL" -C "$OUT" r
