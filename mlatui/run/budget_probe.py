"""The budget's device side: a short probe of this device's step costs on the run's own arms, the
contexts and the plan that fit (mlatui.run.budget), said in the log and a BudgetPlanned before
the first phase, and again at a phase boundary where the pace so far would end past the budget;
at the end, the time left to the checks still undecided and a BudgetOutcome.

MLX compiles a kernel on a shape's first use (the H200's first 256-token probe took 28 s, then the
whole scenario 26 s), so every shape runs once untimed and the forecast reads the warm runs; the
first uses' cost beyond them is said apart (`first_use_s`)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import partial

from msgspec import structs

from mlatui.config.run_plan import RunPlan
from mlatui.config.scenario import Phase, Scenario
from mlatui.measure.plans import (
    Setting,
    decode_settings,
    more_phase,
    phase_plans,
    phase_segments,
)
from mlatui.measure.progress import RunProgress
from mlatui.run.arms import Arm
from mlatui.run.budget import (
    END_SHARE,
    FORECAST_MARGIN,
    Limits,
    Plan,
    choose_contexts,
    fit_to_budget,
    longest_context,
    outcome_text,
    slices,
)
from mlatui.run.decode_stream import open_stream, rewind, run_block
from mlatui.run.phases.base import RunContext, forward_and_trim, share_context
from mlatui.run.phases.decode import sampling_of
from mlatui.run.phases.more import MoreRounds
from mlatui.run.phases.results import PassResults, Slices
from mlatui.stream.events import ARMS, BudgetOutcome, BudgetPlanned, LogMessage

PROBE_REPS = 2
# The probe may take this share of the budget: on a slow device (the reference BLAS: 45 s for the
# default scenario's two lengths) a longer length is left out and the forecast extrapolates.
PROBE_BUDGET_SHARE = 0.12
COMPILE_FLOOR_S = 0.05  # a first prefill this much (plus twice the second's) slower: a compile
WARM_BLOCK_TOKENS = 8
PAIR = 2  # the rounds a check's last attempt plans: one pair, then more while it is undecided


def probe_contexts(scenario: Scenario, longest: int | None = None) -> tuple[int, ...]:
    """The scenario's smallest context (at most 256) and four times that (at most its largest);
    with `longest` (the longest the story allows here) fourfold lengths up to it; then each decode
    phase's smallest context beyond those (a step grows faster than in proportion once the cache
    outgrows the CPU's caches: 14 ms at 1K, 40 ms at 4K, where a line through 256 and 1K said 23)."""
    contexts = sorted({c for p in scenario.phases for c in p.contexts})
    if not contexts:
        return ()
    top = small = min(contexts[0], 256)
    lengths = {small, min(4 * small, contexts[-1])}
    while longest is not None and top < longest:
        top = min(4 * top, longest)
        lengths.add(top)
    for p in scenario.phases:
        if p.kind.rules.decodes and p.contexts and min(p.contexts) > max(lengths):
            lengths.add(min(p.contexts))
    return tuple(sorted(lengths))


@dataclass(frozen=True)
class ProbeDevice:
    """What the probe does on the device (the engine's arms, or a test's): `prefill(context)`
    shares a prefilled context with both arms and returns its length; `step(arm, width)` runs
    one synced step there and returns its ms; `decide`: rank 0's yes/no per item; `warm_decode`:
    the decode settings' blocks twice at the first length, returning the first's seconds beyond
    the second's (run on a device that compiles)."""

    prefill: Callable[[int], int]
    step: Callable[[str, int], float]
    clock: Callable[[], float] = time.perf_counter
    check_stop: Callable[[], None] = lambda: None
    decide: Callable[[list[bool]], list[bool]] = list
    log: Callable[[str], None] = lambda message: None
    warm_decode: Callable[[], float] | None = None

    def timed(self, call: Callable[[], object]) -> float:
        start = self.clock()
        call()
        return self.clock() - start


@dataclass
class ProbeResult:
    costs: RunProgress = field(default_factory=RunProgress)
    lengths: tuple[int, ...] = ()
    first_use_s: float = 0.0  # the untimed first use of every shape, beyond its warm cost
    compiles: bool = False  # the first prefill took over twice the second: shapes compile


def run_probe(
    device: ProbeDevice,
    lengths: Sequence[int],
    widths: Sequence[int],
    kinds: tuple[str, ...] = (),
    budget_s: float = 0.0,
) -> ProbeResult:
    """At each length: a prefill (twice on the first length, and on every length once the first
    showed a compile), every width's step on both arms once untimed, then PROBE_REPS times in
    mirrored rounds. With a budget, a length whose warm probe would take the probe past
    PROBE_BUDGET_SHARE of it is left out, and every longer one. On a device that compiles, a
    later length's first use is expected again at every new context of the run (in its prefill)."""
    out, start, again = ProbeResult(), device.clock(), []  # again: later lengths' first use
    out.costs.draft_kinds, table = kinds, out.costs.costs
    done: list[tuple[int, float, float]] = []  # (length, warm s, first use s beyond)
    for context in lengths:
        device.check_stop()
        if done and budget_s > 0 and _leaves_out(device, context, budget_s, start, out, done):
            break
        once_s = setup_s = device.timed(partial(device.prefill, context))
        first_s = 0.0
        if not done or out.compiles:
            setup_s = device.timed(partial(device.prefill, context))
            first_s = max(0.0, once_s - setup_s)
            if not done:
                (out.compiles,) = device.decide([once_s > 2 * setup_s + COMPILE_FLOOR_S])
        first_ms = {(a, w): device.step(a, w) for w in widths for a in ARMS}
        warm_s = setup_s
        for rep in range(PROBE_REPS):
            for w in reversed(widths) if rep % 2 else widths:
                for arm in reversed(ARMS) if rep % 2 else ARMS:
                    table.add_step(arm, context, w, ms := device.step(arm, w))
                    warm_s += (1 + 1 / PROBE_REPS) * ms / 1e3
                    first_s += max(0.0, first_ms[(arm, w)] - ms) / 1e3 / PROBE_REPS
        table.prefill.append((context, setup_s))
        if not done and out.compiles and device.warm_decode is not None:
            out.first_use_s += device.warm_decode()
        again += [first_s] if done else []
        out.first_use_s += first_s
        done.append((context, warm_s, first_s))
    out.lengths = tuple(c for c, _, _ in done)
    if out.compiles and again:  # each new shape of the run compiles again, as these did
        table.prefill = [(c, s + sum(again) / len(again)) for c, s in table.prefill]
    return out


def _leaves_out(
    device: ProbeDevice,
    context: int,
    budget_s: float,
    start: float,
    out: ProbeResult,
    done: list[tuple[int, float, float]],
) -> bool:
    """Whether `context`'s warm probe (the last length's in proportion, plus what a new shape
    costs again) would take the probe past its share of the budget (rank 0's answer; said)."""
    last, warm_s, first_s = done[-1]
    again_s = first_s if len(done) > 1 else 0.0  # the first length's is every kernel's compile
    guess_s = warm_s * context / last + again_s
    spent_s = device.clock() - start - out.first_use_s + again_s * (len(done) - 1)
    (too_long,) = device.decide([spent_s + guess_s > PROBE_BUDGET_SHARE * budget_s])
    if too_long:
        device.log(
            f"budget probe: {context} tokens left out (the {last}-token probe took {warm_s:.1f} s "
            f"warm, {first_s:.1f} s more on first use; {context} would take ~{guess_s:.0f} s more);"
            " longer contexts are extrapolated from the lengths probed"
        )
    return bool(too_long)


def warm_decode_blocks(ctx: RunContext, phase: Phase, length: int, text: list[int]) -> float:
    """Each of `phase`'s decode settings on the patched arm at the prefilled `length`: a block,
    rewound, then the same block again; the seconds the first blocks took beyond the second ones
    (a cold H200 compiled ~20 s of sampler, MTP head and draft kernels inside the tune)."""
    worker = ctx.workers["patched"]
    stream = worker.call(lambda a: open_stream(a, length, text[length], text[:length]))
    sampling, n = sampling_of(phase), min(phase.tokens, WARM_BLOCK_TOKENS)
    first_s = 0.0
    for st in decode_settings(phase, ctx.draft_kinds):

        def block(a: Arm, st: Setting = st) -> float:  # timed on the arm's thread: no wait
            start = time.perf_counter()  # for the baton or a dashboard's drawing turn
            rewind(a, stream)
            run_block(a, stream, st, n, sampling, ctx.seed)
            return time.perf_counter() - start

        took = []
        for _ in range(2):
            ctx.check_stop()
            took.append(worker.call(block))
        first_s += max(0.0, took[0] - took[1])
    worker.call(partial(rewind, s=stream))
    return first_s


def probe(ctx: RunContext, scenario: Scenario, budget_s: float, longest: int | None) -> ProbeResult:
    """`run_probe` on the run's own arms at `probe_contexts`: only log lines go out (these
    samples enter no estimate)."""
    widest = 1
    for p in scenario.phases:
        if p.kind.rules.model_widths:
            widest = max(widest, *p.widths)
        elif p.kind.rules.decodes:
            widest = max(widest, *(d + 1 for k in ctx.draft_kinds for d in p.depths_for(k)), 1)
    widths = tuple(range(1, widest + 1))
    steps: dict[int, Callable] = {}
    here: list[tuple[int, list[int]]] = []  # the length prefilled last, and its text

    def prefill(context: int) -> int:
        text = ctx.tokens_for(context + widest)
        length = share_context(ctx, text[:context])
        steps.update({w: forward_and_trim(text[length : length + w]) for w in widths})
        here[:] = [(length, text)]
        return length

    tune = next((p for p in scenario.phases if p.kind.rules.decodes), None)
    device = ProbeDevice(
        prefill,
        lambda arm, width: float(ctx.workers[arm].call(steps[width])[0]),
        check_stop=ctx.check_stop,
        decide=ctx.leader_decides_each,
        log=lambda message: ctx.emit(LogMessage(ctx.now(), "info", message)),
        warm_decode=(lambda: warm_decode_blocks(ctx, tune, *here[0])) if tune else None,
    )
    return run_probe(device, probe_contexts(scenario, longest), widths, ctx.draft_kinds, budget_s)


def _positions(model: object) -> int | None:
    limit = getattr(getattr(model, "args", None), "max_position_embeddings", None)
    return limit if isinstance(limit, int) and not isinstance(limit, bool) else None


def model_limits(ctx: RunContext) -> Limits:
    """The positions the run's model was built for, and the windows the embedded model was
    trained on (its MANIFEST says); a draft model built for fewer positions bounds the tune."""
    arm = ctx.workers["stock"].arm
    drafts = [p for d in arm.drafts.values() if (p := _positions(getattr(d, "model", None)))]
    window = None
    if arm.model_name == "embedded":
        from mlatui.models.embedded import trained_window

        window = trained_window()
    bounds = [b for b in (window, *drafts) if b]
    return Limits(_positions(arm.model), min(bounds) if bounds else None)


@dataclass(frozen=True)
class Budget:
    """A budget: its first BudgetPlanned, the slices its phases run in, and what a plan reads (the
    probe's costs, the phases as chosen before their rounds were left to the slices)."""

    planned: BudgetPlanned
    slices: Slices
    costs: RunProgress = field(default_factory=RunProgress)
    chosen: Plan = ()
    settle: bool = True
    forecast_s: float | None = None  # the probe's of the run as planned, after a re-plan

    def plan(self, ctx: RunContext, i: int, pace: float, left_s: float) -> tuple[Plan, Budget]:
        """The chosen phases from `i` on, fitted to `left_s` at `pace` times the probe's forecast
        (rank 0's plan on every rank) and sliced from now, said in a BudgetPlanned and the log:
        those phases as they run, and the budget with their slices."""
        now, kinds, settle = ctx.now(), ctx.draft_kinds, self.settle

        def forecast_s(ps: Plan) -> float:
            return pace * self.costs.forecast_s(ps, settle)

        fit = fit_to_budget(self.chosen[i:], left_s, forecast_s, kinds, ctx.leader_decides_each)
        segments = [s for p in fit.phases for s in phase_segments(p, kinds, settle)]
        costed = [(s, self.costs.segment_s(s, settle)) for s in segments]
        cut = slices(costed, now, self.planned.budget_s)
        ran = tuple(  # with slices an undecided check's rounds end with its slice, not a count
            structs.replace(p, max_rounds=cut.grow_to) if cut.ends and p.kind.rules.run_check else p
            for p in fit.phases
        )
        planned = structs.replace(
            self.planned,
            t=now,
            full_s=fit.full_s + now,
            predicted_s=fit.predicted_s + now,
            changes=fit.changes,
            phases=ran,
            contexts_note=self.planned.contexts_note if i == 0 else "",
            phase_plans=phase_plans(ran, kinds, settle),
        )
        ctx.emit(planned)
        # the pace itself is one median with no CI: said through the seconds it forecasts
        ahead = "at this device's pace so far, the phases left" if i else ""
        said = replace(fit, budget_s=planned.budget_s, full_s=planned.full_s)
        said = replace(said, predicted_s=planned.predicted_s)
        ctx.emit(LogMessage(now, "warning" if fit.changes else "info", said.describe(ahead)))
        chosen = (*self.chosen[:i], *fit.phases)
        forecast = None if i == 0 else self.planned.t + self.costs.forecast_s(chosen, settle)
        first = planned if i == 0 else self.planned
        return ran, replace(self, planned=first, slices=cut, chosen=chosen, forecast_s=forecast)

    def pace(self, ctx: RunContext, i: int, done: PassResults) -> float:
        """How much slower than forecast the device ran phases 0..i-1 (the median of their synced
        steps' measured over forecast ms, or their time over their forecast, the larger): a
        loaded host ran 20-25% over."""
        took_s = ctx.now() - self.planned.t - done.added_s
        forecast_s = self.costs.forecast_s(self.chosen[:i], self.settle)
        ratios = sorted(
            interval.median / ms
            for _, length, estimates in done.finals
            for (arm, width), interval in estimates.step_ms.items()
            if (ms := self.costs.costs.step(arm, length, width))
        )
        steps_pace = ratios[len(ratios) // 2] if ratios else 1.0
        return max(1.0, steps_pace, took_s / forecast_s if forecast_s > 0 else 1.0)

    def replan(
        self, ctx: RunContext, phases: Plan, i: int, done: PassResults
    ) -> tuple[Plan, Budget]:
        """Before phase `i`: where the phases left, forecast at this device's pace so far, are
        over the time left (a slice's sampler runs at least a pair of rounds, and a planned pair
        when half of it fits), they are planned again."""
        pace = self.pace(ctx, i, done)
        left_s = max(1.0, (self.planned.budget_s - ctx.now()) / FORECAST_MARGIN)
        rest_s = pace * self.costs.forecast_s(self.chosen[i:], self.settle)  # inf: no cost model
        (over,) = ctx.leader_decides_each([left_s < rest_s < float("inf")])
        if not over:
            return phases, self
        ran, budget = self.plan(ctx, i, pace, left_s)
        return (*phases[:i], *ran), budget

    def finish(self, ctx: RunContext, done: PassResults, more: MoreRounds) -> PassResults:
        """The time left to more L = 1 rounds where a check is still undecided (`more`, a phase
        of its own as `+`), to the budget's end, at the contexts whose prefill and pair of rounds
        fit it at this device's pace (smallest first: on a loaded host one long prefill and pair
        can take many times the seconds left); then the plan's forecast against what its planned rounds took
        (the run less the rounds past them, and less the time before the plan: load, probe and
        its compilation), in the log and a BudgetOutcome. Returns the pass
        with those checks."""
        end_s, spent_s = self.planned.budget_s * (1 - END_SHARE), 0.0
        pace, undecided = self.pace(ctx, len(self.chosen), done), done.checks.undecided()
        affordable = set()
        for c in sorted({v.context for v in undecided} if self.slices.ends else ()):
            spent_s += pace * self.costs.forecast_s([more_phase("more", c, PAIR)], self.settle)
            if ctx.now() + spent_s > end_s:
                break
            affordable.add(c)
        # asked over every check, not this rank's undecided ones: each rank decides its checks
        # on its own timings, and the collective needs the same list on every rank
        every = done.checks.of_run()
        flags = ctx.leader_decides_each([v in undecided and v.context in affordable for v in every])
        if checks := [v for v, yes in zip(every, flags, strict=True) if yes]:
            start_s = ctx.now()
            decided = more.measure(checks, PAIR, until_s=end_s)
            added_s = done.added_s + ctx.now() - start_s
            done = replace(done, checks=done.checks.plus(decided), added_s=added_s)
        took_s, p = ctx.now(), self.planned
        forecast_s = p.predicted_s if self.forecast_s is None else self.forecast_s
        planned_s = took_s - done.added_s
        outcome = BudgetOutcome(
            took_s,
            p.budget_s,
            forecast_s,
            planned_s,
            done.added_s,
            took_s,
            (forecast_s - planned_s) / max(1e-9, planned_s - p.t) * 100,
            p.first_use_s,
            tuple(f"{v.phase} @ {v.context}" for v in done.checks.undecided()),
            p.t,
        )
        ctx.emit(LogMessage(took_s, "info", outcome_text(outcome)))
        ctx.emit(outcome)
        return done


def _sweeps(phases: Plan) -> list[tuple[int, ...]]:
    return [p.contexts for p in phases if p.kind.rules.model_widths]


def apply_budget(ctx: RunContext, run_plan: RunPlan) -> tuple[RunPlan, Budget]:
    """Probe, pick the contexts, plan, slice; say what was scaled down; return the plan with the
    phases to run, and the budget their slices and its end come from."""
    scenario, budget_s, kinds = run_plan.scenario, run_plan.budget_s, ctx.draft_kinds
    limits, start = model_limits(ctx), time.perf_counter()
    longest = longest_context(scenario.story, scenario.phases, limits)
    probed = probe(ctx, scenario, budget_s, longest)
    probe_s, costs = time.perf_counter() - start, probed.costs
    left_s = max(1.0, (budget_s - ctx.now()) / FORECAST_MARGIN)
    phases, note = run_plan.phases, ""

    def fits(ps: Plan) -> bool:  # with the sweep's contexts kept
        fit = fit_to_budget(ps, left_s, partial(costs.forecast_s, settle=ctx.settle), kinds)
        return fit.fits and _sweeps(fit.phases) == _sweeps(ps)

    if scenario.story is not None:
        story, decide = scenario.story, ctx.leader_decides_each
        phases, note = choose_contexts(phases, story, costs.costs.step, fits, limits, decide)
    if note:
        ctx.emit(LogMessage(ctx.now(), "info", note))
    planned = BudgetPlanned(0.0, budget_s, 0.0, 0.0, (), (), probed.lengths, probe_s, 0.0, note)
    planned = structs.replace(planned, first_use_s=probed.first_use_s)
    ran, budget = Budget(planned, Slices(), costs, phases, ctx.settle).plan(ctx, 0, 1.0, left_s)
    return run_plan.with_phases(ran), budget
