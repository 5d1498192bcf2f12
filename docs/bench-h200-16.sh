#!/usr/bin/env bash
# H200, session 7 (issue 10's parity bar on the H200). Wheel: `bash docs/h200-prepare.sh 4`,
# calls 1-3 carry .whlp00..02 (`cp .whlpNN/part.NN /tmp/`; docs/data moved out of the tree
# meanwhile), then:
#   4. carry [".whlq"]  bash .whlq/install.sh && bash docs/bench-h200-16.sh p16     (timeout 600)
#   5.                  bash docs/bench-h200-16.sh p32                              (timeout 600)
# Session 6's parity run spent its rounds on three pairings (16 rounds each, CIs ±5-10%); here
# every round goes to the thread-matched pairing (mlatui's arm worker against the same mlx-lm call
# from a plain thread), the one that separates the harness from the main-thread effect.
# p32: 32-token blocks at 2K, 80 rounds; p16: 16-token blocks at 2K, 130 rounds (shorter blocks:
#   less of the device's drift inside each A B B A quad, more quads per minute).
set -u
export PYTHONPATH=/tmp/site:. PYTHONUNBUFFERED=1
mkdir -p "$OUT/r"
S=scenarios/glm47-flash.toml
parity() {  # `parity NAME LIMIT_S ARGS...`
  local name=$1 limit=$2; shift 2
  timeout "$limit" python3 -m mlatui bench decode-parity $S --random-weights --context 2048 \
    --versus mlx_lm-thread "$@" --out "$OUT/r/$name.jsonl" > "$OUT/r/$name.md" 2> "$OUT/r/$name.log"
  echo "$name exit $? at $(date +%T)"
  tar czf "$OUT/h200-16-$name.tgz" -C "$OUT" r
}
case $1 in
p32) parity parity-2k-32tok 560 --tokens 32 --rounds 80 ;;
p16) parity parity-2k-16tok 560 --tokens 16 --rounds 130 ;;
esac
