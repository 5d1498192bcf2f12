#!/usr/bin/env bash
# Issue 16 on the lent H200: the second embedded model (4096-token windows, an MTP head trained with
# the target, the draft model), in phases of < 9 minutes on one warm machine.
#
# Here, first: `bash ../shared/device/prepare_mlx_cuda.sh` (.whlA/.whlB/.whlC) and
#   python -m mlatui.training.prepare --out .corpus16 --extra-packages numpy,rich,textual,jinja2,\
#     click,_pytest,pydantic,huggingface_hub,mlx_lm,anyio,packaging,markdown_it \
#     --site-packages .venv/lib/python3.11/site-packages      (CPU, ~1-2 min; .corpus16 is ignored)
# The tree (~35 MB) plus one wheel part (~30 MB) fills a call's 64 MiB, so the corpus has its own
# call. Calls, each sent within ~30 s of the last (a machine stays warm 30 s; /tmp survives while
# it is held; if a call reports warm: false, the machine is new: start again at call 1):
#   1. carry [".whlA"]     cp .whlA/part.00 /tmp/
#   2. carry [".whlB"]     cp .whlB/part.01 /tmp/
#   3. carry [".corpus16"] mkdir -p /tmp/corpus16 && cp .corpus16/corpus.json .corpus16/tokens.npz /tmp/corpus16/
#   4. carry [".whlC"]     bash .whlC/install.sh && bash docs/train-h200-16.sh 1      (timeout_s 600)
#   5.                     bash docs/train-h200-16.sh 2                               (timeout_s 600)
#   6.                     bash docs/train-h200-16.sh 3   ... until train.jsonl ends with "done"
# Phase 1 times its first 30 steps and plans the step count so that training takes BUDGET_S
# seconds over all phases (default 1260 s: 30 device minutes less the machine's start, the three
# carrying calls, each call's start-up and the gaps between calls). Every phase stops itself with
# a checkpoint MAX_S seconds after it starts (exit 3: run the next phase; 0: finished).
#
# The full checkpoint (float32 parameters + AdamW moments + the data sampler's RNG state, ~160 MB)
# stays in /tmp/train16/ckpt on the device: it is over what a call brings back (8 files, 16 MiB
# each, 64 MiB) and what one carries (64 MiB with the tree), so an exact resume needs the machine
# held. Every phase brings back what is needed to ship or judge the run: $OUT/train.jsonl (the
# whole log), $OUT/model (float16 target with its MTP layer under model.layers.6.*, 2 shards),
# $OUT/draft, and $OUT/run16.tgz (log, this phase's console, state.json, configs). Ship with
#   python -m mlatui.training.ship --run <copy of $OUT> --data .corpus16
# EXTRA_ARGS (appended, so they win) lets a CPU dry run use --preset tiny --seq 64 --steps 12.
set -u
K=${1:-1}
RUN=${RUN:-/tmp/train16}
DATA=${DATA:-/tmp/corpus16}
MAX_S=${MAX_S:-$([ "$K" = 1 ] && echo 520 || echo 550)}
export PYTHONPATH=/tmp/site:. PYTHONUNBUFFERED=1
[ -f "$DATA/tokens.npz" ] || { echo "no corpus in $DATA: send call 3 first (this machine is new?)"; exit 2; }
resume=()
if [ -f "$RUN/ckpt/state.json" ]; then resume=(--resume)
elif [ "$K" != 1 ]; then echo "no checkpoint in $RUN: the machine was given back; start again at call 1"; exit 2; fi
mkdir -p "$OUT"
timeout -s TERM -k 20 $((MAX_S + 30)) python3 -m mlatui.training.train --data "$DATA" --out "$RUN" \
  --preset full --seq 4096 --batch 4 --steps auto --train-budget-s "${BUDGET_S:-1260}" \
  --max-seconds "$MAX_S" --ckpt-every-min 3 --eval-every 250 --no-tokenizer \
  --mtp-weight 0.3 --mtp-weight-final 0.1 --mtp-switch 0.7 "${resume[@]}" ${EXTRA_ARGS:-} \
  > "$OUT/phase$K.log" 2>&1
rc=$?
echo "phase $K: train exit $rc at $(date +%T)"
grep -E '"event"|valid_' "$OUT/phase$K.log" | cut -c1-400 | tail -n 12
cp "$RUN/train.jsonl" "$OUT/" 2>/dev/null
mkdir -p "$OUT/model" "$OUT/draft"
cp "$RUN"/model/*.safetensors "$RUN/model/config.json" "$OUT/model/" 2>/dev/null
cp "$RUN"/draft/*.safetensors "$RUN/draft/config.json" "$OUT/draft/" 2>/dev/null
tar czf "$OUT/run16.tgz" -C "$RUN" train.jsonl ckpt/state.json model/config.json draft/config.json \
  -C "$OUT" "phase$K.log" 2>/dev/null
rm -f "$OUT/phase$K.log"
exit $rc
