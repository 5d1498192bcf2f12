"""Teacher-forced sampled acceptance of the embedded model's two draft kinds, and its ceilings.

    python docs/experiments/sampled_acceptance_bound.py [--context 2048] [--last 512] [--t 0.8]
        [--model DIR --draft DIR] [--context-ids contexts.json]

On each shipped prompt's long held-out context (training.contexts.long_prompt), over the last
`--last` positions, with p the target's next-token distribution at temperature T and q a draft's:
- exact match (mlx-lm's rule: the draft's sampled token must equal the target's sampled token):
  acceptance sum_x p(x) q(x); its ceiling, for any draft, is max_x p(x) (a draft that proposes
  the target's mode); `sharpen a` scales the draft's logits by a (a = inf: its argmax).
- rejection sampling (the MTP loop): acceptance sum_x min(p(x), q(x)) = 1 - TV(p, q); ceiling 1.
The MTP head at slot t drafts token t+2 from the target's hidden state at t and token t+1, so it
is compared with the target's distribution at t+1. Teacher-forced on held-out text, not on the
target's own samples: a proxy for the tune's in-loop figure, used to compare drafts.
"""

# isort: skip_file
from __future__ import annotations

import argparse
import json
from pathlib import Path

import mlatui  # noqa: F401
import mlx.core as mx


def _probs(logits: mx.array, t: float) -> mx.array:
    return mx.softmax(logits.astype(mx.float32) / t, axis=-1)


def stats(p: mx.array, logits_q: mx.array, t: float, sharpen: list[float]) -> dict:
    """p (N, V) target probabilities; logits_q (N, V) the draft's logits."""
    q = _probs(logits_q, t)
    out = {
        "exact_match": (p * q).sum(-1).mean().item(),
        "rejection": mx.minimum(p, q).sum(-1).mean().item(),
        "argmax_agree": (mx.argmax(p, -1) == mx.argmax(q, -1)).mean().item(),
    }
    for a in sharpen:
        qa = _probs(logits_q * a, t)
        out[f"exact_match_sharpen_{a:g}"] = (p * qa).sum(-1).mean().item()
    best = mx.argmax(logits_q, -1)
    out["exact_match_sharpen_inf"] = mx.take_along_axis(p, best[:, None], -1).mean().item()
    return out


def main() -> int:
    from mlatui.models.embedded import DRAFT_PATH, MODEL_PATH, prompts
    from mlatui.models.loading import load_checkpoint
    from mlatui.run.mtp import load_mtp_draft
    from mlatui.training.contexts import held_out_docs, long_prompt

    ap = argparse.ArgumentParser()
    ap.add_argument("--model", type=Path, default=MODEL_PATH)
    ap.add_argument("--draft", type=Path, default=DRAFT_PATH)
    ap.add_argument("--context", type=int, default=2048)
    ap.add_argument("--last", type=int, default=512)
    ap.add_argument("--t", type=float, default=0.8)
    ap.add_argument("--context-ids", type=Path, default=None)
    a = ap.parse_args()
    model, tok, _ = load_checkpoint(str(a.model))
    draft, _, _ = load_checkpoint(str(a.draft), what="draft model")
    head = load_mtp_draft(a.model, model, required=True).head
    saved = json.loads(a.context_ids.read_text()) if a.context_ids else {}
    if str(a.context) in saved:  # the acceptance module's file: each C's ids are C - 128 long
        contexts = saved[str(a.context)]
    else:
        valid, every = held_out_docs()
        contexts = [
            long_prompt(tok, tok.eos_token_id, t, valid, every, a.context) for t in prompts()
        ]
    sums: dict[str, dict[str, float]] = {"draft": {}, "mtp": {}, "target": {}}
    for ids in contexts:
        x = mx.array([ids])  # (1, S)
        h = model.model(x)  # (1, S, D) after the final norm
        lt = model.model.embed_tokens.as_linear(h)[0, -a.last :]  # (N, V)
        p = _probs(lt, a.t)
        ld = draft(x)[0, -a.last :]  # (N, V)
        hm = head(x[:, 1:], h[:, :-1], [None])  # (1, S-1, D): slot t drafts token t+2
        lm = head.logits(hm)[0, -a.last + 1 :]  # (N-1, V), aligned with p[1:]
        parts = {
            "draft": stats(p, ld, a.t, [1.5, 2, 3]),
            "mtp": stats(p[1:], lm, a.t, [1.5, 2, 3]),
            "target": {
                "max_p": p.max(-1).mean().item(),
                "entropy_nats": -(p * mx.log(p + 1e-12)).sum(-1).mean().item(),
            },
        }
        for k, d in parts.items():
            for name, v in d.items():
                sums[k][name] = sums[k].get(name, 0.0) + v / len(contexts)
    report = {"context": a.context, "last": a.last, "temperature": a.t, "prompts": len(contexts),
              "model": str(a.model), "draft": str(a.draft),
              **{k: {n: round(v, 4) for n, v in d.items()} for k, d in sums.items()}}  # fmt: skip
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
