"""Decode parity: mlatui's decode blocks beside a direct mlx-lm call on the same model and cache,
paired by the sampler (A B B A), as tok/s(first side) / tok/s(other) with a block-bootstrap CI;
parity holds when the CI lies inside ±tolerance. The sides:

- "mlatui": `decode_stream.run_block` on an arm worker thread, as the decode phases run it;
- "mlx_lm": the same runtime call made directly on the main thread, as `mlx_lm.generate` runs
  it, from a copy of the same prefilled cache: what differs is everything around it;
- "mlx_lm-thread": that call from a plain Python thread (on the 2-core CPU the main thread
  decodes 5-10% slower than any other, and the arms run on worker threads);
- "sync-loop" (plain only): one `mx.eval` and `.item()` per token, no overlap: what pipelining
  is worth on the device;
- "mlx_lm-aa": the direct call on two plain threads, each from its own cache copy: the
  harness's own spread beside the mlatui pairings.

Each pairing makes its direct sides afresh: a side kept warm from the pairing before made a fake
A/A read 0.98 [0.974, 0.992] (tests/test_parity_order.py).
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import mlx.core as mx
from mlx_lm.models.cache import trim_prompt_cache

from mlatui.gate.policy import Gates, Variant
from mlatui.measure.estimates import Outcome, control_outcome, stable_seed
from mlatui.measure.plans import Setting
from mlatui.measure.sampler import Hooks, SamplerPlan, SamplerRun, sample_context, until
from mlatui.run.arms import (
    Arm,
    ArmWorker,
    Baton,
    CacheRounds,
    build_arms,
    cache_len,
    cache_rounds,
    copy_cache,
    evaluate_held,
    prefill,
    recopy_in_place,
    swap_caches,
    unpinned,
)
from mlatui.run.decode_stream import (
    Block,
    ModelCache,
    Sampling,
    SyntheticDraft,
    draft_model_block,
    open_stream,
    plain_block,
    recopy_stream_caches,
    rewind,
    run_block,
)
from mlatui.run.drafts import MTPDraft, plain_step
from mlatui.stream.event_base import Interval
from mlatui.stream.phrases import interval_text

TOLERANCE_PCT = 3.0
AA = "mlx_lm-aa"
SIDES = ("mlx_lm", "mlx_lm-thread", "sync-loop", AA)


def first_side(other: str) -> str:
    """The side paired with `other`: mlatui's arm, or for the A/A another direct call."""
    return "mlx_lm-thread" if other == AA else "mlatui"


@dataclass(frozen=True)
class ParityResult:
    other: str  # one of SIDES
    depth: int
    tok_s: dict[str, float]  # side -> median tok/s
    ratio: Interval  # tok/s first_side(other) / tok/s other
    outcome: Outcome
    samples_ms: dict[str, list[float]]
    rounds: int


def _sync_loop(model, cache, last: int, n: int) -> float:
    start = time.perf_counter_ns()
    for _ in range(n):
        last, _ms = plain_step(model, cache, last)
    return (time.perf_counter_ns() - start) / 1e6


class PlainThread:
    """A second Python thread that runs what it is handed (no pinning, no baton)."""

    def __init__(self) -> None:
        self._in: queue.SimpleQueue = queue.SimpleQueue()
        self._out: queue.SimpleQueue = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._loop, name="mlatui-parity", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while (fn := self._in.get()) is not None:
            try:
                self._out.put((fn(), None))
            except BaseException as e:  # noqa: BLE001 - handed back to the caller
                self._out.put((None, e))

    def call(self, fn: Callable[[], float]) -> float:
        self._in.put(fn)
        value, error = self._out.get()
        if error is not None:
            raise error
        return value

    def close(self) -> None:
        self._in.put(None)
        self._thread.join(timeout=10)


@dataclass(frozen=True)
class ParityPlan:
    """What a parity run decodes: blocks of `tokens` tokens from one context (its `first` text
    token fed first), plain and drafting `depth` per step; `rounds` per side of `versus`, in that
    order, within `max_seconds` when given."""

    context_tokens: list[int]
    first: int
    tokens: int
    depth: int
    rounds: int
    seed: int
    sampling: Sampling
    versus: tuple[str, ...] = SIDES
    max_seconds: float | None = None

    def sampler_plan(self, other: str, widths: tuple[int, ...]) -> SamplerPlan:
        return SamplerPlan(
            widths,
            min_rounds=self.rounds,
            max_rounds=self.rounds,
            warmup=1,
            control_width=1,
            control_quads=1,
            tolerance_pct=TOLERANCE_PCT,
            arms=(first_side(other), other),
            seed=stable_seed(self.seed, "parity", other),
            settle=False,
        )


class Direct:
    """The main thread's side: its own copy of the prefilled cache (and draft), rewound after
    every block."""

    def __init__(self, arm: Arm, draft: Any, context: list[int], base_len: int):
        self.model = arm.model
        self.cache = copy_cache(arm.caches)
        self.base_len = base_len
        self.draft = draft
        if draft is not None:
            draft.prefill(mx.array([context]))  # (1, T)
        self._rewind()  # the arm's caches may hold a block past the context

    def recopy(self) -> None:
        """Fresh copies of its caches (between rounds, as the arms get them)."""
        recopy_in_place(self.cache)
        if self.draft is not None and isinstance(getattr(self.draft, "cache", None), list):
            recopy_in_place(self.draft.cache)

    def _rewind(self) -> None:
        trim_prompt_cache(self.cache, cache_len(self.cache) - self.base_len)
        if self.draft is not None:
            trim_prompt_cache(self.draft.cache, cache_len(self.draft.cache) - self.base_len)

    def block(self, block: Block, sampling: Sampling, seed: int, sync: bool = False) -> float:
        mx.random.seed(seed)
        if isinstance(self.draft, SyntheticDraft):
            self.draft.model.rng.seed(seed)
        target = ModelCache(self.model, self.cache)
        if sync:
            ms = _sync_loop(self.model, self.cache, block.last, block.tokens)
        elif block.depth == 0:
            ms = plain_block(self.model, self.cache, block.last, block.tokens, sampling).ms
        else:
            sampler = (
                self.draft.model.verify_sampler()
                if isinstance(self.draft, SyntheticDraft)
                else sampling.sampler()
            )
            draft = ModelCache(self.draft.model, self.draft.cache)
            ms = draft_model_block(target, draft, block, sampler).ms
        self._rewind()
        return ms


class _Sides:
    """The arm on its worker thread (mlatui, opened at the first pairing that needs it) and a
    maker of each pairing's direct sides."""

    def __init__(
        self,
        arm: Arm | None,
        plan: ParityPlan,
        make_direct: Callable[[], Direct],
        make_thread: Callable[[], PlainThread] = PlainThread,
    ) -> None:
        self.arm, self.plan = arm, plan
        self.make_direct, self.make_thread = make_direct, make_thread
        self.worker: ArmWorker | None = None
        self.stream: Any = None

    def mlatui(self) -> tuple[ArmWorker, Any]:
        """The arm's worker and its decode stream (one for every pairing, as a run has one)."""
        if self.worker is None:
            if self.arm is None:
                raise ValueError("a pairing with mlatui needs the arm")
            self.worker = ArmWorker(self.arm, Baton())
            base_len, first, context = (
                cache_len(self.arm.caches),
                self.plan.first,
                self.plan.context_tokens,
            )
            self.stream = self.worker.call(lambda a: open_stream(a, base_len, first, context))
        return self.worker, self.stream

    def rewound(self) -> list[Any]:
        """The arm's caches back at the prefilled context and evaluated on its own thread (a
        copy or an exchange takes them at the same length as the direct sides' own)."""
        worker, stream = self.mlatui()

        def rewind_held(a: Arm) -> list[Any]:
            rewind(a, stream)
            evaluate_held(a.caches)
            return a.caches

        return worker.call(rewind_held)

    def close(self) -> None:
        if self.worker is not None:
            self.worker.close()

    def sample(self, other: str, widths: tuple[int, ...], deadline: float | None) -> SamplerRun:
        """`first_side(other)` against `other` over `widths` (width w: depth w - 1), rounds
        ending by `deadline` (monotonic) after a whole pair."""
        pairing = _Pairing(self, other)
        try:
            hooks = Hooks(
                pairing.measure, between_rounds=pairing.between_rounds, decide_more=until(deadline)
            )
            with unpinned():  # as the decode phases run their blocks
                return sample_context(self.plan.sampler_plan(other, widths), hooks)
        finally:
            pairing.close()


class _Pairing:
    """One `--versus` pairing's sides, each direct one with a fresh cache copy (and draft) and,
    off the main thread, a fresh plain thread, so both sides of the A/A start and warm alike.
    Between rounds their caches are exchanged or copied afresh (CacheRounds)."""

    def __init__(self, sides: _Sides, other: str) -> None:
        self.sides, self.other = sides, other
        self.first = first_side(other)
        if sides.worker is not None:
            sides.rewound()  # copied from below, at the prefilled length
        self.direct = sides.make_direct()
        self.twin = sides.make_direct() if other == AA else None
        threaded = other in ("mlx_lm-thread", AA)
        self.thread = sides.make_thread() if threaded else None
        self.twin_thread = sides.make_thread() if self.twin is not None else None
        self.blocks: dict[tuple[str, int], int] = {}
        if self.first == "mlatui":
            sides.mlatui()

    def close(self) -> None:
        for thread in (self.thread, self.twin_thread):
            if thread is not None:
                thread.close()

    def measure(self, side: str, width: int) -> float:
        plan = self.sides.plan
        k = self.blocks[(side, width)] = self.blocks.get((side, width), -1) + 1
        seed = stable_seed(plan.seed, "parity", width, k)  # the k-th block of each side
        block = Block(plan.first, plan.tokens, width - 1)
        if side == "mlatui":
            worker, stream = self.sides.mlatui()

            def go(a: Arm) -> float:
                rewind(a, stream)
                setting = Setting(depth=block.depth)
                return run_block(a, stream, setting, block.tokens, plan.sampling, seed).ms

            return worker.call(go)
        direct, thread = self.direct, self.thread
        if side == self.first and self.twin is not None:
            direct, thread = self.twin, self.twin_thread  # the A/A's first side
        if thread is not None:
            return thread.call(lambda: direct.block(block, plan.sampling, seed))
        return direct.block(block, plan.sampling, seed, sync=self.other == "sync-loop")

    def between_rounds(self, round_index: int) -> None:
        how = cache_rounds()
        if how is CacheRounds.SWAP:
            self._swap()
        elif how is CacheRounds.COPY:
            first = self.twin.recopy if self.twin is not None else self._recopy_arm
            sides = [first, self.direct.recopy]
            for recopy in sides if round_index % 2 == 0 else sides[::-1]:
                recopy()

    def _recopy_arm(self) -> None:
        worker, _ = self.sides.mlatui()
        worker.call(recopy_stream_caches)

    def _swap(self) -> None:
        """As the arms exchange theirs (CacheRounds): every buffer serves both sides."""
        if self.twin is None:
            first_cache = self.sides.rewound()
        else:
            evaluate_held(self.twin.cache)
            first_cache = self.twin.cache
            mine = getattr(self.twin.draft, "cache", None)
            theirs = getattr(self.direct.draft, "cache", None)
            if isinstance(mine, list) and isinstance(theirs, list):
                evaluate_held(mine)
                evaluate_held(theirs)
                swap_caches(mine, theirs)
        evaluate_held(self.direct.cache)
        swap_caches(first_cache, self.direct.cache)


def run_parity(
    model: Any,
    make_draft: Callable[[Arm], Any] | None,
    plan: ParityPlan,
    progress: Callable[[str], None] = lambda line: None,
    source: Any = None,
) -> list[ParityResult]:
    """Plain decode (and draft-model speculation at the plan's depth) against each side of
    `versus` in turn; with `max_seconds`, each side's share of what is left ends its rounds
    after a whole pair. `source`: another source tree's model on `model`'s weights, measured
    instead (mlatui.run.arms)."""
    arm = _parity_arm(model, make_draft, source)
    depth = plan.depth if arm.draft is not None else 0
    prefill(arm, plan.context_tokens)
    base_len = cache_len(arm.caches)

    def direct() -> Direct:
        draft = make_draft(arm) if depth and make_draft else None
        return Direct(arm, draft, plan.context_tokens, base_len)

    sides = _Sides(arm, plan, direct)
    both = (1, depth + 1) if depth else (1,)
    widths_of = {"mlx_lm": both, "mlx_lm-thread": both, "sync-loop": (1,), AA: both}
    results: list[ParityResult] = []
    started = time.monotonic()
    try:
        for index, other in enumerate(plan.versus):
            deadline = None
            if plan.max_seconds is not None:
                left = len(plan.versus) - index  # this side and those after it share what is left
                spent = time.monotonic() - started
                deadline = time.monotonic() + (plan.max_seconds - spent) / left
            run = sides.sample(other, widths_of[other], deadline)
            for width in widths_of[other]:
                result = _width_result(run, other, width, plan.tokens)
                results.append(result)
                first = first_side(other)
                progress(
                    f"{other} depth {result.depth}: {first} {result.tok_s[first]:.1f} tok/s vs "
                    f"{result.tok_s[other]:.1f}, ratio {interval_text(result.ratio)}"
                )
    finally:
        sides.close()
    return results


def _parity_arm(model: Any, make_draft: Callable[[Arm], Any] | None, source: Any) -> Arm:
    """The patched arm, as a user of the fix runs it (or the other source tree's model), with
    its draft; an MTP head is dropped (mlx-lm has no MTP loop to compare against)."""
    if source is None:
        _, arm = build_arms(model)
    else:
        gates = Gates.parse("installed", None, "installed")
        _, arm = build_arms(model, gates, sources={Variant.PATCHED: source})
    arm.draft = make_draft(arm) if make_draft else None
    if isinstance(arm.draft, MTPDraft):
        arm.draft = None
    return arm


def _width_result(run: SamplerRun, other: str, width: int, tokens: int) -> ParityResult:
    ms_ratio = run.final.ratio[width]  # ms(mlatui) / ms(other)
    tok_ratio = Interval(1 / ms_ratio.median, 1 / ms_ratio.high, 1 / ms_ratio.low, ms_ratio.n)
    sides = (first_side(other), other)
    samples = {
        side: [t.ms for t in run.timings if t.arm == side and t.width == width] for side in sides
    }
    tok_s = {side: tokens / run.final.step_ms[(side, width)].median * 1e3 for side in sides}
    return ParityResult(
        other,
        width - 1,
        tok_s,
        tok_ratio,
        control_outcome(tok_ratio, TOLERANCE_PCT),
        samples,
        run.rounds,
    )
