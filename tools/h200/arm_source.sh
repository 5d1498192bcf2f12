#!/usr/bin/env bash
# H200 check of a source-tree arm (--arm-source), after MLX CUDA is installed into /tmp/site
# (../shared/device/MLX_CUDA.md): GLM-4.7-Flash full geometry, random 4-bit weights,
# random-latent fill, 32K and 128K, widths 1,2,4, on the installed pre-fix mlx-lm:
#   (1) gate-policy: default arms, installed vs formula (mlatui's rewrite of the gate);
#   (2) pr-tree: installed vs a copy with the upstream fix's form (tests/pr_form.py) as arm B,
#       its own code, the weights shared.
# Both in one call, so the two tables come from one machine state; stock/patched at L = 2 of
# (2) should lie within the CIs of (1). `mlatui compare` of the two is written beside them.
# Usage: bash tools/h200/arm_source.sh   (writes $OUT/r, tarred to $OUT/h200-arm-source.tgz)
set -u
export PYTHONPATH=/tmp/site:. PYTHONUNBUFFERED=1
mkdir -p "$OUT/r"
run() {  # run NAME LIMIT_S COMMAND...: stdout .md, stderr .log, recording .jsonl, re-tar after each
  local name=$1 limit=$2; shift 2
  timeout "$limit" "$@" --out "$OUT/r/$name.jsonl" > "$OUT/r/$name.md" 2> "$OUT/r/$name.log"
  echo "$name exit $? at $(date +%T)"
  tar czf "$OUT/h200-arm-source.tgz" -C "$OUT" r
}
python3 tests/pr_form.py /tmp/prlm > "$OUT/r/pr_form.txt"
S=scenarios/glm47-flash.toml
LONG=(--random-weights --phases sweep --fill random-latents --contexts 32768,131072
      --widths 1,2,4 --reps 6 --max-rounds 8)
run gate-policy 250 python3 -m mlatui bench $S "${LONG[@]}"
run pr-tree 250 python3 -m mlatui bench $S "${LONG[@]}" --arm-source B=/tmp/prlm
python3 -m mlatui compare "$OUT/r/gate-policy.jsonl" "$OUT/r/pr-tree.jsonl" --dump \
  > "$OUT/r/compare.md" 2>&1
tar czf "$OUT/h200-arm-source.tgz" -C "$OUT" r
