#!/usr/bin/env bash
# Shared by docs/bench-h200-{4,5,7,8}.sh: `run NAME LIMIT_S ARGS...` runs
# `mlatui bench scenarios/glm47-flash.toml --random-weights --phases sweep $FILL ARGS...` under a
# time limit, writes NAME.{jsonl,md,log} under $OUT/r and re-tars $OUT/r into $OUT/$TARBALL
# after every run (a later timeout never loses an earlier run).
set -u
mkdir -p "$OUT/r"
export MLATUI_CACHE_DIR="$OUT/r/cache"
S=scenarios/glm47-flash.toml
FILL=${FILL:-}
run() {
  local name=$1 limit=$2; shift 2
  timeout "$limit" python3 -m mlatui bench $S --random-weights --phases sweep $FILL "$@" \
    --out "$OUT/r/$name.jsonl" > "$OUT/r/$name.md" 2> "$OUT/r/$name.log"
  echo "$name exit $? at $(date +%T)"
  tar czf "$OUT/$TARBALL" -C "$OUT" r
}
tune() {  # `tune NAME LIMIT_S ARGS...`: the scenario's tune phase, random-latent fill
  local name=$1 limit=$2; shift 2
  timeout "$limit" python3 -m mlatui bench $S --random-weights --phases tune --fill random-latents "$@" \
    --out "$OUT/r/$name.jsonl" > "$OUT/r/$name.md" 2> "$OUT/r/$name.log"
  echo "$name exit $? at $(date +%T)"
  tar czf "$OUT/$TARBALL" -C "$OUT" r
}
