"""Greedy draft acceptance of the embedded model (or any target/draft pair) on shipped prompts.

    python -m mlatui.training.acceptance [--model DIR --draft DIR] [--tokens 64] [--depth 1]

Runs real greedy speculative decoding: the draft proposes `depth` tokens, the target verifies
them in one forward of width depth + 1, the longest agreeing prefix is kept plus the target's
own next token, and both caches are trimmed back. Acceptance at draft position i = accepted / proposed
at i (position i is only proposed when 1..i-1 were accepted): the conditional acceptance of
mlatui.acceptance, printed beside the unconditional one and the mean accepted drafts per verify
step (the same definitions the decode phases report). Also checks that the emitted tokens equal
plain greedy decoding's.
"""

# isort: skip_file
from __future__ import annotations

import argparse
import json
import time
from dataclasses import dataclass, field
from typing import Any

import mlatui  # noqa: F401  (fast BLAS before mlx on Linux CPU)
import mlx.core as mx
from mlatui.acceptance import AcceptanceCounts, VerifyStep
from mlx_lm.models.cache import make_prompt_cache, trim_prompt_cache


@dataclass
class SpecResult:
    tokens: list[int]
    proposed: list[int]  # per position: reached (1..i-1 accepted, i drafted)
    accepted: list[int]
    rounds: int = 0
    verify_widths: list[int] = field(default_factory=list)
    counts: AcceptanceCounts | None = None

    def acceptance(self) -> list[float]:
        return [
            a / p if p else float("nan") for a, p in zip(self.accepted, self.proposed, strict=True)
        ]


def _argmax_last(logits: mx.array) -> int:
    return int(mx.argmax(logits[0, -1]).item())


def greedy(model: Any, prompt: list[int], n: int) -> list[int]:
    """Plain greedy decoding, one token per step (L = 1 after the prompt)."""
    cache = make_prompt_cache(model)
    tok = _argmax_last(model(mx.array([prompt]), cache=cache))
    out = [tok]
    while len(out) < n:
        tok = _argmax_last(model(mx.array([[tok]]), cache=cache))
        out.append(tok)
    return out


def speculative(model: Any, draft: Any, prompt: list[int], n: int, depth: int) -> SpecResult:
    """Greedy speculative decoding; both caches cover everything but `last` between rounds."""
    tc, dc = make_prompt_cache(model), make_prompt_cache(draft)
    ctx = mx.array([prompt[:-1]])
    model(ctx, cache=tc)
    draft(ctx, cache=dc)
    last, pending = prompt[-1], []
    res = SpecResult([], [0] * depth, [0] * depth, counts=AcceptanceCounts(depth))
    while len(res.tokens) < n:
        feed, drafts = pending + [last], []
        for _ in range(depth):
            drafts.append(_argmax_last(draft(mx.array([feed]), cache=dc)))
            feed = drafts[-1:]
        verify = model(mx.array([[last] + drafts]), cache=tc)  # (1, depth + 1, V)
        want = mx.argmax(verify[0], axis=-1).tolist()
        a = 0
        while a < depth and drafts[a] == want[a]:
            a += 1
        for i in range(min(a + 1, depth)):
            res.proposed[i] += 1
            res.accepted[i] += i < a
        res.tokens += drafts[:a] + [want[a]]
        res.counts.add(VerifyStep(depth, a, a + 1))
        res.rounds += 1
        res.verify_widths.append(depth + 1)
        trim_prompt_cache(tc, depth - a)
        if a == depth:
            pending = drafts[-1:]  # the draft never saw its own last proposal
        else:
            trim_prompt_cache(dc, depth - 1 - a)
            pending = []
        last = want[a]
    res.tokens = res.tokens[:n]
    return res


def measure(
    model: Any, draft: Any, tokenizer: Any, prompts: list[str], n: int, depth: int, check: bool
) -> dict:
    proposed, accepted = [0] * depth, [0] * depth
    counts = AcceptanceCounts(depth)
    same = True
    t0 = time.perf_counter()
    for text in prompts:
        ids = tokenizer.encode(text)
        r = speculative(model, draft, ids, n, depth)
        proposed = [x + y for x, y in zip(proposed, r.proposed, strict=True)]
        accepted = [x + y for x, y in zip(accepted, r.accepted, strict=True)]
        counts = counts.merged(r.counts)
        if check:
            same &= r.tokens == greedy(model, ids, n)
    return {
        "prompts": len(prompts),
        "tokens_per_prompt": n,
        "depth": depth,
        "acceptance_conditional": [None if v is None else round(v, 4) for v in counts.conditional],
        "acceptance_unconditional": [
            None if v is None else round(v, 4) for v in counts.unconditional
        ],
        "mean_accepted_per_verify": round(counts.mean_accepted or 0.0, 4),
        "counts": counts.to_dict(),
        "proposed": proposed,
        "accepted": accepted,
        "matches_plain_greedy": same if check else None,
        "seconds": round(time.perf_counter() - t0, 1),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="greedy draft acceptance on the shipped prompts")
    p.add_argument("--model", default=None, help="target folder (default: the embedded model)")
    p.add_argument("--draft", default=None, help="draft folder (default: the embedded draft)")
    p.add_argument("--tokens", type=int, default=64, help="tokens generated per prompt")
    p.add_argument("--depth", type=int, default=1, help="draft tokens per verify")
    p.add_argument("--check", action="store_true", help="also compare with plain greedy output")
    a = p.parse_args(argv)
    from mlatui.embedded import DRAFT_PATH, MODEL_PATH, load_embedded, prompts
    from mlatui.models import register

    if a.model is None and a.draft is None:
        model, tok, draft = load_embedded()
    else:
        register()
        import mlx_lm

        model, tok = mlx_lm.load(str(a.model or MODEL_PATH))
        draft, _ = mlx_lm.load(str(a.draft or DRAFT_PATH))
    print(json.dumps(measure(model, draft, tok, prompts(), a.tokens, a.depth, a.check)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
