"""Each arm's own drafts (synthetic, MTP or a draft model, gated like the arm) and decode blocks
through the runtime users run, on one arm's token stream at one context (on the arm's thread).

Plain decode is mlx-lm's own `generate_step` and draft-model speculation its own
`speculative_generate_step`, each started from the arm's cache with a one-token prompt, so what
is timed is what `mlx_lm.generate` (and `--draft-model`) does: the next step's graph is built
and `mx.async_eval`-ed while the current token is read. MTP speculation, which mlx-lm does not
have, runs mlatui's own loop of the same shape. A cache covers every stream token but the last
one, which the next block feeds first (mlatui.run.drafts' convention). A block's time runs from
its start to its last token; after the clock stops every stream it used is synced, so the
pending overlapped step never leaks into the other arm's block.

Every setting of a context continues one stream per arm, so a round's settings are measured on
the same text and compared within the round; each round starts again from the prefilled
context. Each draft kind follows the stream: tokens another setting emitted are fed to it
(untimed) before its next block.
"""

from __future__ import annotations

import enum
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import mlx.core as mx
import mlx.nn as nn
from mlx_lm.generate import generate_step, speculative_generate_step
from mlx_lm.models.cache import trim_prompt_cache
from mlx_lm.sample_utils import apply_top_p, make_sampler

from mlatui.config.scenario import Scenario
from mlatui.gate import mla
from mlatui.gate.policy import Gates, Variant
from mlatui.host.memory import sync_streams
from mlatui.measure.acceptance import VerifyStep, steps_from_flags
from mlatui.measure.plans import Setting
from mlatui.models.loading import NO_DRAFT, Draft, DraftKind, Loaded, vocab_size
from mlatui.models.mx_typed import as_ints
from mlatui.run.arms import Arm, cache_len, gate_model, recopy_in_place, sparse_layers
from mlatui.run.drafts import DraftModelSource, MTPDraft, accept_sampled, require_trimmable


class AcceptanceRule(enum.Enum):
    EXACT_MATCH = "exact-match"  # mlx-lm: a draft is kept when the target's sampled token equals it
    REJECTION = "rejection-sampling"  # distribution-preserving (Leviathan et al.), MTP loop

    @property
    def label(self) -> str:
        return {
            AcceptanceRule.EXACT_MATCH: "exact match (mlx-lm)",
            AcceptanceRule.REJECTION: "rejection sampling (distribution-preserving)",
        }[self]


@dataclass(frozen=True)
class Sampling:
    temperature: float = 0.0
    top_p: float = 0.0  # 0 or 1: off (mlx-lm's convention)

    @property
    def greedy(self) -> bool:
        return self.temperature == 0

    def sampler(self) -> Callable[[mx.array], mx.array]:
        return make_sampler(self.temperature, self.top_p)

    def probs(self, logits: mx.array) -> mx.array:
        """The distribution `sampler` draws from: softmax(top_p(logprobs / T)). (..., V)."""
        logprobs = logits - mx.logsumexp(logits, axis=-1, keepdims=True)
        if 0 < self.top_p < 1:
            logprobs = apply_top_p(logprobs, self.top_p)
        return mx.softmax(logprobs / self.temperature, axis=-1)

    def rule(self, mtp: bool) -> AcceptanceRule:
        return AcceptanceRule.REJECTION if mtp and not self.greedy else AcceptanceRule.EXACT_MATCH

    def to_dict(self) -> dict:
        return {"temperature": self.temperature, "top_p": self.top_p}


@dataclass(frozen=True)
class Block:
    """A decode block asked for: feed `last` (the stream's last token) first, emit `tokens`
    tokens, drafting `depth` tokens per verify step (0: plain decode)."""

    last: int
    tokens: int
    depth: int = 0


@dataclass(frozen=True)
class ModelCache:
    """A model and the cache it steps on (the target's, or a draft's)."""

    model: Any
    cache: list[Any]


@dataclass
class BlockResult:
    tokens: list[int]
    ms: float
    steps: list[VerifyStep] = field(default_factory=list)  # empty for plain decode


def _timed(gen, n: int) -> tuple[list[Any], float]:
    start = time.perf_counter_ns()
    out = []
    for item in gen:
        out.append(item)
        if len(out) == n:
            break
    ms = (time.perf_counter_ns() - start) / 1e6
    # after the clock: mlx-lm's own clean-up (speculative_generate_step rewinds its caches in a
    # `finally`) runs now rather than whenever the generator is collected, and the overlapped
    # next step is synced so it never lands in the next block's time
    gen.close()
    sync_streams()
    return out, ms


def plain_block(model: nn.Module, cache: list[Any], last: int, n: int, sampling: Sampling):
    gen = generate_step(
        mx.array([last], mx.uint32),
        model,
        max_tokens=n,
        sampler=sampling.sampler(),
        prompt_cache=cache,
    )
    out, ms = _timed(gen, n)
    return BlockResult([int(tok) for tok, _ in out], ms)


def draft_model_block(
    target: ModelCache, draft: ModelCache, block: Block, sampler: Callable[[mx.array], mx.array]
) -> BlockResult:
    model, cache, depth, n = target.model, target.cache, block.depth, block.tokens
    if len(cache) != len(model.layers):
        raise ValueError(
            f"the target's cache has {len(cache)} entries for {len(model.layers)} layers, so "
            "mlx-lm's speculative_generate_step cannot split it from the draft's"
        )
    gen = speculative_generate_step(
        mx.array([block.last], mx.uint32),
        model,
        draft.model,
        num_draft_tokens=depth,
        max_tokens=n,
        sampler=sampler,
        prompt_cache=[*cache, *draft.cache],
    )
    out, ms = _timed(gen, n)
    flags = [bool(fd) for _, _, fd in out]
    return BlockResult([int(tok) for tok, _, _ in out], ms, steps_from_flags(flags, depth, n))


def mtp_block(
    target: ModelCache,
    head: Any,  # mlatui.run.drafts.MTPDraft
    hidden: mx.array,
    block: Block,
    sampling: Sampling,
    rng: random.Random,
) -> tuple[BlockResult, mx.array]:
    """MTP speculation, shaped like mlx-lm's loop: the k drafts are built and `async_eval`-ed
    lazily, then drafts and verify are read at one sync point. Returns the block and the target
    hidden state before the stream's new last token."""
    model, cache, depth, n = target.model, target.cache, block.depth, block.tokens
    start = time.perf_counter_ns()
    tokens: list[int] = []
    steps: list[VerifyStep] = []
    y = mx.array([block.last], mx.uint32)
    while len(tokens) < n:
        k = min(depth, n - len(tokens))
        drafts, draft_probs = head.propose_lazy(y, k, hidden, None if sampling.greedy else sampling)
        mx.async_eval(drafts)
        logits, h = head.target_forward(model, mx.concatenate([y, drafts])[None], cache)
        if sampling.greedy:
            targets = mx.argmax(logits[0], axis=-1)  # (k + 1,)
            mx.eval(targets, drafts)
            d, t = as_ints(drafts), as_ints(targets)
            accepted = next((i for i in range(k) if d[i] != t[i]), k)
            nxt = t[accepted]
        else:
            p = sampling.probs(logits[0])  # (k + 1, V)
            mx.eval(p, draft_probs, drafts)
            d = as_ints(drafts)
            accepted, nxt = accept_sampled(d, p, draft_probs, rng)
        room = n - len(tokens)
        if accepted >= room:  # the budget ends on an accepted draft: it plays the correction's role
            tokens += d[:room]
            steps.append(VerifyStep(k, room, room))
            keep = room - 1
            nxt = d[room - 1]
        else:
            tokens += [*d[:accepted], nxt]
            steps.append(VerifyStep(k, accepted, accepted + 1))
            keep = accepted
        trim_prompt_cache(cache, k - keep)
        head.commit(keep, h[:, : keep + 1], drafts=d)
        hidden = h[:, keep : keep + 1]  # (1, 1, D)
        y = mx.array([nxt], mx.uint32)
    ms = (time.perf_counter_ns() - start) / 1e6
    sync_streams()
    return BlockResult(tokens, ms, steps), hidden


class CounterCache:
    """A draft 'cache' that only counts positions (a synthetic draft without a cost model)."""

    def __init__(self, offset: int = 0):
        self.offset = offset

    @property
    def state(self) -> list[mx.array]:
        return []

    def is_trimmable(self) -> bool:
        return True

    def trim(self, n: int) -> int:
        n = min(self.offset, n)
        self.offset -= n
        return n


class SyntheticDraftModel:
    """A draft 'model' for random-weight targets, run by mlx-lm's own speculative loop.

    Random weights give flat logits, so which token a bf16 verify picks at width L differs from
    an L = 1 pass by near-ties: a draft that guesses the target's greedy continuation saw its
    acceptance collapse from 0.7 to ~0.06 on the H200. So the acceptance is decided where mlx-lm
    decides it, in the sampler it is given (`verify_sampler`): each drafted position is kept with
    probability `acceptance` (up to the first rejection) by making the verify's sampled token
    equal to the draft's. Every forward still runs: the target's verify (its logits stay in the
    graph), and a real small model for each proposal, so the draft's cost is measured. Tokens
    and acceptance are synthetic and labelled so everywhere; timing is real."""

    def __init__(self, acceptance: float, seed: int, vocab_size: int, cost_model: nn.Module | None):
        self.acceptance = acceptance
        self.rng = random.Random(seed)
        self.vocab_size = vocab_size
        self.cost_model = cost_model
        self.proposed: list[int] = []  # this step's drafts, in order
        self._ids = mx.arange(vocab_size)  # (V,), built once: not in every draft step
        mx.eval(self._ids)  # evaluated here: nothing lazy may cross to the arm's thread (streams)

    def __call__(self, inputs: mx.array, cache: list[Any]) -> mx.array:
        length = inputs.shape[1]
        if self.cost_model is not None:
            cost = self.cost_model(inputs, cache=cache)  # (1, L, V_draft)
            anchor = cost[..., :1] * 0  # (1, L, 1): keeps the real forward in the graph
        else:
            cache[0].offset += length
            anchor = mx.zeros((1, length, 1))
        token = self.rng.randrange(self.vocab_size)
        self.proposed.append(token)
        hot = self._ids == token  # (V,)
        return anchor + mx.where(hot, 0.0, -1e4)[None, None]  # (1, L, V)

    def verify_sampler(self) -> Callable[[mx.array], mx.array]:
        """mlx-lm's sampler for both the draft's steps (one row: the draft's own one-hot choice)
        and the verify (k + 1 rows: the synthetic acceptance of the k proposals)."""

        def sample(logprobs: mx.array) -> mx.array:
            greedy = mx.argmax(logprobs, axis=-1)  # keeps the logits in the graph
            rows = logprobs.shape[0]
            if rows == 1:  # a draft step: its own one-hot choice
                return greedy
            drafts, self.proposed = self.proposed[-(rows - 1) :], []
            out = []
            for d in drafts:
                if self.rng.random() < self.acceptance:
                    out.append(d)
                else:
                    out.append((d + 1) % self.vocab_size)
                    break
            while len(out) < rows:
                out.append(self.rng.randrange(self.vocab_size))
            return mx.array(out, mx.uint32) + (greedy * 0).astype(mx.uint32)

        return sample

    def catch_up(self, tokens: list[int], cache: list[Any]) -> None:
        """Feed stream tokens the draft has not seen (untimed; no acceptance draws)."""
        if self.cost_model is not None:
            self.cost_model(mx.array([tokens]), cache=cache)  # (1, m)
            mx.eval([c.state for c in cache])
        else:
            cache[0].offset += len(tokens)


class SyntheticDraft:
    """The draft of a random-weight target (see SyntheticDraftModel), held like a draft
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


Factory = Callable[[Arm], object]


def draft_factories(loaded: Loaded, scenario: Scenario, seed: int) -> dict[str, Factory]:
    """Per draft kind ("mtp", "draft-model", "synthetic"), in the scenario's order, a function
    from an arm to its own draft of that kind; {} for a run without drafting. An MTP head asked
    for explicitly that the checkpoint lacks is an error (MTPError, one line); one asked for
    only if present becomes no draft, and `loaded.draft` / `loaded.drafts` say so."""
    out: dict[str, Factory] = {}
    kept: list[Draft] = []
    for draft in loaded.draft_kinds:
        make = _factory(loaded, draft, scenario, seed)
        if make is None:
            continue
        resolved = Draft(DraftKind.MTP) if draft.is_mtp else draft
        out[resolved.kind.value] = make
        kept.append(resolved)
    loaded.draft = kept[0] if kept else NO_DRAFT
    loaded.drafts = tuple(kept) if len(kept) > 1 else ()
    return out


def install_drafts(arm: Arm, factories: dict[str, Factory]) -> None:
    """On the arm's thread: its own draft of every kind; `arm.draft` is the first."""
    arm.drafts = {kind: make(arm) for kind, make in factories.items()}
    arm.draft = next(iter(arm.drafts.values()), None)


def hidden_reader(arm: Arm) -> object:
    """The draft a prefill serves: one that reads the target's hidden states (MTP), else the
    first (the prefill then computes the hidden states once for every kind)."""
    readers = [d for d in arm.drafts.values() if getattr(d, "needs_hidden", False)]
    return readers[0] if readers else arm.draft


def draft_factory(loaded: Loaded, scenario: Scenario, seed: int) -> Factory | None:
    """One draft for a run that compares a single one (decode parity): the draft model when
    there is one (mlx-lm has no MTP loop to compare against), else the first kind."""
    made = draft_factories(loaded, scenario, seed)
    return made.get(DraftKind.DRAFT_MODEL.value) or next(iter(made.values()), None)


def _factory(loaded: Loaded, draft: Draft, scenario: Scenario, seed: int) -> Factory | None:
    if draft.kind is DraftKind.SYNTHETIC:
        return _synthetic_factory(loaded, scenario.draft.acceptance, seed)
    if draft.is_mtp:
        return _mtp_factory(loaded, required=draft.kind is DraftKind.MTP)
    if draft.kind is DraftKind.DRAFT_MODEL and loaded.draft_model is not None:

        def draft_model(arm: Arm):
            return DraftModelSource(_arm_draft_model(arm, loaded.draft_model), draft.label)

        return draft_model
    return None


def _synthetic_factory(loaded: Loaded, acceptance: float, seed: int) -> Factory:
    vocab = vocab_size(loaded.model)

    def synthetic(arm: Arm):
        cost = _arm_draft_model(arm, loaded.draft_model) if loaded.draft_model is not None else None
        return SyntheticDraft(acceptance, seed, vocab, cost)  # same draws in both arms

    return synthetic


def _mtp_factory(loaded: Loaded, required: bool) -> Factory | None:
    """The checkpoint's MTP head, twinned per arm. A head asked for explicitly (`required`)
    that cannot be read is an error; one asked for only if present becomes no draft (a missing
    head is said in the header, the strip and the log)."""
    from mlatui.run.drafts import MTPError, MTPMissing, load_mtp_draft

    folder = loaded.checkpoint_dir
    if folder is None and required:
        raise MTPError(
            f"{loaded.name}: no checkpoint folder to read an MTP head from — "
            'use [draft] source = "draft-model" or a checkpoint with an MTP head'
        )
    if folder is None:
        return None
    notes: list[str] = []
    try:
        probe = load_mtp_draft(folder, loaded.model, notes=notes)
    except MTPMissing:
        if required:
            raise
        from mlatui.models.mtp_weights import missing_head_line

        loaded.mtp_missing = missing_head_line(folder)
        return None
    except MTPError:
        if required:
            raise
        return None
    loaded.draft_notes = (*loaded.draft_notes, *notes)
    if probe is None:
        return None

    def mtp(arm: Arm):
        head = probe.twin()  # shares the head's weights, own cache; gated like its arm
        _gate_if_mla(head.head, arm)
        return head

    return mtp


def _arm_draft_model(arm: Arm, model):
    """Each arm's draft is a twin gated like the arm (the fix applies process-wide, so the
    patched variant's draft has the patched gates too; an A/A gives both arms the same draft)."""
    model = mla.twin(model)
    _gate_if_mla(model, arm)
    return model


def _gate_if_mla(model, arm: Arm) -> None:
    if mla.mla_modules(model) or sparse_layers(model):
        gate_model(model, arm.variant or Variant.STOCK, arm.gates or Gates())
