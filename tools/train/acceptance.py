"""Greedy draft acceptance and repetition of the embedded model (or any target with drafts).

    python -m tools.train.acceptance [--model DIR [--draft DIR]] [--kinds model,mtp]
        [--contexts prompt,1024,2048,4096] [--tokens 128] [--depth 1] [--check] [--out FILE]

Runs real greedy speculative decoding through `speculative_step` (below), for each draft kind
the target has: `model` (the separate draft model) and `mtp` (the checkpoint's MTP head, loaded by
`mlatui.run.drafts.load_mtp_draft` as for any checkpoint). The draft proposes `depth` tokens, the target
verifies them in one forward of width depth + 1, the longest agreeing prefix is kept plus the
target's own next token, and caches are trimmed back. Acceptance comes in mlatui.measure.acceptance's
three forms (conditional by position, unconditional by position, mean accepted drafts per verify).
Contexts: `prompt` is the shipped held-out prompts as they are; a number C is each prompt preceded
by other held-out files so that drafting ends at C tokens (prompt C - tokens long). Repetition:
the share of distinct 4-grams in `--tokens` plain greedy tokens after each shipped prompt.
`--gates patched` (the default) runs target and drafts as the patched arm does (absorbed MLA at
L >= 2, pooled-indexer reuse): the same maths as stock to about one float ULP, and far faster at
long contexts on a CPU, where stock re-expands the whole cache every verify step.
"""

# isort: skip_file
from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

import mlx.core as mx
import mlx.nn as nn

from mlatui.models.mx_typed import as_int, as_ints
from mlatui.measure.acceptance import AcceptanceCounts, VerifyStep
from mlatui.run.drafts import DraftModelSource
from mlatui.measure.acceptance import distinct_ngram_share
from mlx_lm.models.cache import make_prompt_cache, trim_prompt_cache


class DraftSource(Protocol):
    """What `speculative_step` drafts with: `SteppedDraftModel` or mlatui's MTPDraft."""

    def prefill(self, tokens: mx.array, hidden: mx.array | None = None) -> None: ...

    def propose(self, last: int, k: int, hidden: mx.array | None = None) -> list[int]:
        """Greedy-draft k tokens following `last`. `hidden` (1, 1, D): the target's hidden
        state at the position before `last` (MTP heads only)."""
        ...

    def commit(self, accepted: int, hidden: mx.array | None = None) -> None:
        """The verify accepted `accepted` of the k drafts: roll back the rest. `hidden`
        (1, accepted + 1, D): target hidden at positions last, d1..d_accepted (MTP only)."""
        ...

    def target_forward(
        self, model: nn.Module, inputs: mx.array, cache: list[Any]
    ) -> tuple[mx.array, mx.array | None]:
        """Target logits (1, L, V) and, for an MTP head, hidden states (1, L, D)."""
        ...


class SteppedDraftModel(DraftModelSource):
    """mlatui's draft model, drafting one greedy step at a time for `speculative_step`."""

    def __init__(self, model: nn.Module, name: str = "draft-model"):
        super().__init__(model, name)
        self.pending: list[int] = []  # accepted tokens not yet in the draft cache
        self._fed = 0
        self._last_draft = 0

    def reset(self) -> None:
        super().reset()
        self.pending = []

    def target_forward(
        self, model: nn.Module, inputs: mx.array, cache: list[Any]
    ) -> tuple[mx.array, mx.array | None]:
        return model(inputs, cache=cache), None

    def propose(self, last: int, k: int, hidden: mx.array | None = None) -> list[int]:
        feed = self.pending + [last]
        self.pending = []
        drafts: list[int] = []
        y = mx.array([feed])  # (1, len(feed))
        for i in range(k):
            logits = self.model(y, cache=self.cache)
            tok = mx.argmax(logits[:, -1, :], axis=-1)
            drafts.append(as_int(tok))
            if i + 1 < k:
                y = tok[None]  # (1, 1)
        self._fed = k  # cache now holds last, d1..d_{k-1}
        self._last_draft = drafts[-1]
        return drafts

    def commit(self, accepted: int, hidden: mx.array | None = None) -> None:
        keep = accepted + 1  # last, d1..d_accepted
        if keep <= self._fed:
            trim_prompt_cache(self.caches, self._fed - keep)
        else:  # every draft accepted: d_k was never fed
            self.pending = [self._last_draft]
        self._fed = 0


@dataclass(frozen=True)
class StepResult:
    drafts: tuple[int, ...]
    targets: tuple[int, ...]  # target greedy token after last, d1, ..., dk
    accepted: int
    emitted: tuple[int, ...]  # d1..d_accepted + the target's correction/bonus token
    draft_ms: float
    verify_ms: float


def accept_greedy(drafts: list[int], targets: list[int]) -> int:
    n = 0
    while n < len(drafts) and drafts[n] == targets[n]:
        n += 1
    return n


def speculative_step(
    model: nn.Module,
    cache: list[Any],
    draft: DraftSource,
    last: int,
    depth: int,
    hidden: mx.array | None,
) -> tuple[StepResult, mx.array | None]:
    """One greedy speculative step from a cache covering every token but `last`.
    Returns the result and the target hidden state at the position before the new `last`."""
    t0 = time.perf_counter_ns()
    drafts = draft.propose(last, depth, hidden)
    inputs = mx.array([[last, *drafts]])  # (1, depth + 1)
    t1 = time.perf_counter_ns()
    logits, new_hidden = draft.target_forward(model, inputs, cache)
    greedy = mx.argmax(logits[0], axis=-1)  # (depth + 1,)
    mx.eval(greedy, *([] if new_hidden is None else [new_hidden]))
    t2 = time.perf_counter_ns()
    targets = as_ints(greedy)
    n = accept_greedy(drafts, targets)
    trim_prompt_cache(cache, depth - n)
    draft.commit(n, None if new_hidden is None else new_hidden[:, : n + 1])
    result = StepResult(
        tuple(drafts),
        tuple(targets),
        n,
        (*drafts[:n], targets[n]),
        (t1 - t0) / 1e6,
        (t2 - t1) / 1e6,
    )
    return result, None if new_hidden is None else new_hidden[:, n : n + 1]


KINDS = ("model", "mtp")
PREFILL_CHUNK = 512


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
    return as_int(mx.argmax(logits[0, -1]))


def greedy(model: Any, prompt: list[int], n: int) -> list[int]:
    """Plain greedy decoding, one token per step (L = 1 after the prompt)."""
    cache = make_prompt_cache(model)
    tok = _argmax_last(model(mx.array([prompt]), cache=cache))
    out = [tok]
    while len(out) < n:
        tok = _argmax_last(model(mx.array([[tok]]), cache=cache))
        out.append(tok)
    return out


def speculate(model: Any, source: DraftSource, prompt: list[int], n: int, depth: int) -> SpecResult:
    """Greedy speculative decoding from a cache covering everything but the prompt's last token."""
    cache = make_prompt_cache(model)
    ctx, hidden = prompt[:-1], []
    for s in range(0, len(ctx), PREFILL_CHUNK):
        _, h = source.target_forward(model, mx.array([ctx[s : s + PREFILL_CHUNK]]), cache)
        mx.eval([c.state for c in cache], *([] if h is None else [h]))
        hidden += [] if h is None else [h]
    h_all = mx.concatenate(hidden, axis=1) if hidden else None  # (1, T, D) for MTP heads
    source.prefill(mx.array([ctx]), h_all)
    h = None if h_all is None else h_all[:, -1:]
    last = prompt[-1]
    counts = AcceptanceCounts(depth)
    res = SpecResult([], [0] * depth, [0] * depth, counts=counts)
    while len(res.tokens) < n:
        step, h = speculative_step(model, cache, source, last, depth, h)
        a = step.accepted
        for i in range(min(a + 1, depth)):
            res.proposed[i] += 1
            res.accepted[i] += i < a
        res.tokens += list(step.emitted)
        counts.add(VerifyStep(depth, a, a + 1))
        res.rounds += 1
        res.verify_widths.append(depth + 1)
        last = step.emitted[-1]
    res.tokens = res.tokens[:n]
    return res


def speculative(model: Any, draft: Any, prompt: list[int], n: int, depth: int) -> SpecResult:
    """`speculate` with a separate draft model."""
    return speculate(model, SteppedDraftModel(draft), prompt, n, depth)


def _rounded(values: tuple) -> list[float | None]:
    return [None if v is None else round(v, 4) for v in values]


def measure(
    model: Any,
    source: DraftSource,
    prompts: list[list[int]],
    n: int,
    depth: int,
    check: bool,
) -> dict:
    """Acceptance over `prompts` (token ids); `source` starts afresh at each prefill."""
    counts = AcceptanceCounts(depth)
    same, shares = True, []
    t0 = time.perf_counter()
    for ids in prompts:
        r = speculate(model, source, ids, n, depth)
        if r.counts is not None:
            counts = counts.merged(r.counts)
        if (share := distinct_ngram_share(r.tokens)) is not None:
            shares.append(share)
        if check:
            same &= r.tokens == greedy(model, ids, n)
    return {
        "prompts": len(prompts),
        "prompt_tokens": [min(len(p) for p in prompts), max(len(p) for p in prompts)],
        "tokens_per_prompt": n,
        "depth": depth,
        "acceptance_conditional": _rounded(counts.conditional),
        "acceptance_unconditional": _rounded(counts.unconditional),
        "mean_accepted_per_verify": round(counts.mean_accepted or 0.0, 4),
        "counts": asdict(counts),
        "distinct_4gram_share": round(sum(shares) / len(shares), 4) if shares else None,
        "matches_plain_greedy": same if check else None,
        "seconds": round(time.perf_counter() - t0, 1),
    }


def repetition(model: Any, prompts: list[list[int]], n: int) -> dict:
    found = (distinct_ngram_share(greedy(model, ids, n)) for ids in prompts)
    shares = [s for s in found if s is not None]  # None: fewer than 4 tokens
    if not shares:
        return {"tokens": n, "distinct_4gram_share": None, "min": None, "per_prompt": []}
    return {
        "tokens": n,
        "distinct_4gram_share": round(sum(shares) / len(shares), 4),
        "min": round(min(shares), 4),
        "per_prompt": [round(s, 4) for s in shares],
    }


def table(rows: list[dict]) -> str:
    out = [
        "| kind | context | depth | conditional | unconditional | mean accepted | 4-gram share |"
    ]
    out.append("|---|---|---|---|---|---|---|")
    for r in rows:
        f = lambda v: "/".join("-" if x is None else f"{x:.2f}" for x in v)  # noqa: E731
        out.append(
            f"| {r['kind']} | {r['context']} | {r['depth']} | {f(r['acceptance_conditional'])} | "
            f"{f(r['acceptance_unconditional'])} | {r['mean_accepted_per_verify']:.2f} | "
            f"{r['distinct_4gram_share']:.2f} |"
        )
    return "\n".join(out)


def _csv(text: str, what: str) -> list[str]:
    return [x.strip() for x in text.split(",") if x.strip()] or [what]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="greedy draft acceptance and repetition")
    p.add_argument("--model", type=Path, default=None, help="target folder (default: embedded)")
    p.add_argument("--draft", type=Path, default=None, help="draft folder (default: embedded)")
    p.add_argument("--kinds", default="model,mtp", help="draft kinds: model, mtp (those present)")
    p.add_argument("--contexts", default="prompt,1024,2048,4096")
    p.add_argument("--tokens", type=int, default=128, help="tokens generated per prompt")
    p.add_argument("--depth", default="1", help="draft tokens per verify, e.g. 1,3")
    p.add_argument("--check", action="store_true", help="also compare with plain greedy output")
    p.add_argument("--gates", choices=("stock", "patched"), default="patched")
    p.add_argument("--stdlib", type=Path, default=None, help="stdlib of the corpus (contexts)")
    p.add_argument("--context-ids", type=Path, default=None,
                   help="JSON of the long contexts' token ids: read if it exists, else written "
                        "(a machine with another Python's stdlib measures the same contexts)")  # fmt: skip
    p.add_argument("--out", type=Path, default=None, help="also write the JSON here")
    a = p.parse_args(argv)
    try:
        report = run(a)
    except ValueError as e:
        print(f"mlatui: error: {e}", file=sys.stderr)
        return 2
    print(table(report["results"]), file=sys.stderr)
    text = json.dumps(report)
    print(text)
    if a.out:
        a.out.write_text(text + "\n")
    return 0


def run(a: argparse.Namespace) -> dict:
    from mlatui.run.arms import Variant, gate_model
    from mlatui.models.embedded import DRAFT_PATH, MODEL_PATH, prompts
    from mlatui.models.loading import load_checkpoint
    from mlatui.run.drafts import load_mtp_draft
    from tools.train.contexts import held_out_docs, long_prompt

    kinds = _csv(a.kinds, "model")
    if bad := [k for k in kinds if k not in KINDS]:
        raise ValueError(f"--kinds: unknown {bad} (choose from {', '.join(KINDS)})")
    model_dir = a.model or MODEL_PATH
    model, tok, _ = load_checkpoint(str(model_dir))
    variant = Variant(a.gates)
    gate_model(model, variant)
    sources: dict[str, Any] = {}
    skipped: dict[str, str] = {}
    if "model" in kinds:
        draft_dir = a.draft or (DRAFT_PATH if a.model is None else None)
        if draft_dir is None:
            skipped["model"] = "no --draft given"
        else:
            draft, _, _ = load_checkpoint(str(draft_dir), what="draft model")
            gate_model(draft, variant)
            sources["model"] = SteppedDraftModel(draft)
    if "mtp" in kinds:
        head = load_mtp_draft(model_dir, model, required=False)
        if head is None:
            skipped["mtp"] = f"{model_dir} has no MTP head"
        else:
            gate_model(head.head, variant)
            sources["mtp"] = head
    if not sources:
        raise ValueError(f"no draft to measure ({'; '.join(skipped.values())})")
    texts = prompts()
    short = [tok.encode(t) for t in texts]
    contexts = _csv(a.contexts, "prompt")
    valid = every = None
    saved = (
        json.loads(a.context_ids.read_text()) if a.context_ids and a.context_ids.exists() else {}
    )
    rows = []
    for c in contexts:
        if c == "prompt":
            ids = short
        elif c in saved:
            ids = saved[c]
        else:
            if not c.isdigit() or int(c) <= a.tokens + 16:
                raise ValueError(f"--contexts: {c!r} is not 'prompt' or a number > tokens + 16")
            if valid is None or every is None:
                valid, every = held_out_docs(a.stdlib)
            eot = tok.eos_token_id
            ids = [long_prompt(tok, eot, t, valid, every, int(c) - a.tokens) for t in texts]
            saved[c] = ids
            if a.context_ids:
                a.context_ids.write_text(json.dumps(saved))
        for kind, source in sources.items():
            for depth in (int(d) for d in _csv(a.depth, "1")):
                r = measure(model, source, ids, a.tokens, depth, a.check)
                rows.append({"kind": kind, "context": c, **r})
                print(f"{kind} {c} depth {depth}: {r['acceptance_conditional']} ({r['seconds']} s)",
                      file=sys.stderr, flush=True)  # fmt: skip
    return {
        "model": str(model_dir),
        "gates": a.gates,
        "skipped": skipped,
        "results": rows,
        "repetition": repetition(model, short, a.tokens),
    }


if __name__ == "__main__":
    from mlatui.host.blas import choose_blas

    choose_blas()  # the fast CPU BLAS (may run this script again with LD_PRELOAD)
    raise SystemExit(main())
