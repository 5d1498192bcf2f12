"""Phase plumbing shared by all phases, and the sweep phase.

The orchestrating thread hands each arm one step at a time (A B B A ...); arms return plain
numbers; events are emitted here, after the timed region has closed.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import mlx.core as mx
from mlx_lm.models.cache import trim_prompt_cache

from mlatui.arms import Arm, ArmWorker, copy_cache, prefill
from mlatui.events import Event, PhaseStart, PhaseSummary, Progress, Step, Validity
from mlatui.measure import L1_TOLERANCE_PCT, Stats, abba, l1_check
from mlatui.scenario import Phase
from mlatui.spec import require_trimmable

ARM_ORDER = ("stock", "patched")


class Stopped(Exception):
    """The run was asked to stop; raised between steps, never inside one."""


@dataclass
class RunContext:
    workers: dict[str, ArmWorker]
    emit: Callable[[Event], None]
    stop: threading.Event
    t0_ns: int
    tokens_for: Callable[[int], list[int]]  # the first n tokens of the run's text
    vocab_size: int
    make_draft: Callable[[Arm], Any] | None = None  # per-arm DraftSource factory
    draft_name: str = "none"
    prefill_worker: ArmWorker | None = None  # a third thread that runs the stock model
    invalid_contexts: set[int] = field(default_factory=set)

    def now(self) -> float:
        return (time.perf_counter_ns() - self.t0_ns) / 1e9

    def check_stop(self) -> None:
        if self.stop.is_set():
            raise Stopped()


class ProgressTracker:
    """Progress with an ETA, emitted at most twice a second."""

    def __init__(self, ctx: RunContext, phase: str, total: int):
        self.ctx, self.phase, self.total = ctx, phase, max(1, total)
        self.done = 0
        self.start = time.monotonic()
        self.last_emit = 0.0

    def advance(self, n: int = 1) -> None:
        self.done += n
        now = time.monotonic()
        if now - self.last_emit >= 0.5 or self.done >= self.total:
            self.last_emit = now
            elapsed = now - self.start
            eta = elapsed / self.done * (self.total - self.done) if self.done else None
            self.ctx.emit(Progress(self.ctx.now(), self.phase, self.done, self.total, eta))


def share_context(ctx: RunContext, tokens: list[int]) -> int:
    """Prefill once, with the stock model on a thread of its own, into a base cache; each arm
    then takes its own bit-identical copy on its own thread. Neither arm's stream ever holds
    the prefill's graphs or buffers (on CUDA each thread's stream keeps its own caches)."""
    source = ctx.prefill_worker or ctx.workers["stock"]
    length = source.call(lambda a: prefill(a, tokens))
    base = source.arm.cache
    hidden = {
        k: source.arm.state.pop(k)
        for k in ("context_hidden", "last_hidden")
        if k in source.arm.state
    }

    def take(a: Arm) -> None:
        a.cache = copy_cache(base)
        a.state.update(hidden)

    for name in ARM_ORDER:
        ctx.workers[name].call(take)
    if source is ctx.prefill_worker:
        source.arm.cache = None  # the base is no longer needed: free it
    return length


def _forward_and_trim(tokens: list[int]) -> Callable[[Arm], tuple[float, int, int]]:
    def run(arm: Arm) -> tuple[float, int, int]:
        x = mx.array([tokens])  # (1, L)
        mx.eval(x)
        before = arm.counters.total()
        start = time.perf_counter_ns()
        logits = arm.model(x, cache=arm.cache)
        mx.eval(logits)
        ms = (time.perf_counter_ns() - start) / 1e6
        after = arm.counters.total()
        trim_prompt_cache(arm.cache, len(tokens))
        return ms, after[0] - before[0], after[1] - before[1]

    return run


def validity(
    ctx: RunContext, phase: str, context: int, stock_ms: list[float], patched_ms: list[float]
) -> Validity:
    s, p, diff, ok = l1_check(stock_ms, patched_ms)
    v = Validity(ctx.now(), phase, context, s, p, diff, L1_TOLERANCE_PCT, ok)
    if not ok:
        ctx.invalid_contexts.add(context)
    ctx.emit(v)
    return v


CONTROL_REPS_FACTOR = 3


def reps_for(phase: Phase, width: int) -> int:
    """The L = 1 control gets 3x the samples: it is the cheapest step, and the 2% check needs a
    median that sample noise alone does not move by 2% (per-step jitter is ~5-9% on a small CPU)."""
    return phase.reps * CONTROL_REPS_FACTOR if width == 1 else phase.reps


def run_sweep(ctx: RunContext, phase: Phase, index: int, total_phases: int) -> PhaseSummary:
    """Step ms per arm at each context and width; the L = 1 check per context."""
    planned = len(phase.contexts) * sum(reps_for(phase, w) for w in phase.widths) * 2
    ctx.emit(
        PhaseStart(ctx.now(), phase.name, phase.kind, index, total_phases, planned, phase.contexts)
    )
    progress = ProgressTracker(ctx, phase.name, planned)
    rows: list[dict] = []
    max_width = max(phase.widths)
    for context in phase.contexts:
        ctx.check_stop()
        text = ctx.tokens_for(context + max_width)
        length = share_context(ctx, text[:context])
        stock = ctx.workers["stock"].arm
        require_trimmable(stock.cache, stock.state.get("model_name", "model"), "a sweep")
        samples: dict[tuple[str, int], list[float]] = {}
        for width in phase.widths:
            step = _forward_and_trim(text[context : context + width])
            for _ in range(phase.warmup):  # first call at a new L compiles; never timed
                for arm in ARM_ORDER:
                    ctx.workers[arm].call(step)
            for rep, arm in enumerate(abba(ARM_ORDER, reps_for(phase, width))):
                ctx.check_stop()
                ms, absorbed, materialised = ctx.workers[arm].call(step)
                samples.setdefault((arm, width), []).append(ms)
                ctx.emit(
                    Step(
                        ctx.now(),
                        phase.name,
                        arm,
                        length,
                        width,
                        rep // 2,
                        ms,
                        absorbed,
                        materialised,
                    )
                )
                progress.advance()
        v = validity(ctx, phase.name, length, samples[("stock", 1)], samples[("patched", 1)])
        for (arm, width), ms in sorted(samples.items(), key=lambda kv: (kv[0][1], kv[0][0])):
            s = Stats.of(ms)
            rows.append(
                {
                    "context": length,
                    "width": width,
                    "arm": arm,
                    "median_ms": s.median,
                    "p10_ms": s.p10,
                    "p90_ms": s.p90,
                    "n": s.n,
                    "valid": v.valid,
                    "samples_ms": ms,
                }
            )
    verdict = sweep_verdict(rows)
    summary = PhaseSummary(ctx.now(), phase.name, phase.kind, tuple(rows), verdict)
    ctx.emit(summary)
    return summary


def sweep_verdict(rows: list[dict]) -> str:
    valid = [r for r in rows if r["valid"]]
    if not valid:
        return "no valid context (L = 1 check failed everywhere)"
    top = max(r["context"] for r in valid)
    med = {(r["width"], r["arm"]): r["median_ms"] for r in valid if r["context"] == top}
    widths = sorted({w for w, _ in med if w > 1})
    if not widths:
        return f"largest valid context {top}"
    w = max(widths)
    ratio = med[(w, "stock")] / med[(w, "patched")]
    return f"at context {top}, L = {w}: stock {med[(w, 'stock')]:.2f} ms vs patched {med[(w, 'patched')]:.2f} ms ({ratio:.2f}x)"
