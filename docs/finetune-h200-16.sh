#!/usr/bin/env bash
# Issue 16, fourth round on the lent H200: the shipped target and its MTP head fine-tuned against
# greedy loops (sequence-level unlikelihood, mlatui/training/finetune.py), then the shipped draft
# distilled further against the changed target, and both kinds' acceptance measured.
#
# Here, first: bash docs/h200-prepare.sh 4; python -m mlatui.training.prepare --out .corpus16
# --extra-packages ... (see docs/train-h200-16.sh); the long contexts' token ids, from this
# machine's stdlib (the device's Python has another):
#   python -m mlatui.training.acceptance --contexts 1024,2048,4096 --context-ids .corpus16/contexts-128.json ...
# and move docs/data out of the tree (mv docs/data /tmp/docs-data-aside) so each carry is < 64 MiB.
# Calls, back to back on one warm machine:
#   1. carry [".whlp00", ".corpusx"]   cp .whlp00/part.00 /tmp/ && bash docs/finetune-h200-16.sh corpus
# (.corpusx: .corpus16 with its tokens as xz-compressed uint16 .npy, 8.3 MB against 11.8, so the
# tree, a wheel part and the corpus fit one carry:
#   mkdir .corpusx; cp -r .corpus16/{corpus.json,contexts-128.json,tokenizer} .corpusx/;
#   python -c "import numpy as n; d=n.load('.corpus16/tokens.npz'); n.save('.corpusx/train.npy', d['train']); n.save('.corpusx/valid.npy', d['valid'])"
#   xz -9 .corpusx/train.npy)
#   2. carry [".whlp01"]               cp .whlp01/part.01 /tmp/
#   3. carry [".whlp02"]               cp .whlp02/part.02 /tmp/
#   4. carry [".whlq"]                 bash .whlq/install.sh && bash docs/finetune-h200-16.sh 1
#   5.                                 bash docs/finetune-h200-16.sh 2
#   6.                                 bash docs/finetune-h200-16.sh 3
# 1: the fine-tune (MAX_S seconds); $OUT/finetune.jsonl and $OUT/model.
# 2: at once on the one GPU: the fine-tuned model's acceptance with the shipped draft (both kinds,
#    1K/2K/4K and the prompts, and the repetition measure) and the draft distilled against it
#    from the shipped draft; $OUT/acceptance-ft.json, $OUT/draft, $OUT/draft.jsonl.
# 3: the distilled draft's acceptance; $OUT/acceptance-draft.json.
set -u
K=${1:-1}
RUN=${RUN:-/tmp/ft16}
DATA=${DATA:-/tmp/corpus16}
MAX_S=${MAX_S:-520}
export PYTHONPATH=/tmp/site:. PYTHONUNBUFFERED=1
if [ "$K" = corpus ]; then
  mkdir -p "$DATA" && cp -r .corpusx/corpus.json .corpusx/contexts-128.json .corpusx/tokenizer "$DATA/"
  python3 -c "import lzma, numpy as n; n.savez('$DATA/tokens.npz', train=n.load(lzma.open('.corpusx/train.npy.xz')), valid=n.load('.corpusx/valid.npy'))"
  python3 -c "import numpy as n; d=n.load('$DATA/tokens.npz'); print({k: d[k].shape for k in d})"
  exit 0
fi
[ -f "$DATA/tokens.npz" ] || { echo "no corpus in $DATA: send call 1 first (this machine is new?)"; exit 2; }
mkdir -p "$OUT"
acceptance() {  # $1: target folder, $2: draft folder, $3: kinds, $4: out
  python3 -m mlatui.training.acceptance --model "$1" --draft "$2" --kinds "$3" \
    --contexts prompt,1024,2048,4096 --tokens 128 --depth 1,3 --check \
    --context-ids "$DATA/contexts-128.json" --out "$4" > "$4.log" 2>&1
}
case $K in
1)
  timeout -s TERM -k 20 $((MAX_S + 30)) python3 -m mlatui.training.finetune \
    --init mlatui/models/embedded/model --data "$DATA" --out "$RUN" --steps "${STEPS:-700}" \
    --max-seconds "$MAX_S" ${EXTRA_ARGS:-} > "$OUT/finetune.log" 2>&1
  echo "finetune exit $?"
  cp "$RUN/finetune.jsonl" "$OUT/" && cp -r "$RUN/model" "$OUT/model"
  tail -3 "$OUT/finetune.log"
  ;;
2)
  [ -f "$RUN/model/config.json" ] || { echo "no fine-tuned model in $RUN: the machine is new"; exit 2; }
  timeout -s TERM -k 20 $((MAX_S + 30)) python3 -m mlatui.training.train --data "$DATA" \
    --out "$RUN/distil" --teacher "$RUN/model" --draft-init mlatui/models/embedded/draft \
    --hard-distill 1 --preset full --seq 4096 --batch 4 --steps "${DRAFT_STEPS:-2000}" \
    --warmup 100 --lr 5e-4 --max-seconds "$MAX_S" --ckpt-every-min 3 --eval-every 250 \
    --no-tokenizer > "$OUT/draft.log" 2>&1 &
  pid=$!
  acceptance "$RUN/model" mlatui/models/embedded/draft model,mtp "$OUT/acceptance-ft.json"
  echo "acceptance exit $?"; tail -12 "$OUT/acceptance-ft.json.log"
  wait $pid; echo "distil exit $?"
  cp "$RUN/distil/train.jsonl" "$OUT/draft.jsonl"; cp -r "$RUN/distil/draft" "$OUT/draft"
  cp "$DATA"/tokenizer/tokenizer*.json "$OUT/draft/" 2>/dev/null
  tail -2 "$OUT/draft.log"
  ;;
3)
  [ -d "$RUN/distil/draft" ] || { echo "no distilled draft in $RUN: the machine is new"; exit 2; }
  cp "$DATA"/tokenizer/tokenizer*.json "$RUN/distil/draft/"
  acceptance "$RUN/model" "$RUN/distil/draft" model "$OUT/acceptance-draft.json"
  echo "acceptance exit $?"; tail -8 "$OUT/acceptance-draft.json.log"
  ;;
esac
