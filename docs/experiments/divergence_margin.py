"""Where a greedy speculative stream left plain greedy decoding, and how close plain's choice was.

For each shipped prompt after a long context (the acceptance CLI's `--context-ids` file), decode
128 tokens plainly and speculatively (training.acceptance's `greedy` and `speculate`, the code
`--check` compares). At the first token where they differ, the target scores the common prefix
in one pass and the gap between its top two logits there is printed: a gap near float32
rounding (~1e-4 of the logit scale) says the streams split on a near tie, reached by different
reduction orders (plain prefills the context in one call, speculation in 512-token chunks and
verifies 2-4 positions at once); a large gap would say a bug.

Usage: python docs/experiments/divergence_margin.py IDS.json CONTEXT KIND DEPTH [OUT.json]
(KIND: model | mtp). Prints one JSON line per prompt and a summary.
"""

import json
import sys

import mlatui  # noqa: F401  (fast BLAS before mlx on Linux CPU)

# isort: split
import mlx.core as mx

from mlatui.models.embedded import DRAFT_PATH, MODEL_PATH
from mlatui.models.loading import load_checkpoint
from mlatui.run.arms import Variant, gate_model
from mlatui.run.drafts import DraftModelSource
from mlatui.run.mtp import load_mtp_draft
from mlatui.training.acceptance import greedy, speculate

ids_path, context, kind, depth = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
out_path = sys.argv[5] if len(sys.argv) > 5 else None
model, _, _ = load_checkpoint(str(MODEL_PATH))
gate_model(model, Variant.PATCHED)
if kind == "mtp":
    source = load_mtp_draft(MODEL_PATH, model, required=True)
    gate_model(source.head, Variant.PATCHED)
else:
    draft, _, _ = load_checkpoint(str(DRAFT_PATH), what="draft model")
    gate_model(draft, Variant.PATCHED)
    source = DraftModelSource(draft)
rows = []
for i, ids in enumerate(json.load(open(ids_path))[context]):
    plain = greedy(model, ids, 128)
    spec = speculate(model, source, ids, 128, depth).tokens
    at = next((j for j, (a, b) in enumerate(zip(plain, spec, strict=True)) if a != b), None)
    row = {"prompt": i, "context": len(ids), "first_divergence": at}
    if at is not None:
        logits = model(mx.array([ids + plain[:at]]))[0, -1].astype(mx.float32)  # (V,)
        top = mx.sort(logits)[-2:]  # (2,): second, first
        row |= {
            "plain": plain[at],
            "spec": spec[at],
            "top2_gap": float(top[1] - top[0]),
            "gap_plain_vs_spec_token": float(logits[plain[at]] - logits[spec[at]]),
            "logit_scale": float(mx.abs(logits).max()),
        }
    rows.append(row)
    print(json.dumps(row), flush=True)
summary = {
    "context": context,
    "kind": kind,
    "depth": depth,
    "device": str(mx.default_device()),
    "diverged": sum(r["first_divergence"] is not None for r in rows),
    "prompts": len(rows),
    "rows": rows,
}
print(json.dumps({k: v for k, v in summary.items() if k != "rows"}))
if out_path:
    json.dump(summary, open(out_path, "w"), indent=1)
