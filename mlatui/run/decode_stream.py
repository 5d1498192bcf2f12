"""One arm's token stream at one context, and the decode block run on it (on the arm's thread).

Every setting of a context (plain decode, depth 1, 2, ...) continues one stream per arm, so the
settings of a round are measured on the same text, one after the other, and compared within the
round. Each round starts again from the prefilled context (greedy rounds then repeat the same
text; sampled rounds draw new text from new seeds), so the context grows by one round's tokens at
most. Each draft kind follows the stream: tokens emitted by plain decode (or by another kind's
blocks) are fed to it (untimed) before its next speculative block.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

import mlx.core as mx
from mlx_lm.models.cache import trim_prompt_cache

from mlatui.measure.plans import Setting
from mlatui.run.arms import Arm, cache_len, recopy_in_place
from mlatui.run.drafts import DraftModelSource, require_trimmable
from mlatui.run.mtp import MTPDraft
from mlatui.run.runtime import (
    Block,
    BlockResult,
    CounterCache,
    ModelCache,
    Sampling,
    SyntheticDraftModel,
    draft_model_block,
    mtp_block,
    plain_block,
)


class SyntheticDraft:
    """The draft of a random-weight target (see runtime.SyntheticDraftModel), held like a draft
    model: `model` and `cache` go to mlx-lm's speculative loop."""

    needs_hidden = False

    def __init__(self, acceptance: float, seed: int, vocab_size: int, cost_model: Any = None):
        self.name = f"synthetic(acceptance={acceptance:g})"
        self.model = SyntheticDraftModel(acceptance, seed, vocab_size, cost_model)
        self.cache: list[Any] = []

    def prefill(self, tokens: mx.array, hidden: mx.array | None = None) -> None:
        cost = self.model.cost_model
        if cost is None:
            self.cache = [CounterCache(tokens.shape[1])]
        else:
            source = DraftModelSource(cost)
            source.prefill(tokens)
            self.cache = source.caches


@dataclass
class DraftTrack:
    """Where one draft kind stands on the stream: every kind follows the same tokens, each
    catches up (untimed) on what other settings emitted before its next block."""

    draft_len: int = 0  # stream positions this draft has consumed (aligned: == covered)
    hidden: Any = None  # MTP: the target hidden state before the last token
    base_hidden: Any = None
    head_base: int = 0


@dataclass
class DecodeStream:
    base_len: int  # cache positions of the context (the stream's first token is not in them)
    first: int  # the context's next text token: the stream's token 0
    tokens: list[int] = field(default_factory=list)
    tracks: dict[str, DraftTrack] = field(default_factory=dict)  # draft kind -> its place
    rng: random.Random = field(default_factory=random.Random)

    def __post_init__(self) -> None:
        self.tokens = self.tokens or [self.first]

    @property
    def covered(self) -> int:
        """Cache positions that should be filled: the context and every stream token but the last."""
        return self.base_len + len(self.tokens) - 1


def _sources(arm: Arm) -> dict[str, Any]:
    """Every draft of the arm by kind ("" for an arm given a single `draft`)."""
    if arm.drafts:
        return arm.drafts
    return {"": arm.draft} if arm.draft is not None else {}


def open_stream(arm: Arm, base_len: int, first: int, context_tokens: list[int]) -> DecodeStream:
    """A fresh stream at a prefilled context; every draft consumes the context (untimed)."""
    s = DecodeStream(base_len, first)
    sources = _sources(arm)
    if not sources:
        return s
    require_trimmable(arm.caches, arm.model_name)
    target = arm.hidden
    for kind, draft in sources.items():
        track = s.tracks[kind] = DraftTrack(base_len)
        hidden = target.context if target is not None and draft.needs_hidden else None
        draft.prefill(mx.array([context_tokens]), hidden)  # (1, T)
        if isinstance(draft, MTPDraft):
            track.base_hidden = track.hidden = target.last if target is not None else None
            track.head_base = draft.consumed
    return s


def rewind(arm: Arm, s: DecodeStream) -> None:
    """Back to the prefilled context (a new round)."""
    trim_prompt_cache(arm.caches, cache_len(arm.caches) - s.base_len)
    s.tokens = [s.first]
    for kind, draft in _sources(arm).items():
        track = s.tracks[kind]
        if isinstance(draft, MTPDraft):
            draft.rewind(track.head_base, track.base_hidden)
            track.hidden = track.base_hidden
        else:
            trim_prompt_cache(draft.cache, cache_len(draft.cache) - s.base_len)
        track.draft_len = s.base_len


def recopy_stream_caches(arm: Arm) -> None:
    """Fresh copies of the arm's target cache and of every draft's own cache (between rounds)."""
    recopy_in_place(arm.caches)
    for draft in _sources(arm).values():
        cache = getattr(draft, "cache", None)
        if isinstance(cache, list) and cache:
            recopy_in_place(cache)


def _catch_up_draft(arm: Arm, s: DecodeStream, draft: Any, track: DraftTrack) -> None:
    """Feed the draft the stream tokens it has not seen (emitted by plain decode or by another
    draft kind); untimed."""
    missing = s.tokens[track.draft_len - s.base_len : len(s.tokens) - 1]
    if not missing:
        return
    if isinstance(draft, MTPDraft):
        # the head needs the target's hidden states at those tokens: recompute them
        trim_prompt_cache(arm.caches, len(missing))
        _, h = draft.target_forward(arm.model, mx.array([missing]), arm.caches)  # (1, m, D)
        mx.eval(h, [c.state for c in arm.caches])
        draft.catch_up(missing, h)
        track.hidden = h[:, -1:]
    elif isinstance(draft, SyntheticDraft):
        draft.model.catch_up(missing, draft.cache)
    else:
        draft.model(mx.array([missing]), cache=draft.cache)  # (1, m)
        mx.eval([c.state for c in draft.cache])
    track.draft_len = s.covered


def run_block(
    arm: Arm, s: DecodeStream, setting: Setting, n: int, sampling: Sampling, seed: int
) -> BlockResult:
    """Decode `n` tokens at one setting (depth 0 = plain; else the draft of its kind),
    continuing the stream; timed inside."""
    depth, kind = setting.depth, setting.kind
    mx.random.seed(seed)  # both arms draw the same sampler stream for the same block
    s.rng.seed(seed)
    draft = arm.draft_of(kind) if depth > 0 else None
    track = s.tracks.get(kind) if depth > 0 else None
    if isinstance(draft, SyntheticDraft):
        draft.model.rng.seed(seed)
    before = s.covered
    if draft is not None and track is not None:
        _catch_up_draft(arm, s, draft, track)
    if draft is None or track is None:
        result = plain_block(arm.model, arm.caches, s.tokens[-1], n, sampling)
    elif isinstance(draft, MTPDraft):
        target, block = ModelCache(arm.model, arm.caches), Block(s.tokens[-1], n, depth)
        result, track.hidden = mtp_block(target, draft, track.hidden, block, sampling, s.rng)
    else:
        synthetic = isinstance(draft, SyntheticDraft)
        result = draft_model_block(
            ModelCache(arm.model, arm.caches),
            ModelCache(draft.model, draft.cache),
            Block(s.tokens[-1], n, depth),
            draft.model.verify_sampler() if synthetic else sampling.sampler(),
        )
    s.tokens += result.tokens
    expected = before + len(result.tokens)
    extra = cache_len(arm.caches) - expected  # the last token was fed by the final step
    if extra > 0:
        trim_prompt_cache(arm.caches, extra)
    if track is not None and draft is not None and not isinstance(draft, MTPDraft):
        have = cache_len(draft.cache)
        if have > expected:
            trim_prompt_cache(draft.cache, have - expected)
        track.draft_len = min(have, expected)
    elif track is not None:
        track.draft_len = expected
    return result
