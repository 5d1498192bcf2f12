#!/usr/bin/env bash
# H200 runs of the embedded model's long-context extension (docs/embedded-model.md), after MLX
# CUDA is installed into /tmp/site (../shared/device/MLX_CUDA.md). The corpus of
# tools.train.prepare travels split beside the wheel parts: .whlA/corpus.0, .whlB/corpus.1,
# .whlC/corpus.2 (copied to /tmp by the first three calls) and .whlE/corpus/ (corpus.json,
# tokenizer/).
#   part "extend": position-bucketed quality of the shipped model, plain and with YaRN untrained;
#     tools.train.extend; ship; the same measures of the outcome. The new embedded folder is kept
#     in /tmp/newemb for the next call and comes back split in $OUT/emb.tgz.*.
#   part "first-run": the default scenario under launch's budget, three
#     times, then its A/A (--null) under the same budget.
# Usage: bash tools/h200/longctx.sh extend|first-run
set -u
part=${1:?extend or first-run}
export PYTHONPATH=/tmp/site:. PYTHONUNBUFFERED=1
R=$OUT/r D=/tmp/corpus16 RUN=/tmp/ext
mkdir -p "$R"
pack() { tar czf "$OUT/h200-$part.tgz" -C "$OUT" r; }
case $part in
  extend)
    mkdir -p $D && cat /tmp/corpus.0 /tmp/corpus.1 /tmp/corpus.2 > $D/tokens.npz && cp -r .whlE/corpus/* $D/
    YARN='rope_scaling={"type": "deepseek_yarn", "factor": 8.0, "original_max_position_embeddings": 4096, "beta_fast": 32, "beta_slow": 1, "mscale": 1.0, "mscale_all_dim": 0.0}'
    timeout 80 python3 -m tools.train.longctx --data $D --windows 1 --out "$R/longctx-shipped.json" > "$R/lc-shipped.log" 2>&1
    echo "shipped exit $? at $(date +%T)"; pack
    timeout 80 python3 -m tools.train.longctx --data $D --windows 1 --set max_position_embeddings=32768 --set "$YARN" \
      --out "$R/longctx-yarn-untrained.json" > "$R/lc-yarn.log" 2>&1
    echo "yarn-untrained exit $? at $(date +%T)"; pack
    timeout 330 python3 -m tools.train.extend --data $D --out $RUN --max-seconds ${EXTEND_S:-280} > "$R/extend.log" 2>&1
    echo "extend exit $? at $(date +%T)"
    cp $RUN/extend.jsonl $RUN/distil/distil.jsonl "$R/" 2>/dev/null; pack
    python3 -m tools.train.ship --run $RUN --data $D --extended > "$R/ship.log" 2>&1
    timeout 90 python3 -m tools.train.longctx --data $D --out "$RUN/longctx-extended.json" > "$R/lc-extended.log" 2>&1
    echo "extended exit $? at $(date +%T)"
    cp "$R/longctx-shipped.json" "$R/longctx-yarn-untrained.json" $RUN/
    python3 -m tools.train.ship --run $RUN --data $D --extended >> "$R/ship.log" 2>&1
    cp $RUN/longctx-extended.json "$R/"; pack
    rm -rf /tmp/newemb && cp -r mlatui/models/embedded /tmp/newemb
    tar czf /tmp/emb.tgz -C mlatui/models embedded && split -b 15M -d -a 1 /tmp/emb.tgz "$OUT/emb.tgz."
    ls -la "$OUT"
    ;;
  first-run)
    for i in 1 2 3; do
      timeout 170 python3 -m mlatui bench scenarios/default.toml --budget 100 \
        --out "$R/default-budget100-$i.jsonl" > "$R/default-budget100-$i.md" 2> "$R/default-budget100-$i.log"
      echo "run $i exit $? at $(date +%T)"; pack
    done
    timeout 150 python3 -m mlatui bench scenarios/default.toml --budget 100 --null \
      --out "$R/default-budget100-aa.jsonl" > "$R/default-budget100-aa.md" 2> "$R/default-budget100-aa.log"
    echo "aa exit $? at $(date +%T)"; pack
    ;;
esac
