#!/usr/bin/env bash
# Issue 16, third round on the lent H200: a new draft model distilled from the shipped target,
# which stays frozen (mlatui/models/embedded/model, MTP head included, is not retrained). Two
# candidates train at once on the one GPU (the 13M-parameter models leave it mostly idle):
#   deep: 4 fresh layers, MLP 768, MLA r/n/v 128/64/64 (the small draft's ranks), 4.5M parameters
#   skip: the teacher's layers 0, 2 and 5 copied, then distilled (r/n/v 512/128/128), 5.1M
# both starting from the teacher's embedding and final norm, loss = CE(data) + KL(teacher||draft)
# + CE(teacher's argmax) (--hard-distill 1: the greedy acceptance the bar counts).
#
# Here, first: bash docs/h200-prepare.sh 4; python -m mlatui.training.prepare --out .corpus16
# --extra-packages ... (see docs/train-h200-16.sh; the tokenizer's sha256 must equal the shipped one);
# move docs/data out of the tree (mv docs/data /tmp/docs-data-aside) so each carry stays < 64 MiB.
# Calls, back to back on one warm machine:
#   1. carry [".whlp00", ".corpus16"]  cp .whlp00/part.00 /tmp/ && mkdir -p /tmp/corpus16 && cp .corpus16/corpus.json .corpus16/tokens.npz /tmp/corpus16/
#   2. carry [".whlp01"]               cp .whlp01/part.01 /tmp/
#   3. carry [".whlp02"]               cp .whlp02/part.02 /tmp/
#   4. carry [".whlq"]                 bash .whlq/install.sh && bash docs/train-h200-16b.sh 1
#   5.                                 bash docs/train-h200-16b.sh 2      (and 3 ... until done)
# Each phase stops both runs with a checkpoint MAX_S seconds after it starts (exit 3: run the next
# phase; 0: finished) and brings back, per candidate, $OUT/NAME/train.jsonl and $OUT/NAME/draft.
set -u
K=${1:-1}
RUN=${RUN:-/tmp/draft16}
DATA=${DATA:-/tmp/corpus16}
MAX_S=${MAX_S:-530}
export PYTHONPATH=/tmp/site:. PYTHONUNBUFFERED=1
[ -f "$DATA/tokens.npz" ] || { echo "no corpus in $DATA: send call 1 first (this machine is new?)"; exit 2; }
mkdir -p "$OUT"
declare -A SHAPE=([deep]="--draft-preset deep --lr 2e-3" [skip]="--draft-init-layers 0,2,5 --lr 1e-3")
pids=()
for name in deep skip; do
  resume=()
  if [ -f "$RUN/$name/ckpt/state.json" ]; then resume=(--resume)
  elif [ "$K" != 1 ]; then echo "no checkpoint in $RUN/$name: the machine is new; start again at call 1"; exit 2; fi
  # shellcheck disable=SC2086
  timeout -s TERM -k 20 $((MAX_S + 30)) python3 -m mlatui.training.train --data "$DATA" \
    --out "$RUN/$name" --teacher mlatui/models/embedded/model ${SHAPE[$name]} --hard-distill 1 \
    --preset full --seq 4096 --batch 4 --steps auto --train-budget-s "${BUDGET_S:-950}" \
    --max-seconds "$MAX_S" --ckpt-every-min 3 --eval-every 250 --no-tokenizer "${resume[@]}" \
    ${EXTRA_ARGS:-} > "$OUT/$name-phase$K.log" 2>&1 &
  pids+=($!)
done
rc=0
for p in "${pids[@]}"; do wait "$p"; r=$?; [ $r -gt $rc ] && rc=$r; done
echo "phase $K: exit $rc at $(date +%T)"
for name in deep skip; do
  echo "== $name"; grep -E '"event"|valid_' "$OUT/$name-phase$K.log" | grep -v '"start"\|"resume"' | cut -c1-330 | tail -n 6
  tail -n 3 "$OUT/$name-phase$K.log" | grep -v '^{' | cut -c1-300
  mkdir -p "$OUT/$name/draft"
  cp "$RUN/$name/train.jsonl" "$OUT/$name/" 2>/dev/null
  cp "$RUN/$name"/draft/*.safetensors "$RUN/$name/draft/config.json" "$OUT/$name/draft/" 2>/dev/null
done
nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader 2>/dev/null
exit $rc
