"""The budget's device side: a short probe of this device's step costs on the run's own arms,
then `mlatui.run.budget` picks the plan; the choice is logged and recorded before the first phase."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import partial

from mlatui.config.run_plan import RunPlan
from mlatui.config.scenario import Phase, Scenario
from mlatui.measure.progress import RunProgress
from mlatui.run.budget import (
    BudgetPlan,
    fit_to_budget,
)
from mlatui.run.budget_story import (
    Limits,
    choice_index,
    choose_contexts,
    from_index,
    longest_context,
    with_contexts,
)
from mlatui.run.budget_warm import decode_warmer
from mlatui.run.budget_watch import FORECAST_MARGIN, BudgetWatch, agreed
from mlatui.run.phases.base import RunContext, forward_and_trim, share_context
from mlatui.stream.events import ARMS, BudgetPlanned, LogMessage

PROBE_REPS = 2
# The probe may take this share of the budget: on a slow device (the reference BLAS: 45 s for the
# two lengths of the default scenario) the longer length is skipped, and the forecast extrapolates
# from the one length it has (between "does not grow" and "grows in proportion to T").
PROBE_BUDGET_SHARE = 0.12
# a first prefill this much (plus twice the second's time) slower than the second is a compile
COMPILE_FLOOR_S = 0.05
FIRST_USE_SAID_S = 0.5  # a first use this much slower than the warm runs is said in the log


def probe_contexts(scenario: Scenario, longest: int | None = None) -> tuple[int, ...]:
    """The lengths to fit the growth with context: the scenario's smallest context (at most 256)
    and four times that, capped at the scenario's largest; with `longest` (the largest context
    the plan may pick for this device, mlatui.run.budget_story), a ladder of fourfold lengths up
    to it; then each tune and decode phase's smallest context beyond those. A step's cost grows
    faster than in proportion once the cache outgrows the CPU's caches (the embedded model's
    L = 1 step: 14 ms at 1K, 40 ms at 4K, where a line through 256 and 1K said 23), and the
    decode blocks, most of a run, run at those lengths."""
    contexts = sorted({c for p in scenario.phases for c in p.contexts})
    if not contexts:
        return ()
    small = min(contexts[0], 256)
    lengths = {small, min(4 * small, contexts[-1])}
    top = small
    while longest is not None and top < longest:
        top = min(4 * top, longest)
        lengths.add(top)
    for p in scenario.phases:
        if p.kind.rules.decodes and p.contexts and min(p.contexts) > max(lengths):
            lengths.add(min(p.contexts))
    return tuple(sorted(lengths))


def _widths(scenario: Scenario, kinds: tuple[str, ...]) -> tuple[int, ...]:
    widest = 1
    for p in scenario.phases:
        if p.kind.rules.model_widths:
            widest = max(widest, *p.widths)
        elif p.kind.rules.decodes:
            widest = max(widest, *(d + 1 for k in kinds for d in p.depths_for(k)), 1)
    return tuple(range(1, widest + 1))


@dataclass(frozen=True)
class ProbeDevice:
    """What the probe does on the device, as plain callables (the engine's arms, or a test's):
    `prefill(context)` shares a prefilled context with both arms and returns its length;
    `step(arm, width)` runs one synced step there and returns its ms; `clock` reads seconds."""

    prefill: Callable[[int], int]
    step: Callable[[str, int], float]
    clock: Callable[[], float] = time.perf_counter
    check_stop: Callable[[], None] = lambda: None
    # rank 0's yes/no for each item (every rank probes the same lengths)
    decide: Callable[[list[bool]], list[bool]] = list
    log: Callable[[str], None] = lambda message: None
    # the decode settings' blocks run twice at the first length, on a device that compiles
    # (mlatui.run.budget_warm); the seconds of their first use beyond their second
    warm_decode: Callable[[], float] | None = None


@dataclass
class ProbeResult:
    costs: RunProgress
    lengths: tuple[int, ...]
    first_use_s: float = 0.0  # the untimed first use of every shape, beyond its warm cost
    compiles: bool = False  # the first prefill took over twice the second: shapes compile


def _compiles(first_s: float, warm_s: float) -> bool:
    return first_s > 2 * warm_s + COMPILE_FLOOR_S


def run_probe(
    device: ProbeDevice,
    lengths: Sequence[int],
    widths: Sequence[int],
    kinds: tuple[str, ...] = (),
    budget_s: float = 0.0,
) -> ProbeResult:
    """Each shape is run once untimed, then timed: MLX compiles a kernel on its first use (on
    CUDA and on Metal; the H200's first 256-token probe took 28 s, the whole scenario then ran
    in 26 s), and a forecast from first uses plans for the compiler, not the device. The first
    length is prefilled twice, the first untimed; when that first prefill took over twice the
    second, the device compiles per shape and every later length is prefilled twice too. The
    first uses' cost beyond their warm cost is `first_use_s`, a one-off said apart. With a
    budget, a longer length whose warm probe would take the probe's warm time past
    PROBE_BUDGET_SHARE of it (the last length's warm cost in proportion to the length, plus a
    later length's first use again) is left out, and every length after it. On a device that
    compiles per shape, each later length's first use is expected again at every new context of
    the run (added to the prefill the forecast extrapolates). Rank 0 decides for every rank
    (`decide`): ranks must prefill alike, as a sharded prefill is collective."""
    probe = _Probe(device, kinds)
    for context in lengths:
        device.check_stop()
        if budget_s > 0 and probe.leaves_out(context, budget_s):
            break
        length, setup_s, first_s = probe.prefill(context)
        warm_s, first_s = probe.steps(length, widths, setup_s, first_s)
        probe.add(length, setup_s, warm_s, first_s)
    return probe.finish()


class _Probe:
    """A probe's way through its lengths: the costs it measured, and each length's warm time
    and first-use time beyond it (what the budget's share and the one-offs are judged on)."""

    def __init__(self, device: ProbeDevice, kinds: tuple[str, ...]) -> None:
        self.device = device
        self.result = ProbeResult(RunProgress(), ())
        self.result.costs.draft_kinds = kinds
        self.done: list[int] = []
        self.first_by_length: list[float] = []
        self.last_warm_s = self.last_first_s = 0.0
        self.start = device.clock()

    def leaves_out(self, context: int, budget_s: float) -> bool:
        """Whether `context`'s warm probe would take the probe past its share of the budget
        (rank 0's answer); said in the log when it does. The first length always runs."""
        if not self.done:
            return False
        done, device, result = self.done, self.device, self.result
        # the first length's first use is mostly every kernel's one-off compile, a later
        # length's what a new shape costs again; the run pays the one-offs anyway
        again_s = self.last_first_s if len(done) > 1 else 0.0
        guess_s = self.last_warm_s * context / done[-1] + again_s
        spent_s = device.clock() - self.start - result.first_use_s + again_s * (len(done) - 1)
        (too_long,) = device.decide([spent_s + guess_s > PROBE_BUDGET_SHARE * budget_s])
        if too_long:
            device.log(
                f"budget probe: {context} tokens left out (the {done[-1]}-token probe took "
                f"{self.last_warm_s:.1f} s warm, {self.last_first_s:.1f} s more on first use; "
                f"{context} would take ~{guess_s:.0f} s more); longer contexts are "
                "extrapolated from the lengths probed"
            )
        return bool(too_long)

    def prefill(self, context: int) -> tuple[int, float, float]:
        """The prefilled length, its set-up seconds and its first use's seconds beyond them: the
        first length (and every length on a device that compiles) is prefilled twice."""
        device, result = self.device, self.result
        t = device.clock()
        length = device.prefill(context)
        once_s = device.clock() - t
        if self.done and not result.compiles:
            return length, once_s, 0.0
        t = device.clock()
        length = device.prefill(context)
        setup_s = device.clock() - t
        if not self.done:
            (result.compiles,) = device.decide([_compiles(once_s, setup_s)])
        return length, setup_s, max(0.0, once_s - setup_s)

    def steps(
        self, length: int, widths: Sequence[int], warm_s: float, first_s: float
    ) -> tuple[float, float]:
        """Every width's step on both arms once untimed, then PROBE_REPS times timed in mirrored
        rounds (a drift reaches every width alike); `warm_s` and `first_s` (the prefill's) with
        the steps' warm seconds and their first uses' seconds beyond them added."""
        device, costs = self.device, self.result.costs
        first_ms = {(arm, w): device.step(arm, w) for w in widths for arm in ARMS}
        timed: dict[tuple[str, int], list[float]] = {key: [] for key in first_ms}
        for rep in range(PROBE_REPS):
            mirror = rep % 2 == 1
            for w in reversed(widths) if mirror else widths:
                for arm in reversed(ARMS) if mirror else ARMS:
                    timed[(arm, w)].append(device.step(arm, w))
        for (arm, w), samples in timed.items():
            for ms in samples:
                costs.costs.add_step(arm, length, w, ms)
            mean_ms = sum(samples) / len(samples)
            first_s += max(0.0, first_ms[(arm, w)] - mean_ms) / 1e3
            warm_s += (1 + PROBE_REPS) * mean_ms / 1e3
        return warm_s, first_s

    def add(self, length: int, setup_s: float, warm_s: float, first_s: float) -> None:
        result, device = self.result, self.device
        result.costs.prefill.append((length, setup_s))
        if not self.done and result.compiles and device.warm_decode is not None:
            result.first_use_s += device.warm_decode()
        result.first_use_s += first_s
        self.first_by_length.append(first_s)
        self.done.append(length)
        self.last_warm_s, self.last_first_s = warm_s, first_s

    def finish(self) -> ProbeResult:
        result = self.result
        result.lengths = tuple(self.done)
        later = self.first_by_length[1:]
        if result.compiles and later:  # each new shape of the run compiles again, as these did
            again_s = sum(later) / len(later)
            result.costs.prefill = [(c, s + again_s) for c, s in result.costs.prefill]
        return result


def probe(
    ctx: RunContext, scenario: Scenario, budget_s: float = 0.0, longest: int | None = None
) -> ProbeResult:
    """Synced steps at every width the scenario needs, both arms, at `probe_contexts`
    (`run_probe` on the run's own arms); each prefill is timed as set-up. Nothing is emitted but
    log lines: these samples enter no estimate."""
    widths = _widths(scenario, ctx.draft_kinds)
    steps: dict[int, Callable] = {}
    here: list[tuple[int, list[int]]] = []  # the length prefilled last, and its text

    def prefill(context: int) -> int:
        text = ctx.tokens_for(context + max(widths))
        length = share_context(ctx, text[:context])
        steps.clear()
        steps.update({w: forward_and_trim(text[length : length + w]) for w in widths})
        here[:] = [(length, text)]
        return length

    def step(arm: str, width: int) -> float:
        ms, _, _ = ctx.workers[arm].call(steps[width])
        return float(ms)

    warmer = decode_warmer(ctx, scenario.phases)
    device = ProbeDevice(
        prefill,
        step,
        check_stop=ctx.check_stop,
        decide=ctx.leader_decides_each,
        log=lambda message: ctx.emit(LogMessage(ctx.now(), "info", message)),
        warm_decode=(lambda: warmer(*here[0])) if warmer is not None else None,
    )
    return run_probe(device, probe_contexts(scenario, longest), widths, ctx.draft_kinds, budget_s)


def _positions(model: object) -> int | None:
    limit = getattr(getattr(model, "args", None), "max_position_embeddings", None)
    return limit if isinstance(limit, int) and not isinstance(limit, bool) else None


def model_limits(ctx: RunContext) -> Limits:
    """The positions the run's model was built for, and the windows the embedded model was
    trained on (its MANIFEST says); a draft model built for fewer positions bounds the tune's
    windows too (its drafts are past them beyond)."""
    arm = ctx.workers["stock"].arm
    limit = _positions(arm.model)
    drafts = [p for d in arm.drafts.values() if (p := _positions(getattr(d, "model", None)))]
    window = None
    if arm.model_name == "embedded":
        from mlatui.models.embedded import trained_window

        window = trained_window()
    bounds = [b for b in (window, *drafts) if b]
    return Limits(limit, min(bounds) if bounds else None)


def _choose(
    ctx: RunContext,
    scenario: Scenario,
    costs: RunProgress,
    fit: Callable[[tuple[Phase, ...]], BudgetPlan],
    limits: Limits,
) -> tuple[tuple[Phase, ...], str]:
    """The phases at the contexts that show the scenario's story on this device (rank 0's
    choice on every rank), and the note that says why; as written without a story."""
    story = scenario.story
    if story is None:
        return scenario.phases, ""

    def step_ms(arm: str, context: int, width: int) -> float | None:
        got = costs.costs.step(arm, context, width)
        return got[1] if got else None

    def fits(phases: tuple[Phase, ...]) -> bool:
        plan = fit(phases)
        kept = [p.contexts for p in plan.phases if p.kind.rules.model_widths]
        return plan.fits and kept == [p.contexts for p in phases if p.kind.rules.model_widths]

    choice = choose_contexts(scenario.phases, story, step_ms, fits, limits)
    choice = from_index(story, ctx.leader_decides_each(choice_index(story, choice)), choice.note)
    phases = with_contexts(scenario.phases, choice.tune_context, choice.sweep_contexts)
    return phases, choice.note


def apply_budget(ctx: RunContext, run_plan: RunPlan) -> tuple[RunPlan, BudgetWatch]:
    """Probe, pick the contexts, plan, say what was scaled down; return a new plan with the
    phases to run, and the watch that re-plans the phases not yet run at each phase boundary."""
    scenario, budget_s = run_plan.scenario, run_plan.budget_s
    limits = model_limits(ctx)
    start = time.perf_counter()
    probed = probe(
        ctx, scenario, budget_s, longest_context(scenario.story, scenario.phases, limits)
    )
    probe_s = time.perf_counter() - start
    costs, lengths = probed.costs, probed.lengths
    if probed.first_use_s >= FIRST_USE_SAID_S:
        ctx.emit(
            LogMessage(
                ctx.now(),
                "info",
                f"budget probe: the first use of each shape took {probed.first_use_s:.1f} s more "
                "than its warm runs (kernel compilation: a one-off, left out of the forecast)",
            )
        )
    left_s = max(1.0, (budget_s - ctx.now()) / FORECAST_MARGIN)
    high = partial(costs.forecast_s, high=True)
    fit = partial(
        fit_to_budget,
        budget_s=left_s,
        forecast_s=costs.forecast_s,
        kinds=ctx.draft_kinds,
        high_s=high,
    )
    phases, note = _choose(ctx, scenario, costs, fit, limits)
    if note:
        ctx.emit(LogMessage(ctx.now(), "info", note))
    plan = fit(phases)
    plan = agreed(ctx.leader_decides_each, phases, plan, ctx.draft_kinds, costs.forecast_s)
    plan = replace(plan, budget_s=budget_s)  # said against the whole budget, not what is left
    spent = ctx.now()
    plan = replace(plan, full_s=plan.full_s + spent, predicted_s=plan.predicted_s + spent)
    first = BudgetPlanned(
        ctx.now(),
        budget_s,
        plan.full_s,
        plan.predicted_s,
        plan.changes,
        tuple(p.to_dict() for p in plan.phases),
        lengths,
        probe_s,
        probed.first_use_s,
        note,
    )
    ctx.emit(first)
    level = "warning" if plan.scaled else "info"
    ctx.emit(LogMessage(ctx.now(), level, plan.describe()))
    watch = BudgetWatch(first, costs, ctx.draft_kinds, ctx.settle)
    return run_plan.with_phases(plan.phases), watch
