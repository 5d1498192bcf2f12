#!/usr/bin/env bash
# H200, session 5 (issue 9's A/A bar, issue 10's parity bar). Wheel: `bash docs/h200-prepare.sh 6`,
# calls 1-5 carry .whlp00..04 (`cp .whlpNN/part.NN /tmp/`), then, back to back:
#   6. carry [".whlq"]  bash .whlq/install.sh && bash docs/bench-h200-14.sh noise   (timeout 600)
#   7.                  bash docs/bench-h200-14.sh aa                               (timeout 600)
#   8.                  bash docs/bench-h200-14.sh parity                           (timeout 600)
# noise: the same 8K A/A (widths 1, 2) four times: the collector paused inside timed calls (the
#   new default), left on (MLATUI_TIMED_GC=keep, the old behaviour), arm threads unpinned
#   (MLATUI_ARM_CPUS=off), paused again; docs/experiments/quad_noise.py gives each quad spread.
#   The setting with the smallest L = 1 spread is written to /tmp/best.env for the later calls.
# aa: the A/A of issue 9's bar (2K/8K/16K, widths 1-4) under /tmp/best.env.
# parity: decode-parity at 2K, 32 rounds, under /tmp/best.env.
# aa-keep N / aa-pause N: the aa run with the collector left on / paused (a second session, after
#   the first aa run: keep 1, pause 1, keep 2 to compare the settings in one sitting).
set -u
export PYTHONPATH=/tmp/site:. PYTHONUNBUFFERED=1
TARBALL=h200-14-$1.tgz FILL="--fill random-latents"
source "$(dirname "$0")/h200-common.sh"
case $1 in
noise)
  for cfg in pause keep unpinned pause2; do
    unset MLATUI_TIMED_GC MLATUI_ARM_CPUS
    [ $cfg = keep ] && export MLATUI_TIMED_GC=keep
    [ $cfg = unpinned ] && export MLATUI_ARM_CPUS=off
    limit=110; [ $cfg = pause ] && limit=260  # the first process pays MLX's CUDA JIT
    run noise-$cfg $limit --null --contexts 8192 --widths 1,2 --reps 12 --max-rounds 12
  done
  unset MLATUI_TIMED_GC MLATUI_ARM_CPUS
  python3 docs/experiments/quad_noise.py "$OUT"/r/noise-*.jsonl | tee "$OUT/r/noise.md"
  python3 - "$OUT"/r/noise.md <<'PY'
import sys, statistics
rows = [l.split("|") for l in open(sys.argv[1]) if l.startswith("| noise-")]
sd = {}
for r in rows:
    name, width = r[1].strip().removeprefix("noise-").removesuffix(".jsonl"), r[4].strip()
    if width == "1":
        sd.setdefault(name.rstrip("2"), []).append(float(r[6]))
best = min(sd, key=lambda k: statistics.mean(sd[k])) if sd else "pause"
env = {"keep": "export MLATUI_TIMED_GC=keep", "unpinned": "export MLATUI_ARM_CPUS=off"}.get(best, "")
open("/tmp/best.env", "w").write(env + "\n")
print("L=1 spread by setting:", {k: round(statistics.mean(v), 4) for k, v in sd.items()}, "-> best", best)
PY
  cp /tmp/best.env "$OUT/r/best.env"; tar czf "$OUT/$TARBALL" -C "$OUT" r ;;
aa)
  source /tmp/best.env 2>/dev/null; echo "env: $(cat /tmp/best.env 2>/dev/null)"
  run aa 560 --null --contexts 2048,8192,16384 --widths 1,2,3,4 --reps 16 --max-rounds 24 ;;
aa-keep|aa-pause)  # the same A/A with the collector left on / paused (the second device session)
  unset MLATUI_TIMED_GC; [ $1 = aa-keep ] && export MLATUI_TIMED_GC=keep
  run $1-${2:-1} 560 --null --contexts 2048,8192,16384 --widths 1,2,3,4 --reps 16 --max-rounds 24 ;;
parity)
  source /tmp/best.env 2>/dev/null; echo "env: $(cat /tmp/best.env 2>/dev/null)"
  timeout 300 python3 -m mlatui bench decode-parity $S --random-weights --context 2048 --tokens 16 \
    --rounds 32 --out "$OUT/r/parity.jsonl" > "$OUT/r/parity.md" 2> "$OUT/r/parity.log"
  echo "parity exit $? at $(date +%T)"; tar czf "$OUT/$TARBALL" -C "$OUT" r
  run real 240 --contexts 2048,16384 --widths 1,2,3,4 --reps 12 --max-rounds 16 ;;
esac
