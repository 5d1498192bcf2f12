#!/usr/bin/env bash
# H200 runs for the runtime table in docs/results.md, after MLX CUDA is installed into /tmp/site
# (../shared/device/MLX_CUDA.md: three calls carry the wheel; this is the fourth).
#   part "runtimes": GLM-4.7-Flash full geometry, random 4-bit weights, random-latent fill,
#     1K/32K/128K, widths 1,2,4, on (1) the installed pre-fix mlx-lm, default arms installed vs
#     formula, and (2) a copy with the upstream fix's form (tests/pr_form.py), default arms
#     pre-fix vs installed. Both in one call, so the two tables come from one machine state.
#   part "first-run": the default scenario under launch's budget, three times.
# Usage: bash tools/h200/runtimes.sh runtimes|first-run   (writes $OUT/r, tarred to $OUT/h200-<part>.tgz)
set -u
part=${1:?runtimes or first-run}
export PYTHONPATH=/tmp/site:. PYTHONUNBUFFERED=1
mkdir -p "$OUT/r"
run() {  # run NAME LIMIT_S COMMAND...: stdout .md, stderr .log, recording .jsonl, re-tar after each
  local name=$1 limit=$2; shift 2
  timeout "$limit" "$@" --out "$OUT/r/$name.jsonl" > "$OUT/r/$name.md" 2> "$OUT/r/$name.log"
  echo "$name exit $? at $(date +%T)"
  tar czf "$OUT/h200-$part.tgz" -C "$OUT" r
}
case $part in
  runtimes)
    python3 tests/pr_form.py /tmp/prlm > "$OUT/r/pr_form.txt"
    S=scenarios/glm47-flash.toml
    LONG=(--random-weights --phases sweep --fill random-latents --contexts 1024,32768,131072
          --widths 1,2,4 --reps 6 --max-rounds 8)
    run prefix-code 250 python3 -m mlatui bench $S "${LONG[@]}"
    run fixed-code 250 env PYTHONPATH=/tmp/prlm:/tmp/site:. python3 -m mlatui bench $S "${LONG[@]}"
    ;;
  first-run)
    for i in 1 2 3; do
      run "default-budget100-$i" 185 python3 -m mlatui bench scenarios/default.toml --budget 100
    done
    ;;
esac
