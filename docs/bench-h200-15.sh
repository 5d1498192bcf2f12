#!/usr/bin/env bash
# H200, session 6 (issue 9's A/A bar with the caches swapped between the arms every round; issue
# 10's parity bar). Wheel: `bash docs/h200-prepare.sh 4`, calls 1-3 carry .whlp00..02
# (`cp .whlpNN/part.NN /tmp/`; docs/data moved out of the tree meanwhile: 26 MiB), then:
#   4. carry [".whlq"]  bash .whlq/install.sh && bash docs/bench-h200-15.sh aa      (timeout 600)
#   5.                  bash docs/bench-h200-15.sh parity                           (timeout 600)
# aa: the A/A of issue 9's bar (2K/8K/16K, widths 1-4), random-latent fill.
# parity: decode-parity at 2K, 24 rounds of 32-token blocks; then the real patch at 2K/16K with
#   what time is left.
set -u
export PYTHONPATH=/tmp/site:. PYTHONUNBUFFERED=1
TARBALL=h200-15-$1.tgz FILL="--fill random-latents"
source "$(dirname "$0")/h200-common.sh"
case $1 in
aa)
  run aa 540 --null --contexts 2048,8192,16384 --widths 1,2,3,4 --reps 16 --max-rounds 24 ;;
parity)
  timeout 330 python3 -m mlatui bench decode-parity $S --random-weights --context 2048 --tokens 32 \
    --rounds 24 --out "$OUT/r/parity.jsonl" > "$OUT/r/parity.md" 2> "$OUT/r/parity.log"
  echo "parity exit $? at $(date +%T)"; tar czf "$OUT/$TARBALL" -C "$OUT" r
  run real 230 --contexts 2048,16384 --widths 1,2,3,4 --reps 12 --max-rounds 16 ;;
esac
