#!/usr/bin/env bash
# Issue 16, session 10 on the lent H200: the unlikelihood fine-tune again, now with the anchor
# (the cross-entropy of each unlikelihood step's own prefixes, read from position 0) that session
# 9's runs lacked, three settings side by side on the one GPU, each keeping RUN/best (the most
# distinct continuations on held-out text that is not a shipped prompt, while that text's loss
# rose at most 0.15 nats). The run whose best is most distinct there is chosen by that rule alone,
# then a draft is distilled against it and both kinds' acceptance measured.
# Here, first: bash docs/h200-prepare.sh 4, .corpusx as in docs/finetune-h200-16.sh, and
# docs/data moved out of the tree during the calls. Calls, back to back on one warm machine:
#   1. carry [".whlp00", ".corpusx"]  cp .whlp00/part.00 /tmp/ && bash docs/finetune-h200-16.sh corpus
#   2. carry [".whlp01"]              cp .whlp01/part.01 /tmp/
#   3. carry [".whlp02"]              cp .whlp02/part.02 /tmp/
#   4. carry [".whlq"]                bash .whlq/install.sh && bash docs/finetune-h200-17.sh 1
#   5.                                bash docs/finetune-h200-17.sh 2
#   6.                                bash docs/finetune-h200-17.sh 3
# 1: the three fine-tunes (MAX_S s each, at once); $OUT/ft.tgz (their logs), $OUT/model (chosen).
# 2: the chosen model's acceptance (MTP head, shipped draft) beside a draft distilled against it;
#    $OUT/acc.tgz, $OUT/draft.  3: that draft's acceptance; $OUT/acc-draft.tgz.
set -u
K=${1:-1}
DATA=${DATA:-/tmp/corpus16}
MAX_S=${MAX_S:-470}
export PYTHONPATH=/tmp/site:. PYTHONUNBUFFERED=1
[ -f "$DATA/tokens.npz" ] || { echo "no corpus in $DATA: send call 1 first (this machine is new?)"; exit 2; }
mkdir -p "$OUT"
acceptance() {  # $1: target folder, $2: draft folder, $3: kinds, $4: out
  python3 -m mlatui.training.acceptance --model "$1" --draft "$2" --kinds "$3" \
    --contexts prompt,1024,2048,4096 --tokens 128 --depth 1,3 --check \
    --context-ids "$DATA/contexts-128.json" --out "$4" > "$4.log" 2>&1
  echo "acceptance exit $?"; grep "^|" "$4.log" | tail -14
}
finetune() {  # $1: name, then finetune's own arguments
  local name=$1; shift
  timeout -s TERM -k 20 $((MAX_S + 40)) python3 -m mlatui.training.finetune \
    --init mlatui/models/embedded/model --data "$DATA" --out "/tmp/ft17/$name" --steps 600 \
    --max-seconds "$MAX_S" --eval-every 60 "$@" > "/tmp/ft17/$name.log" 2>&1
  echo "$name exit $?"
}
case $K in
1)
  mkdir -p /tmp/ft17
  if [ "${ROUND:-1}" = 1 ]; then  # a and c ran out of GPU memory beside b (--ul-batch 32 each)
    finetune a --lr 2e-4 --ul-prefix 256,512,1024 --ul-openings 0.5 &
    finetune b --lr 2e-4 --ul-prefix 256,512,1024 --ul-openings 0.5 --ul-anchor 2 --ul-weight 0.5 &
    finetune c --lr 2e-4 --ul-prefix 256,1024,2048,3968 --ul-openings 0.3 &
  else  # round 2: from round 1's chosen best, put in the tree's mlatui/models/embedded/model
    finetune a --lr 1.5e-4 --ul-prefix 256,512,1024 --ul-openings 0.5 --ul-anchor 2 --ul-batch 16 &
    finetune c --lr 2e-4 --ul-prefix 256,512,1024,2048 --ul-openings 0.4 --ul-batch 16 &
  fi
  wait
  for r in a b c; do [ -f /tmp/ft17/$r/finetune.jsonl ] && grep '"best"' /tmp/ft17/$r/finetune.jsonl | tail -1 | sed "s/^/$r /"; done
  chosen=$(python3 - <<'EOF'
import json
best = {}
import os
for r in "abc":
    if not os.path.exists(f"/tmp/ft17/{r}/finetune.jsonl"):
        continue
    for line in open(f"/tmp/ft17/{r}/finetune.jsonl"):
        rec = json.loads(line)
        if rec.get("event") == "best":
            best[r] = rec["select_distinct_4gram"]
print(max(best, key=best.get) if best else "")
EOF
)
  echo "chosen: ${chosen:-none}"
  (cd /tmp/ft17 && tar czf "$OUT/ft.tgz" ./*.log ./*/finetune.jsonl)
  [ -n "$chosen" ] || exit 3
  ln -sfn "/tmp/ft17/$chosen/best" /tmp/ft17/chosen
  mkdir -p "$OUT/model" && cp /tmp/ft17/chosen/*.safetensors /tmp/ft17/chosen/config.json "$OUT/model/"
  ;;
2)
  [ -f /tmp/ft17/chosen/config.json ] || { echo "no chosen model: the machine is new"; exit 2; }
  timeout -s TERM -k 20 $((${DRAFT_S:-440} + 30)) python3 -m mlatui.training.train --data "$DATA" --out /tmp/ft17/distil \
    --teacher /tmp/ft17/chosen --draft-init mlatui/models/embedded/draft --hard-distill 1 \
    --preset full --seq 4096 --batch 4 --steps "${DRAFT_STEPS:-2000}" --warmup 100 --lr 5e-4 \
    --max-seconds ${DRAFT_S:-440} --ckpt-every-min 3 --eval-every 250 --no-tokenizer > /tmp/ft17/draft.log 2>&1 &
  pid=$!
  acceptance /tmp/ft17/chosen mlatui/models/embedded/draft model,mtp /tmp/ft17/acc-chosen.json
  wait $pid; echo "distil exit $?"; tail -2 /tmp/ft17/draft.log | cut -c1-400
  tar czf "$OUT/acc.tgz" -C /tmp/ft17 acc-chosen.json acc-chosen.json.log draft.log distil/train.jsonl
  mkdir -p "$OUT/draft" && cp /tmp/ft17/distil/draft/*.safetensors /tmp/ft17/distil/draft/config.json "$OUT/draft/"
  ;;
3)
  [ -d /tmp/ft17/distil/draft ] || { echo "no distilled draft: the machine is new"; exit 2; }
  cp "$DATA"/tokenizer/tokenizer*.json /tmp/ft17/distil/draft/
  acceptance /tmp/ft17/chosen /tmp/ft17/distil/draft model /tmp/ft17/acc-draft.json
  tar czf "$OUT/acc-draft.tgz" -C /tmp/ft17 acc-draft.json acc-draft.json.log
  ;;
esac
