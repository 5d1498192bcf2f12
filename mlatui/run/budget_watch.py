"""The budget after its first plan: every timed event folded into the probe's costs, the phases
still to run planned again at each phase boundary, and the time left over spent on what is
undecided (mlatui.run.budget_spend): undecided L = 1 checks first, then the tune's rounds of
blocks; at the end of the run the forecast's error against the run's duration is said."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from mlatui.config.scenario import Phase
from mlatui.measure.progress import RunProgress
from mlatui.run.budget import (
    BudgetPlan,
    fit_to_budget,
    merge_changes,
    plan_after,
    reduction_count,
)
from mlatui.run.budget_spend import extra_check_phase, more_l1_rounds
from mlatui.run.phases.base import RunContext
from mlatui.run.phases.results import Checks, GrownRounds, L1Quads, PassResults
from mlatui.stream.events import (
    BudgetOutcome,
    BudgetPlanned,
    DecodeBlock,
    Event,
    LogMessage,
    Step,
    Validity,
)

# The forecast ran 13-17% short of the runs it planned on the 2-core CPU (80 s forecast, 94 s run;
# 87 vs 100 s); with settle steps counted and wide steps grown with T, 2-7% short with
# OpenBLAS and -7..+18% with the reference BLAS: plan against the budget less 15%, so the run
# ends inside it.
FORECAST_MARGIN = 1.15
# the most rounds of blocks a tune or decode phase grows to when the budget has time left (the
# default tune's 8 as written; its speedup's CI narrows about as the root of its rounds: on a GPU
# a 100 s budget ended at 33-52 s with the winner's CI still wide at 16 and at 32)
GROW_ROUNDS = 64


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


@dataclass(frozen=True)
class Replanned:
    """A budget's look at the clock before a phase: the phases with those still to run planned
    again, where the rounds it added to a phase stop, and the L = 1 quads it measured on
    undecided checks (the pass's results take them in)."""

    phases: tuple[Phase, ...]
    grown: tuple[tuple[str, GrownRounds], ...] = ()
    l1: L1Quads = L1Quads()
    checks: tuple[Validity, ...] = ()  # the undecided checks it decided again


@dataclass
class BudgetWatch:
    """The budget after its first plan. The probe runs for seconds; the host may slow down
    minutes later (on a 2-core VM the L = 1 step at 2K went from 31 to 51 ms, and a setting the
    plan expected to be rejected by bound ran its blocks: 178 s on a 100 s budget). So every
    timed event of the run is folded into the probe's cost table, and before each later phase
    the phases still to run are forecast again on what this device did, and scaled down by the
    same reductions if they no longer fit in what is left (phases that ran are not touched)."""

    planned: BudgetPlanned  # the latest plan: the first, or a re-plan's
    costs: RunProgress
    kinds: tuple[str, ...]
    settle: bool = True
    _lock: threading.Lock = field(default_factory=threading.Lock)
    extra_s: float = 0.0  # spent on what was undecided, beyond any plan's forecast
    _first: BudgetPlanned | None = None
    _last_step_s: dict[tuple[str, int], float] = field(default_factory=dict)
    # the rounds of blocks each grown phase had before the budget grew it
    _grown_from: dict[str, int] = field(default_factory=dict)

    def _count_added_round(self, e: Step) -> None:
        """A sweep's rounds past its planned ones are the sampler's, added while an L = 1 check
        there is undecided (up to the plan's cap): their time is spent on what was undecided,
        as the budget's own extra rounds are, and no forecast counts them."""
        key = (e.phase, e.context)
        last_s = self._last_step_s.get(key)
        self._last_step_s[key] = e.t
        reps = next((p.get("reps") for p in self.planned.phases if p.get("name") == e.phase), None)
        if last_s is not None and isinstance(reps, int) and e.rep >= reps:
            self.extra_s += max(0.0, e.t - last_s)

    def _count_grown_round(self, e: DecodeBlock) -> None:
        """A grown phase's blocks past the rounds it had before the budget grew it: their time,
        as measured, is spent on the speedups' CIs (the forecast of the added rounds ran 25%
        short on a GPU, and counting it made the first plan's forecast look 50% wrong)."""
        key = (e.phase, e.context)
        last_s = self._last_step_s.get(key)
        self._last_step_s[key] = e.t
        keep = self._grown_from.get(e.phase)
        if last_s is not None and keep is not None and e.round >= keep:
            self.extra_s += max(0.0, e.t - last_s)

    def __post_init__(self) -> None:
        self._first = self.planned

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
                if isinstance(e, Step):
                    self._count_added_round(e)
                elif isinstance(e, DecodeBlock):
                    self._count_grown_round(e)
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

    def replan(
        self, ctx: RunContext, phases: tuple[Phase, ...], i: int, done: PassResults
    ) -> Replanned:
        """Before phase `i`: the phases with those from `i` on re-planned, said in the log and
        in a new `BudgetPlanned` (the whole run's phases, the changes of both plans); when they
        fit, the time left goes to undecided checks (`done`: the pass so far, its L = 1 quads
        and checks) and then to more rounds of blocks."""
        now_s = ctx.now()
        plan = self.refit(phases[i:], now_s, ctx.leader_decides_each)
        if plan is None:
            spent, decided = self.spend(ctx, done.l1, done.checks, phases[i:])
            grown = self.grow(ctx, phases, i)
            return replace(grown, l1=spent, checks=tuple(decided))
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
        return Replanned(out)

    @staticmethod
    def undecided(checks: Checks, first: frozenset[int] = frozenset()) -> list[Validity]:
        """The run's L = 1 checks still inconclusive (of phases whose check is the run's), those
        at `first` contexts first (a phase still to run reads its check there), then by context."""
        return sorted(checks.undecided(), key=lambda v: (v.context not in first, v.context))

    def left_s(self, ctx: RunContext, rest: tuple[Phase, ...]) -> float:
        """Seconds of the budget beyond the forecast of `rest` (with the forecast's margin)."""
        rest_s = self.forecast_s(rest) if rest else 0.0
        return (self.budget_s - ctx.now()) / FORECAST_MARGIN - rest_s

    def spend(
        self, ctx: RunContext, l1: L1Quads, checks: Checks, rest: tuple[Phase, ...] = ()
    ) -> tuple[L1Quads, list[Validity]]:
        """The time left beyond `rest`'s forecast goes to the undecided checks, a context at a
        time (those a phase still to run reads first): pairs of L = 1 rounds there until its
        check is decided or the time is up (mlatui.run.budget_spend), while the least attempt
        still fits. Each context once per call: the end of the run calls again. Under
        mlx.launch the ranks' checks may differ: nothing is spent there. Returns the L = 1
        quads it measured (`l1`: the pass's before it) and the checks it decided again
        (`checks`: the pass's before it)."""
        mine = L1Quads()
        decided: list[Validity] = []
        if ctx.lockstep is not None:
            return mine, decided
        tried: set[int] = set()
        first = frozenset(c for p in rest for c in p.contexts)
        while True:
            todo = [v for v in self.undecided(checks, first) if v.context not in tried]
            left_s = self.left_s(ctx, rest)
            pick = next(
                (v for v in todo if self.forecast_s((extra_check_phase(v.context),)) <= left_s),
                None,
            )
            if pick is None:
                return mine, decided
            tried.add(pick.context)
            start_s = ctx.now()
            same = [v for v in todo if v.context == pick.context]
            # the pairs of rounds read the clock: only `rest`'s forecast needs the margin
            deadline_s = self.budget_s - FORECAST_MARGIN * (self.forecast_s(rest) if rest else 0)
            again, measured = more_l1_rounds(ctx, same, len(tried), deadline_s, l1 + mine)
            mine = mine + measured
            checks = checks.plus(again)
            decided += again
            self.extra_s += ctx.now() - start_s

    def grow(self, ctx: RunContext, phases: tuple[Phase, ...], i: int) -> Replanned:
        """Before phase `i`, with the checks spent on: the time still left goes to more rounds
        of blocks in the tune and decode phases to run (their speedups' CIs), two at a time up
        to GROW_ROUNDS, while their forecast fits; said like a re-plan. The added rounds of a
        phase stop at a deadline (`Replanned.grown`)."""
        rest = phases[i:]
        budget_left_s = (self.budget_s - ctx.now()) / FORECAST_MARGIN
        base_s = self.forecast_s(rest)
        changes = []
        grown_rounds: list[tuple[str, GrownRounds]] = []
        for j, p in enumerate(rest):
            if not p.kind.rules.decodes:
                continue
            reps = p.reps
            while reps + 2 <= GROW_ROUNDS:
                bigger = (*rest[:j], replace(p, reps=reps + 2), *rest[j + 1 :])
                if self.forecast_s(bigger) > budget_left_s:
                    break
                reps, rest = reps + 2, bigger
            grown = ctx.leader_decides_each([reps > p.reps])[0]  # rank 0's, on every rank
            if not grown:
                rest = (*rest[:j], p, *rest[j + 1 :])
                continue
            changes.append(f"{p.name}: rounds of blocks {p.reps} -> {reps}")
            self._grown_from[p.name] = p.reps
            # the forecast can run short (a GPU's sampled blocks): the added rounds stop at the
            # first pair that would start after the time the phases behind this one need
            later_s = self.forecast_s(rest[j + 1 :]) if rest[j + 1 :] else 0.0
            deadline_s = self.budget_s - FORECAST_MARGIN * later_s - 1.0
            grown_rounds.append((p.name, GrownRounds(p.reps, deadline_s)))
        if not changes:
            return Replanned(phases)
        grown_s = self.forecast_s(rest)
        now_s = ctx.now()
        ctx.emit(
            LogMessage(
                now_s,
                "info",
                f"budget {self.budget_s:.0f} s: {now_s:.0f} s spent after {phases[i - 1].name} "
                f"and the rest forecast at ~{base_s:.0f} s, so the time left goes to narrower "
                "CIs: " + "; ".join(changes),
            )
        )
        out = (*phases[:i], *rest)
        self.planned = replace(
            self.planned,
            t=now_s,
            predicted_s=now_s + grown_s,
            changes=merge_changes(self.planned.changes, tuple(changes)),
            phases=tuple(p.to_dict() for p in out),
        )
        ctx.emit(self.planned)
        return Replanned(out, tuple(grown_rounds))

    def finish(self, ctx: RunContext, done: PassResults) -> tuple[BudgetOutcome, list[Validity]]:
        """After the last phase: what is left of the budget goes to the undecided checks (`done`:
        the pass's L = 1 quads and checks); then the first plan's forecast against what the run
        took, in the log and a BudgetOutcome. Returns it and the checks it measured, as they read."""
        _, decided = self.spend(ctx, done.l1, done.checks)
        checks = done.checks.plus(decided)
        first = self._first or self.planned
        took_s = ctx.now()
        planned_s = max(1e-9, took_s - self.extra_s)
        error_pct = (first.predicted_s - planned_s) / planned_s * 100
        left = tuple(f"{v.phase} @ {v.context}" for v in self.undecided(checks))
        outcome = BudgetOutcome(
            took_s,
            self.budget_s,
            first.predicted_s,
            planned_s,
            self.extra_s,
            took_s,
            error_pct,
            first.first_use_s,
            left,
        )
        ctx.emit(LogMessage(took_s, "info", outcome_text(outcome)))
        ctx.emit(outcome)
        return outcome, decided


def outcome_text(o: BudgetOutcome) -> str:
    """The end of a budgeted run in one line (the log's, and `bench`'s on stderr)."""
    extra = f"; {o.extra_s:.0f} s more went to what was undecided" if o.extra_s >= 0.5 else ""
    still = f"; L = 1 checks still undecided: {', '.join(o.undecided)}" if o.undecided else ""
    first = (
        f"; the probe's first use of each shape (compilation) took {o.first_use_s:.1f} s"
        if o.first_use_s >= 0.5
        else ""
    )
    return (
        f"budget {o.budget_s:.0f} s: the run took {o.took_s:.0f} s; its first plan forecast "
        f"~{o.forecast_s:.0f} s for what took {o.planned_s:.0f} s (forecast error "
        f"{o.error_pct:+.0f}%){extra}{still}{first}"
    )
