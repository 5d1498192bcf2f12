"""The budget's device side: a short probe of this device's step costs on the run's own arms,
then `mlatui.run.budget` picks the plan; the choice is logged and recorded before the first phase."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import partial

from mlatui.config.scenario import Phase, Scenario
from mlatui.run.budget import (
    BudgetPlan,
    fit_to_budget,
    merge_changes,
    plan_after,
    reduction_count,
)
from mlatui.run.phases.base import RunContext, forward_and_trim, share_context
from mlatui.stream.events import ARMS, BudgetPlanned, Event, LogMessage
from mlatui.views.progress import RunProgress

PROBE_REPS = 2
# The forecast ran 13-17% short of the runs it planned on the 2-core CPU (80 s forecast, 94 s run;
# 87 vs 100 s); since session 5 (settle steps counted, wide steps grown with T) 2-7% short with
# OpenBLAS and -7..+18% with the reference BLAS: plan against the budget less 15%, so the run
# ends inside it.
FORECAST_MARGIN = 1.15
# The probe may take this share of the budget: on a slow device (the reference BLAS: 45 s for the
# two lengths of the default scenario) the longer length is skipped, and the forecast extrapolates
# from the one length it has (between "does not grow" and "grows in proportion to T").
PROBE_BUDGET_SHARE = 0.12


def probe_contexts(scenario: Scenario) -> tuple[int, ...]:
    """The lengths to fit the growth with context: the scenario's smallest context (at most 256)
    and four times that, capped at the scenario's largest; then each tune and decode phase's
    smallest context beyond those. A step's cost grows faster than in proportion once the cache
    outgrows the CPU's caches (the embedded model's L = 1 step: 14 ms at 1K, 40 ms at 4K, where a
    line through 256 and 1K said 23), and the decode blocks, most of a run, run at those lengths."""
    contexts = sorted({c for p in scenario.phases for c in p.contexts})
    if not contexts:
        return ()
    small = min(contexts[0], 256)
    lengths = {small, min(4 * small, contexts[-1])}
    for p in scenario.phases:
        if p.kind in ("tune", "decode") and p.contexts and min(p.contexts) > max(lengths):
            lengths.add(min(p.contexts))
    return tuple(sorted(lengths))


def _widths(scenario: Scenario, kinds: tuple[str, ...]) -> tuple[int, ...]:
    widest = 1
    for p in scenario.phases:
        if p.kind == "sweep":
            widest = max(widest, *p.widths)
        elif p.kind in ("tune", "decode"):
            widest = max(widest, *(d + 1 for k in kinds for d in p.depths_for(k)), 1)
    return tuple(range(1, widest + 1))


def probe(
    ctx: RunContext, scenario: Scenario, budget_s: float = 0.0
) -> tuple[RunProgress, tuple[int, ...]]:
    """Synced steps at every width the scenario needs, both arms, at `probe_contexts`; each
    prefill is timed as set-up. Nothing is emitted: these samples enter no estimate. With a
    budget, a longer length whose probe would take the probe past PROBE_BUDGET_SHARE of it (its
    cost guessed as the last length's, in proportion to the length) is left out, and every
    length after it."""
    costs = RunProgress()
    costs.draft_kinds = ctx.draft_kinds
    widths = _widths(scenario, costs.draft_kinds)
    lengths: list[int] = []
    last_s = 0.0  # the last length's probe, prefill included
    spent_s = 0.0  # every length's so far
    for context in probe_contexts(scenario):
        ctx.check_stop()
        if lengths and budget_s > 0:
            guess_s = last_s * context / lengths[-1]
            # rank 0's timing decides for every rank: ranks must probe the same lengths
            (too_long,) = ctx.leader_decides_each(
                [spent_s + guess_s > PROBE_BUDGET_SHARE * budget_s]
            )
            if too_long:
                ctx.emit(
                    LogMessage(
                        ctx.now(),
                        "info",
                        f"budget probe: {context} tokens left out (the {lengths[-1]}-token probe "
                        f"took {last_s:.1f} s; {context} would take ~{guess_s:.0f} s more); "
                        "longer contexts are extrapolated from one length",
                    )
                )
                break
        text = ctx.tokens_for(context + max(widths))
        start = time.perf_counter()
        length = share_context(ctx, text[:context])
        setup_s = time.perf_counter() - start
        steps = {w: forward_and_trim(text[length : length + w]) for w in widths}
        for w in widths:  # the first call at a width compiles
            for arm in ARMS:
                ctx.workers[arm].call(steps[w])
        for _ in range(PROBE_REPS):
            for w in widths:
                for arm in ARMS:
                    ms, _, _ = ctx.workers[arm].call(steps[w])
                    costs.costs.add_step(arm, length, w, ms)
        costs.prefill.append((length, setup_s))
        lengths.append(length)
        last_s = time.perf_counter() - start
        spent_s += last_s
    return costs, tuple(lengths)


def agreed(
    decide: Callable[[list[bool]], list[bool]],
    phases: tuple[Phase, ...],
    plan: BudgetPlan,
    kinds: Sequence[str],
    forecast_s: Callable[[tuple[Phase, ...]], float],
) -> BudgetPlan:
    """Rank 0's plan on every rank: each rank forecast on its own timings, so near a threshold
    two ranks could choose different plans and issue different collectives. Rank 0's count of
    reductions is shared (`decide`: rank 0's yes/no per item) and replayed (`plan_after`)."""
    n = reduction_count(phases, kinds)
    steps = sum(decide([i < plan.steps for i in range(n)]))
    if steps == plan.steps:
        return plan
    chosen, changes = plan_after(phases, kinds, steps)
    return replace(
        plan, phases=chosen, changes=changes, steps=steps, predicted_s=forecast_s(chosen)
    )


def apply_budget(
    ctx: RunContext, scenario: Scenario, budget_s: float
) -> tuple[Scenario, BudgetWatch]:
    """Probe, plan, say what was scaled down; return the scenario with the phases to run, and
    the watch that re-plans the phases not yet run at each phase boundary."""
    start = time.perf_counter()
    costs, lengths = probe(ctx, scenario, budget_s)
    probe_s = time.perf_counter() - start
    left_s = max(1.0, (budget_s - ctx.now()) / FORECAST_MARGIN)
    high = partial(costs.forecast_s, high=True)
    plan = fit_to_budget(scenario.phases, left_s, costs.forecast_s, ctx.draft_kinds, high)
    plan = agreed(ctx.leader_decides_each, scenario.phases, plan, ctx.draft_kinds, costs.forecast_s)
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
    )
    ctx.emit(first)
    level = "warning" if plan.scaled else "info"
    ctx.emit(LogMessage(ctx.now(), level, plan.describe()))
    watch = BudgetWatch(first, costs, ctx.draft_kinds, ctx.settle)
    return replace(scenario, phases=plan.phases), watch


@dataclass
class BudgetWatch:
    """The budget after its first plan. The probe runs for seconds; the host may slow down
    minutes later (session 12: the L = 1 step at 2K went from 31 to 51 ms, and a setting the
    plan expected to be rejected by bound ran its blocks: 178 s on a 100 s budget). So every
    timed event of the run is folded into the probe's cost table, and before each later phase
    the phases still to run are forecast again on what this device did, and scaled down by the
    same reductions if they no longer fit in what is left (phases that ran are not touched)."""

    planned: BudgetPlanned  # the latest plan: the first, or a re-plan's
    costs: RunProgress
    kinds: tuple[str, ...]
    settle: bool = True
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def budget_s(self) -> float:
        return self.planned.budget_s

    def tee(self, emit: Callable[[Event], None]) -> Callable[[Event], None]:
        def both(e: Event) -> None:
            with self._lock:  # the arms' threads emit too
                try:
                    self.costs.apply(e)
                except Exception:  # noqa: BLE001 - a forecast's fold must never cost an event
                    pass
            emit(e)

        return both

    def forecast_s(self, phases: tuple[Phase, ...]) -> float:
        with self._lock:
            return self.costs.forecast_s(phases, settle=self.settle)

    def refit(
        self,
        rest: tuple[Phase, ...],
        now_s: float,
        decide: Callable[[list[bool]], list[bool]] = list,
    ) -> BudgetPlan | None:
        """The phases still to run scaled down, when their forecast no longer fits what is left
        of the budget; None when they fit as planned (or nothing is left to cut)."""
        left_s = max(1.0, (self.budget_s - now_s) / FORECAST_MARGIN)
        plan = fit_to_budget(rest, left_s, self.forecast_s, self.kinds)
        plan = agreed(decide, rest, plan, self.kinds, self.forecast_s)
        return plan if plan.changes else None

    def replan(self, ctx: RunContext, phases: tuple[Phase, ...], i: int) -> tuple[Phase, ...]:
        """Before phase `i`: the phases with those from `i` on re-planned, said in the log and
        in a new `BudgetPlanned` (the whole run's phases, the changes of both plans)."""
        now_s = ctx.now()
        plan = self.refit(phases[i:], now_s, ctx.leader_decides_each)
        if plan is None:
            return phases
        out = (*phases[:i], *plan.phases)
        verdict = (
            "fits" if plan.predicted_s <= plan.budget_s else "still over: this device is slow now"
        )
        ctx.emit(
            LogMessage(
                now_s,
                "warning",
                f"budget {self.budget_s:.0f} s: {now_s:.0f} s spent after {phases[i - 1].name}; "
                f"on the costs this run measured, the rest would take ~{plan.full_s:.0f} s, so "
                f"it was scaled down to ~{plan.predicted_s:.0f} s ({verdict}): "
                + "; ".join(plan.changes),
            )
        )
        self.planned = replace(
            self.planned,
            t=now_s,
            predicted_s=now_s + plan.predicted_s,
            changes=merge_changes(self.planned.changes, plan.changes),
            phases=tuple(p.to_dict() for p in out),
        )
        ctx.emit(self.planned)
        return out
