"""Decode parity: mlatui's decode blocks beside a direct mlx-lm call on the same model and cache.

Three ways to decode `n` tokens from one prefilled context, paired by the sampler (A B B A):

- "mlatui": `decode_stream.run_block` on an arm worker thread, exactly as the decode and tune
  phases run it (stream rewind, draft catch-up, worker hand-off, CPU pinning);
- "mlx_lm": the same runtime call (`mlx_lm.generate.generate_step` for plain decode,
  `speculative_generate_step` for a draft model, through mlatui.run.runtime's block functions) made
  directly on the main thread, as `mlx_lm.generate` runs it, from a copy of the same prefilled
  cache: what differs is everything around it (worker hand-off, stream, catch-up, pinning);
- "mlx_lm-thread": the same direct call made from a second, plain Python thread. On the 2-core
  CPU mlx-lm decode ran 5-10% slower on the main thread than on any other thread (embedded
  model, 32-token blocks: 383 vs 361 ms), and mlatui's arms run on worker threads: this pair
  separates the harness from that thread effect;
- "sync-loop" (plain only): the synchronous loop mlatui used before (one `mx.eval` and `.item()`
  per token, no overlap), to show what pipelining is worth on the device.

Each block is a fresh generation of `n` tokens from the context (both sides rewind), timed from
the call to its last token. The ratio is tok/s(mlatui) / tok/s(other), a median over quads with
a block-bootstrap CI; parity holds when the CI lies inside ±tolerance.
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
from mlatui.measure.estimates import Interval, Outcome, control_outcome, stable_seed
from mlatui.measure.sampler import Hooks, SamplerPlan, sample_context, until
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
    SyntheticDraft,
    open_stream,
    recopy_stream_caches,
    rewind,
    run_block,
)
from mlatui.run.mtp import MTPDraft
from mlatui.run.runtime import Sampling, draft_model_block, plain_block
from mlatui.run.spec import plain_step
from mlatui.stream.phrases import interval_text

TOLERANCE_PCT = 3.0
SIDES = ("mlx_lm", "mlx_lm-thread", "sync-loop")


@dataclass(frozen=True)
class ParityResult:
    other: str  # mlx_lm | sync-loop
    depth: int
    tok_s: dict[str, float]  # side -> median tok/s
    ratio: Interval  # tok/s mlatui / tok/s other
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

    def recopy(self) -> None:
        """Fresh copies of its caches (between rounds, as the arms get them)."""
        recopy_in_place(self.cache)
        if self.draft is not None and isinstance(getattr(self.draft, "cache", None), list):
            recopy_in_place(self.draft.cache)

    def _rewind(self) -> None:
        trim_prompt_cache(self.cache, cache_len(self.cache) - self.base_len)
        if self.draft is not None:
            trim_prompt_cache(self.draft.cache, cache_len(self.draft.cache) - self.base_len)

    def block(self, last: int, depth: int, n: int, sampling: Sampling, seed: int, sync=False):
        mx.random.seed(seed)
        if isinstance(self.draft, SyntheticDraft):
            self.draft.model.rng.seed(seed)
        if sync:
            ms = _sync_loop(self.model, self.cache, last, n)
        elif depth == 0:
            ms = plain_block(self.model, self.cache, last, n, sampling).ms
        else:
            sampler = (
                self.draft.model.verify_sampler()
                if isinstance(self.draft, SyntheticDraft)
                else sampling.sampler()
            )
            ms = draft_model_block(
                self.model, self.draft.model, self.cache, self.draft.cache, last, depth, n, sampler
            ).ms
        self._rewind()
        return ms


def run_parity(
    model: Any,
    make_draft: Callable[[Arm], Any] | None,
    context_tokens: list[int],
    first: int,
    n: int,
    depth: int,
    rounds: int,
    seed: int,
    sampling: Sampling,
    progress: Callable[[str], None] = lambda line: None,
    versus: tuple[str, ...] = SIDES,
    max_seconds: float | None = None,
    source: Any = None,
) -> list[ParityResult]:
    """Parity of plain decode (and of draft-model speculation at `depth`, when a draft exists)
    against mlx-lm, and of plain decode against the synchronous loop: each side of `versus`, in
    that order, gets its own `rounds`. With `max_seconds`, each side's share of it (from the
    first block on) ends its rounds early, after a whole pair, so a time limit still leaves
    results. `source`: a model built from another source tree on `model`'s weights
    (mlatui.run.source_arm), measured instead, running its own code."""
    if source is None:
        _, arm = build_arms(model)  # the patched arm, as a user of the fix runs it
    else:
        gates = Gates.parse("installed", None, "installed")
        _, arm = build_arms(model, gates, sources={Variant.PATCHED: source})
    arm.draft = make_draft(arm) if make_draft else None
    if isinstance(arm.draft, MTPDraft):
        arm.draft = None  # mlx-lm has no MTP loop to compare against: plain parity only
    depth = depth if arm.draft is not None else 0
    prefill(arm, context_tokens)
    base_len = cache_len(arm.caches)
    direct = Direct(
        arm, make_draft(arm) if depth and make_draft else None, context_tokens, base_len
    )
    worker = ArmWorker(arm, Baton())
    side_thread = PlainThread()
    stream = worker.call(lambda a: open_stream(a, base_len, first, context_tokens))
    results: list[ParityResult] = []
    started = time.monotonic()
    try:
        both = (1, depth + 1) if depth else (1,)
        widths_of = {"mlx_lm": both, "mlx_lm-thread": both, "sync-loop": (1,)}
        pairs = [(other, widths_of[other]) for other in versus]
        for index, (other, widths) in enumerate(pairs):
            blocks: dict[tuple[str, int], int] = {}

            def measure(side: str, width: int, other=other, blocks=blocks) -> float:
                k = blocks[(side, width)] = blocks.get((side, width), -1) + 1
                block_seed = stable_seed(seed, "parity", width, k)  # the k-th block of each side
                d = width - 1
                if side == "mlatui":

                    def go(a: Arm) -> float:
                        rewind(a, stream)
                        return run_block(a, stream, d, n, sampling, block_seed).ms

                    return worker.call(go)
                if other == "mlx_lm-thread":
                    return side_thread.call(lambda: direct.block(first, d, n, sampling, block_seed))
                return direct.block(first, d, n, sampling, block_seed, sync=other == "sync-loop")

            plan = SamplerPlan(
                widths,
                min_rounds=rounds,
                max_rounds=rounds,
                warmup=1,
                control_width=1,
                control_quads=1,
                tolerance_pct=TOLERANCE_PCT,
                arms=("mlatui", other),
                seed=stable_seed(seed, "parity", other),
                settle=False,
            )

            def fresh(round_index: int) -> None:
                sides = [lambda: worker.call(recopy_stream_caches), direct.recopy]
                for recopy in sides if round_index % 2 == 0 else sides[::-1]:
                    recopy()

            def swap(_round_index: int) -> None:  # as the arms exchange theirs (CacheRounds)
                worker.call(lambda a: evaluate_held(a.caches))
                evaluate_held(direct.cache)
                swap_caches(arm.caches, direct.cache)

            mode = cache_rounds()
            hook = {CacheRounds.SWAP: swap, CacheRounds.COPY: fresh}.get(mode, lambda _r: None)
            more = until(None)
            if max_seconds is not None:
                left = len(pairs) - index  # this side and those after it share what is left
                deadline = time.monotonic() + (max_seconds - (time.monotonic() - started)) / left
                more = until(deadline)
            with unpinned():  # as the decode phases run their blocks
                run = sample_context(plan, Hooks(measure, between_rounds=hook, decide_more=more))
            for width in widths:
                ms_ratio = run.final.ratio[width]  # ms(mlatui) / ms(other)
                tok_ratio = Interval(
                    1 / ms_ratio.median, 1 / ms_ratio.high, 1 / ms_ratio.low, ms_ratio.n
                )
                samples = {
                    side: [t.ms for t in run.timings if t.arm == side and t.width == width]
                    for side in plan.arms
                }
                tok_s = {
                    side: n / run.final.step_ms[(side, width)].median * 1e3 for side in plan.arms
                }
                results.append(
                    ParityResult(
                        other,
                        width - 1,
                        tok_s,
                        tok_ratio,
                        control_outcome(tok_ratio, TOLERANCE_PCT),
                        samples,
                        run.rounds,
                    )
                )
                progress(
                    f"{other} depth {width - 1}: mlatui {tok_s['mlatui']:.1f} tok/s vs "
                    f"{tok_s[other]:.1f}, ratio {interval_text(tok_ratio)}"
                )
    finally:
        worker.close()
        side_thread.close()
    return results
