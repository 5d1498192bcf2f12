#!/usr/bin/env bash
# Issue 16, session 12 on the lent H200: distil the shipped MTP head and draft model against the
# frozen shipped target for the sampled acceptance each one's rule computes at T = 0.8
# (mlatui.training.distil: 1 - TV for the MTP head's rejection sampling, sum p q for mlx-lm's
# exact match), two settings side by side on the one GPU, then greedy acceptance of both at
# 1K / 2K / 4K (the bars). The target does not change, so only the head (2.8 MB) and the
# draft (9 MB) come back; `distil --steps 0 --mtp DIR` grafts a head onto the shipped target here.
# Here, first: bash docs/h200-prepare.sh 4, .corpusx as in docs/finetune-h200-16.sh (with
# contexts-128.json written by the acceptance module on this machine's stdlib), docs/data moved
# out of the tree during the calls. Calls, back to back on one warm machine:
#   1. carry [".whlp00", ".corpusx"]  cp .whlp00/part.00 /tmp/ && bash docs/finetune-h200-16.sh corpus
#   2. carry [".whlp01"]              cp .whlp01/part.01 /tmp/
#   3. carry [".whlp02"]              cp .whlp02/part.02 /tmp/
#   4. carry [".whlq"]                bash .whlq/install.sh && bash docs/distil-h200-18.sh
# $OUT: {A,B}-mtp.safetensors, {A,B}-draft.safetensors, distil18.tgz (logs, acceptance JSON).
set -u
DATA=${DATA:-/tmp/corpus16}
MAX_S=${MAX_S:-330}
export PYTHONPATH=/tmp/site:. PYTHONUNBUFFERED=1
[ -f "$DATA/tokens.npz" ] || { echo "no corpus in $DATA: send call 1 first (this machine is new?)"; exit 2; }
mkdir -p "$OUT" /tmp/d18
distil() {  # $1: name, then distil's own arguments
  local name=$1; shift
  timeout -s TERM -k 20 $((MAX_S + 60)) python3 -m mlatui.training.distil \
    --model mlatui/models/embedded/model --draft mlatui/models/embedded/draft --data "$DATA" \
    --out "/tmp/d18/$name" --steps 1500 --batch 4 --seq 4096 --max-seconds "$MAX_S" \
    --eval-every 100 "$@" > "/tmp/d18/$name.log" 2>&1
  echo "$name exit $? at $(date +%T)"
}
acceptance() {  # $1: name (its RUN/model and RUN/draft; the shipped ones where not written)
  local run=/tmp/d18/$1 model=mlatui/models/embedded/model draft=mlatui/models/embedded/draft
  [ -f "$run/model/config.json" ] && model=$run/model
  [ -f "$run/draft/config.json" ] && draft=$run/draft
  python3 -m mlatui.training.acceptance --model "$model" --draft "$draft" --kinds model,mtp \
    --contexts 1024,2048,4096 --tokens 128 --depth 1 --context-ids "$DATA/contexts-128.json" \
    --out "/tmp/d18/$1-acceptance.json" > "/tmp/d18/$1-acceptance.log" 2>&1
  echo "$1 acceptance exit $?"; grep "^|" "/tmp/d18/$1-acceptance.log"
}
pack() {
  tar czf "$OUT/distil18.tgz" -C /tmp/d18 --exclude='*/model' --exclude='*/draft' --exclude='*/last' .
  for r in A B; do
    [ -f /tmp/d18/$r/mtp.safetensors ] && cp /tmp/d18/$r/mtp.safetensors "$OUT/$r-mtp.safetensors"
    [ -f /tmp/d18/$r/draft/model.safetensors ] && cp /tmp/d18/$r/draft/model.safetensors "$OUT/$r-draft.safetensors"
  done
  ls -la "$OUT"
}
distil A --lr 3e-4 --anchor 0.1 &
distil B --lr 1e-4 --anchor 0.5 &
wait
for r in A B; do grep -E '"(start|best|done)"' /tmp/d18/$r/distil.jsonl | cut -c1-400 | sed "s/^/$r /"; done
pack
acceptance A & acceptance B & wait
pack
