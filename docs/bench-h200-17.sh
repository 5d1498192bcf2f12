#!/usr/bin/env bash
# H200, session 7, second machine (issue 9's "patched L = 3 at 16K within 1.25x of 2K", paired).
# Wheel: `bash docs/h200-prepare.sh 4`, calls 1-3 carry .whlp00..02 (`cp .whlpNN/part.NN /tmp/`;
# docs/data moved out of the tree meanwhile), then:
#   4. carry [".whlq"]  bash .whlq/install.sh && bash docs/bench-h200-17.sh     (timeout 600)
# The sweep measures 2K and 16K a minute apart (session 6: their L = 1 levels differed 1.44x, so
# the unpaired 16K/2K ratio read 1.57x); `bench context-pair` alternates the two lengths inside
# every A B B A quad on one arm. GLM-4.7-Flash full geometry, random 4-bit weights, random-latent
# fill (timing only), widths 1-4; the patched arm, then the stock arm for contrast.
set -u
export PYTHONPATH=/tmp/site:. PYTHONUNBUFFERED=1
mkdir -p "$OUT/r"
S=scenarios/glm47-flash.toml
pair() {  # `pair NAME LIMIT_S ARGS...`
  local name=$1 limit=$2; shift 2
  timeout "$limit" python3 -m mlatui bench context-pair $S --random-weights --fill random-latents \
    --contexts 2048,16384 --widths 1,2,3,4 "$@" --out "$OUT/r/$name.jsonl" > "$OUT/r/$name.md" 2> "$OUT/r/$name.log"
  echo "$name exit $? at $(date +%T)"
  tar czf "$OUT/h200-17.tgz" -C "$OUT" r
}
pair pair-patched 260 --variant patched --rounds 200 --max-seconds 170
pair pair-stock 220 --variant stock --rounds 200 --max-seconds 130
