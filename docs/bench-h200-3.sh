#!/usr/bin/env bash
# Third H200 call: the glm47-flash sweep again after the engine changes (arm threads pinned,
# prefill on a third thread, 3x samples for the L = 1 control) to check the L = 1 bias.
set -u
mkdir -p $OUT
timeout 200 python3 -m mlatui bench scenarios/glm47-flash.toml --random-weights --phases sweep --reps 5 \
  --out $OUT/glm47_sweep2.jsonl > $OUT/glm47_sweep2.md 2> $OUT/glm47_sweep2.log
echo "exit $?"
