#!/usr/bin/env bash
# Issue 16, the fine-tune's second stage on the H200: the first stage (docs/finetune-h200-16.sh,
# unlikelihood on 256/512-token prefixes, half of them file openings) broke the loops after the
# shipped prompts (distinct 4-grams 0.26 -> 0.68) but not at 1K-4K (0.32-0.37). This continues it
# with 1K-4K prefixes, then measures both kinds (the draft: the first stage's distilled one).
# Calls, back to back: 1-3 as in docs/finetune-h200-16.sh (.whlp00 + .corpusx, .whlp01, .whlp02),
#   4. carry [".corpus-ft"]   cp -r .corpus-ft /tmp/ft    (stage 1's model/ and draft/)
#   5. carry [".whlq"]        bash .whlq/install.sh && bash docs/finetune-h200-16b.sh 1
#   6.                        bash docs/finetune-h200-16b.sh 2   (a draft distilled against it)
#   7.                        bash docs/finetune-h200-16b.sh 3   (that draft's acceptance)
set -u
K=${1:-1}
DATA=${DATA:-/tmp/corpus16}
export PYTHONPATH=/tmp/site:. PYTHONUNBUFFERED=1
mkdir -p "$OUT"
acceptance() {  # $1: target folder, $2: draft folder, $3: kinds, $4: out
  python3 -m mlatui.training.acceptance --model "$1" --draft "$2" --kinds "$3" \
    --contexts prompt,1024,2048,4096 --tokens 128 --depth 1,3 --check \
    --context-ids "$DATA/contexts-128.json" --out "$4" > "$4.log" 2>&1
  echo "acceptance exit $?"; grep "^|" "$4.log" | tail -17
  python3 -c "import json; print(json.load(open('$4'))['repetition'])"
}
case $K in
1)
  [ -d /tmp/ft/model ] || { echo "no stage-1 model in /tmp/ft: send call 4 first"; exit 2; }
  timeout -s TERM -k 20 300 python3 -m mlatui.training.finetune --init /tmp/ft/model \
    --data "$DATA" --out /tmp/ft2 --steps "${STEPS:-460}" --max-seconds "${MAX_S:-270}" \
    --lr 1e-4 --ul-prefix 1024,2048,3968 --ul-openings 0.3 --ul-batch 16 --eval-every 230 \
    > "$OUT/finetune2.log" 2>&1
  echo "finetune exit $?"
  cp /tmp/ft2/finetune.jsonl "$OUT/finetune2.jsonl" && cp -r /tmp/ft2/model "$OUT/model"
  grep greedy_distinct "$OUT/finetune2.jsonl" | cut -c1-260
  acceptance /tmp/ft2/model /tmp/ft/draft model,mtp "$OUT/acceptance-ft2.json"
  ;;
2)
  timeout -s TERM -k 20 460 python3 -m mlatui.training.train --data "$DATA" --out /tmp/ft2/distil \
    --teacher /tmp/ft2/model --draft-init /tmp/ft/draft --hard-distill 1 --preset full --seq 4096 \
    --batch 4 --steps "${DRAFT_STEPS:-1600}" --warmup 100 --lr 5e-4 --max-seconds 430 \
    --ckpt-every-min 3 --eval-every 250 --no-tokenizer > "$OUT/draft.log" 2>&1
  echo "distil exit $?"
  cp /tmp/ft2/distil/train.jsonl "$OUT/draft.jsonl"; cp -r /tmp/ft2/distil/draft "$OUT/draft"
  cp "$DATA"/tokenizer/tokenizer*.json "$OUT/draft/"; tail -1 "$OUT/draft.log" | cut -c1-300
  ;;
3)
  cp "$DATA"/tokenizer/tokenizer*.json /tmp/ft2/distil/draft/
  acceptance /tmp/ft2/model /tmp/ft2/distil/draft model "$OUT/acceptance-draft2.json"
  ;;
esac
