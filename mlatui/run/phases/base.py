"""Plumbing every phase shares: the run's context, progress, prefills, timed steps, the L = 1 check.

The orchestrating thread hands each arm one step at a time (A B B A ...); arms return plain
numbers; events are emitted here, after the timed region has closed. An inconclusive L = 1
check may be decided on every L = 1 quad of the pass so far (`pool_checks`; the estimator and
the rule are mlatui.measure.estimates'), after a phase's last context; under mlx.launch rank 0
decides for every rank, so every rank leaves out the same contexts.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import mlx.core as mx
import msgspec

from mlatui.config.scenario import Phase
from mlatui.host.distributed import Lockstep
from mlatui.measure.bandwidth import StepBandwidth
from mlatui.measure.estimates import (
    CI_METHOD,
    ESTIMATORS,
    POOLED_CI_METHOD,
    POOLED_ESTIMATOR,
    ContextEstimates,
    Outcome,
    PooledCheck,
    Timing,
    decide,
    pooled_check,
    stable_seed,
)
from mlatui.measure.sampler import Hooks, SamplerPlan, SamplerRun, sample_context, within
from mlatui.models.mx_typed import before_step
from mlatui.run.arms import (
    Arm,
    ArmWorker,
    CacheRounds,
    cache_rounds,
    copy_cache,
    evaluate_held,
    fill_random_latents,
    prefill,
    recopy_in_place,
    swap_caches,
)
from mlatui.run.phases.results import L1Quads
from mlatui.stream.events import (
    ARMS,
    Basis,
    DriftEvent,
    Estimate,
    Event,
    LogMessage,
    PhaseStart,
    PhaseSummary,
    PooledValidity,
    Progress,
    Step,
    Validity,
)
from mlatui.stream.phase_rows import DecodeRow, EstimateRow, Quantity, SweepRow

Row = TypeVar("Row", SweepRow, DecodeRow)  # a summary row with its context's L = 1 check


class Stopped(Exception):
    """The run was asked to stop; raised between steps, never inside one."""


@dataclass(frozen=True)
class RunContext:
    """A pass's environment, the same for every phase: the arms' workers, where events go, the
    stop flag and clock, the text, the harness's settings and, under mlx.launch, the lock-step.
    It holds no results: a phase returns those (mlatui.run.phases.results)."""

    workers: dict[str, ArmWorker]
    emit: Callable[[Event], None]
    stop: threading.Event
    t0_ns: int
    tokens_for: Callable[[int], list[int]]  # the first n tokens of the run's text
    vocab_size: int
    draft_kinds: tuple[str, ...] = ()  # in the scenario's order; each arm has a draft per kind
    prefill_worker: ArmWorker | None = None  # a third thread that runs the stock model
    seed: int = 0
    fill: str = "prefill"  # prefill | random-latents (timing only, random weights)
    settle: bool = True
    lockstep: Lockstep | None = None  # under mlx.launch: every rank runs this same schedule
    bandwidth: StepBandwidth | None = None  # the target's byte census and the device's limit

    def now(self) -> float:
        return (time.perf_counter_ns() - self.t0_ns) / 1e9

    def log(self, level: str, text: str) -> None:
        self.emit(LogMessage(self.now(), level, text))

    def check_stop(self) -> None:
        """Between steps. Under mlx.launch this is also the barrier every step starts from: the
        ranks share their stop flags in one tiny all_sum, so they stop at the same step and no
        rank's clock starts while another is still finishing its previous step."""
        stop = self.stop.is_set()
        if self.lockstep is not None:
            stop = self.lockstep.any_stop(stop)
        if stop:
            raise Stopped()

    def decide_more(self, wants_more: bool) -> bool:
        """More rounds? Rank 0's answer for every rank (each rank's own timings differ)."""
        if self.lockstep is None:
            return wants_more
        return self.lockstep.leader_decides(wants_more)

    def decide_more_by(
        self, deadline: float | None, planned_rounds: int, grow_to: int = 0
    ) -> Callable[[bool], bool]:
        """`decide_more` with no round past a budget's `deadline` (run seconds; None: none)."""
        if deadline is None:
            return self.decide_more
        return within(self.decide_more, self.now, deadline, planned_rounds, grow_to)

    def leader_decides_each(self, wants: list[bool]) -> list[bool]:
        """Rank 0's yes/no for each item (every rank passes the same number), in one collective."""
        if self.lockstep is None:
            return list(wants)
        return self.lockstep.leader_decides_each(wants)

    def check_same(self, value: int, what: str) -> None:
        if self.lockstep is not None:
            self.lockstep.check_same(value, what)


class ProgressTracker:
    """Progress with an ETA, emitted at most twice a second."""

    def __init__(self, ctx: RunContext, phase: str, total: int):
        self.ctx, self.phase, self.total = ctx, phase, max(1, total)
        self.done = 0
        self.start = time.monotonic()
        self.last_emit = 0.0

    def advance(self) -> None:
        self.done += 1
        self.total = max(self.total, self.done)  # rounds a budget's slice grew
        now = time.monotonic()
        if now - self.last_emit >= 0.5 or self.done >= self.total:
            self.last_emit = now
            elapsed = now - self.start
            eta = elapsed / self.done * (self.total - self.done) if self.done else None
            self.ctx.emit(Progress(self.ctx.now(), self.phase, self.done, self.total, eta))

    def grow(self, calls: int) -> None:
        """Calls the plan did not count (a sweep that was to serve did not)."""
        self.total += calls

    def shrink(self, calls: int) -> None:
        """Planned calls that will not run (settings rejected by bound)."""
        self.total = max(self.done, self.total - calls)

    def after_round(self, plan: SamplerPlan, estimates: ContextEstimates) -> None:
        """An undecided L = 1 check adds a pair of rounds: the planned total grows with it."""
        r = estimates.rounds
        if r >= plan.first_rounds and r % 2 == 0 and r < plan.max_rounds:
            if estimates.control_outcome is Outcome.INCONCLUSIVE:
                self.total += plan.timed_calls(2)


def emit_phase_start(
    ctx: RunContext, phase: Phase, index: int, total: int, planned: int, segments
) -> None:
    """The phase's PhaseStart, with its plan (mlatui.measure.plans segments) for the ETA."""
    ctx.emit(
        PhaseStart(
            ctx.now(),
            phase.name,
            phase.kind,
            index,
            total,
            planned,
            phase.contexts,
            tuple(segments),
        )
    )


def share_context(ctx: RunContext, tokens: list[int]) -> int:
    """Prefill once, with the stock model on a thread of its own, into a base cache; each arm
    then takes its own bit-identical copy on its own thread. Neither arm's stream ever holds
    the prefill's graphs or buffers (on CUDA each thread's stream keeps its own caches)."""
    source = ctx.prefill_worker or ctx.workers["stock"]
    if ctx.fill == "random-latents":
        seed = stable_seed(ctx.seed, "latents", len(tokens))
        length = source.call(lambda a: fill_random_latents(a, len(tokens), seed))
    else:
        length = source.call(lambda a: prefill(a, tokens, check_stop=ctx.check_stop))
    base = source.arm.caches
    hidden, source.arm.hidden = source.arm.hidden, None

    def take(a: Arm) -> None:
        a.cache = copy_cache(base)
        a.hidden = hidden

    for name in ARMS:
        ctx.workers[name].call(take)
    if source is ctx.prefill_worker:
        source.arm.cache = None  # the base is no longer needed: free it
    return length


def forward_and_trim(tokens: list[int]) -> Callable[[Arm], tuple[float, int, int]]:
    """One synced step, timed. Sharded, the clock stops when rank 0's logits are evaluated,
    which needs every rank's part: tensor parallel sums every layer's heads and MLP columns
    across ranks, a pipeline gathers the last stage's output on all. No extra barrier sits
    inside the timed region: its round trip would add the same constant to both arms and pull
    their paired ratio towards 1. The barrier that starts every step (`check_stop`) is outside."""

    def run(arm: Arm) -> tuple[float, int, int]:
        x = mx.array([tokens])  # (1, L)
        mx.eval(x)
        rewind = before_step(arm.caches)  # hybrid layers: a snapshot, taken untimed
        before = arm.counters.total()
        start = time.perf_counter_ns()
        logits = arm.model(x, cache=arm.cache)
        mx.eval(logits)
        ms = (time.perf_counter_ns() - start) / 1e6
        after = arm.counters.total()
        rewind(len(tokens))
        return ms, after[0] - before[0], after[1] - before[1]

    return run


def validity(ctx: RunContext, phase: str, context: int, estimates: ContextEstimates) -> Validity:
    """The L = 1 check of one context, from its paired estimates, emitted. A model phase's
    invalid and inconclusive contexts are kept out of every verdict: its phase returns its
    checks (PhaseResult.checks) and the run keeps them (Checks); an indexer phase's check
    leaves out only its own figures."""
    ratio = estimates.control_ratio
    outcome = estimates.control_outcome or Outcome.INCONCLUSIVE
    width = estimates.control_width
    one = {arm: estimates.step_ms.get((arm, width)) if width is not None else None for arm in ARMS}
    v = Validity(
        ctx.now(),
        phase,
        context,
        one["stock"].median if one["stock"] else math.nan,
        one["patched"].median if one["patched"] else math.nan,
        (ratio.median - 1) * 100 if ratio else math.nan,
        estimates.tolerance_pct,
        outcome is Outcome.VALID,
        outcome.value,
        ratio,
        estimates.rounds,
    )
    ctx.emit(v)
    return v


def estimate_rows(estimates: ContextEstimates) -> tuple[EstimateRow, ...]:
    rows = []
    for (arm, width), iv in sorted(estimates.step_ms.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        rows.append(EstimateRow.of(Quantity.STEP_MS, arm, width, iv))
    for width, iv in sorted(estimates.ratio.items()):
        rows.append(EstimateRow.of(Quantity.RATIO, "", width, iv))
    for arm, iv in estimates.marginal_ms.items():
        rows.append(EstimateRow.of(Quantity.MARGINAL_MS, arm, 2, iv))
    for (arm, width), iv in sorted(estimates.vs_l1.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        rows.append(EstimateRow.of(Quantity.VS_L1, arm, width, iv))
    return tuple(rows)


class EstimateEmitter:
    """Hands a context's estimates to the stream after every round (the dashboard's first point
    appears after the first round, then tightens) and each new drift event once; with
    `bandwidth` (whole-model steps), each width's bytes per step and each arm's GB/s and MBU."""

    def __init__(
        self,
        ctx: RunContext,
        phase: str,
        context: int,
        bandwidth: StepBandwidth | None = None,
    ):
        self.ctx, self.phase, self.context = ctx, phase, context
        self.drifts_seen = 0
        self.bandwidth = bandwidth

    def __call__(self, estimates: ContextEstimates, final: bool = False) -> None:
        for d in estimates.drifts[self.drifts_seen :]:
            self.ctx.emit(
                DriftEvent(
                    self.ctx.now(),
                    self.phase,
                    self.context,
                    d.round,
                    d.before_ms,
                    d.after_ms,
                    d.change_pct,
                )
            )
            self.ctx.log(
                "warning",
                f"{self.phase} @ {self.context}: device drift at round {d.round + 1}, "
                f"L=1 level {d.before_ms:.2f} -> {d.after_ms:.2f} ms ({d.change_pct:+.0f}%, "
                "both arms; paired figures cancel it)",
            )
        self.drifts_seen = len(estimates.drifts)
        event = estimate_event(self.ctx.now(), self.phase, self.context, estimates, final)
        if self.bandwidth is not None:
            step_ms = [r for r in event.rows if r.quantity == Quantity.STEP_MS]
            widths = sorted({r.width for r in step_ms})
            step_bytes = self.bandwidth.step_bytes(self.context, widths)
            rows = (*event.rows, *self.bandwidth.rows(self.context, step_ms))
            event = msgspec.structs.replace(event, rows=rows, step_bytes=step_bytes)
        self.ctx.emit(event)


def estimate_event(
    t: float, phase: str, context: int, estimates: ContextEstimates, final: bool
) -> Estimate:
    """A sampler run's estimates as the stream carries them (the emitter adds its bandwidth
    rows); an A/A run's harness bias reads its final ones."""
    return Estimate(
        t,
        phase,
        context,
        estimates.rounds,
        final,
        estimates.control_outcome.value if estimates.control_outcome else "",
        estimate_rows(estimates),
        estimates.drifting_rounds,
        dict(ESTIMATORS, ci=CI_METHOD),
    )


def cache_rounds_hook(ctx: RunContext, recopy: Callable[[Arm], None]) -> Callable[[int], None]:
    """The sampler's `between_rounds` (mlatui.run.arms.CacheRounds): by default the two arms
    exchange their target caches, which hold the same tokens at every round's start (a sweep's
    steps are trimmed away, a decode round rewinds to the prefilled context); with `copy`,
    `recopy` on every arm's thread, the order alternating; nothing with `off`."""
    mode = cache_rounds()
    if mode is CacheRounds.OFF:
        return lambda _round_index: None
    if mode is CacheRounds.SWAP:

        def swap(_round_index: int) -> None:
            for name in ARMS:
                ctx.workers[name].call(lambda a: evaluate_held(a.caches))
            stock, patched = (ctx.workers[name].arm.caches for name in ARMS)
            swap_caches(stock, patched)

        return swap

    def between(round_index: int) -> None:
        for name in ARMS if round_index % 2 == 0 else ARMS[::-1]:
            ctx.workers[name].call(recopy)

    return between


@dataclass(frozen=True)
class StepSite:
    """Where synced steps run: the label their events carry, the shared context's length, and
    the text after it (a step of width w feeds `tail[:w]`)."""

    label: str
    length: int
    tail: list[int]


def sample_steps(
    ctx: RunContext,
    site: StepSite,
    plan: SamplerPlan,
    progress: ProgressTracker,
    interim: bool = True,
    deadline: float | None = None,
) -> SamplerRun:
    """Synced steps at every width of the plan in interleaved rounds: Step events and estimates
    (with `interim`, after each round too), no round past a budget's `deadline` (run seconds).
    The caller keeps the run's L = 1 quads."""
    label, length = site.label, site.length
    steps = {w: forward_and_trim(site.tail[:w]) for w in plan.widths}
    emitter = EstimateEmitter(ctx, label, length, ctx.bandwidth)
    pending: list[tuple[str, int, float, int, int]] = []

    def measure(arm: str, width: int) -> float:
        ms, absorbed, materialised = ctx.workers[arm].call(steps[width])
        pending.append((arm, width, ms, absorbed, materialised))
        return ms

    def on_timing(t: Timing) -> None:  # after the timed region has closed
        arm, width, ms, absorbed, materialised = pending.pop()
        ctx.emit(Step(ctx.now(), label, arm, length, width, t.round, ms, absorbed, materialised))
        progress.advance()

    def on_round(estimates: ContextEstimates) -> None:
        if interim:
            emitter(estimates)
        progress.after_round(plan, estimates)

    run = sample_context(
        plan,
        Hooks(
            measure,
            warm=lambda arm, width: ctx.workers[arm].call(steps[width]) and None,
            clock=ctx.now,
            on_timing=on_timing,
            on_round=on_round,
            check_stop=ctx.check_stop,
            decide_more=ctx.decide_more_by(deadline, plan.first_rounds),
            between_rounds=cache_rounds_hook(ctx, lambda a: recopy_in_place(a.caches)),
        ),
    )
    emitter(run.final, final=True)
    return run


def pool_checks(
    ctx: RunContext, phase: str, checks: Sequence[Validity], l1: L1Quads
) -> dict[int, Validity]:
    """The phase's checks decided with the one pooled over `l1` (every L = 1 quad of the pass
    so far, the phase's own included): {context: its new Validity} for those it made valid
    (pooled). Emits the PooledValidity when the phase has an undecided check."""
    if not checks:
        return {}
    tolerance = checks[0].tolerance_pct
    by_context = {c: l1.pooled(c) for c in l1.contexts()}
    seed = stable_seed(ctx.seed, phase, "l1-pooled")
    pooled = pooled_check(by_context, ARMS, 1, seed, tolerance)
    verdict = pooled.outcome if pooled else None
    wanted = [
        decide(
            Outcome(v.verdict),
            v.ratio.low if v.ratio else None,
            v.ratio.high if v.ratio else None,
            verdict,
        )[1]
        is Basis.POOLED
        for v in checks
    ]
    chosen = ctx.leader_decides_each(wanted)  # rank 0's, for every rank
    unsure = [v.context for v in checks if v.verdict == Outcome.INCONCLUSIVE.value]
    decided = {v.context for v, yes in zip(checks, chosen, strict=True) if yes}
    if pooled is not None and (unsure or decided):
        ctx.emit(_event(ctx, phase, pooled, decided, unsure))
    out = {}
    for v, yes in zip(checks, chosen, strict=True):
        if not yes:
            continue
        new = msgspec.structs.replace(
            v, t=ctx.now(), valid=True, outcome=Outcome.VALID.value, basis=Basis.POOLED
        )
        ctx.emit(new)
        out[v.context] = new
    return out


def _event(
    ctx: RunContext, phase: str, pooled: PooledCheck, decided: set[int], unsure: list[int]
) -> PooledValidity:
    return PooledValidity(
        ctx.now(),
        phase,
        pooled.contexts,
        pooled.rounds,
        pooled.ratio.n,
        pooled.ratio,
        pooled.tolerance_pct,
        pooled.outcome.value,
        POOLED_ESTIMATOR,
        POOLED_CI_METHOD,
        tuple(sorted(decided)),
        tuple(dict.fromkeys(c for c in unsure if c not in decided)),  # each context once
    )


def close_phase(
    ctx: RunContext,
    phase: Phase,
    rows: list[Row],
    checks: Sequence[Validity],
    l1: L1Quads,
    verdict_of: Callable[[list[Row]], str],
) -> tuple[PhaseSummary, tuple[Validity, ...]]:
    """The phase's checks pooled over `l1` (every L = 1 quad of the pass, its own included), its
    rows marked with what that decided and its summary emitted; with its checks as they ended."""
    pooled = pool_checks(ctx, phase.name, checks, l1)
    rows = mark_rows(rows, pooled)
    summary = PhaseSummary(ctx.now(), phase.name, phase.kind, tuple(rows), verdict_of(rows))
    ctx.emit(summary)
    return summary, tuple(pooled.get(v.context, v) for v in checks)


def mark_rows(rows: list[Row], decided: dict[int, Validity]) -> list[Row]:
    """A phase's rows with the pooled decisions in (`valid`, `outcome`, `basis`)."""
    return [
        msgspec.structs.replace(r, valid=True, outcome=Outcome.VALID.value, basis=Basis.POOLED)
        if r.context in decided
        else r
        for r in rows
    ]
