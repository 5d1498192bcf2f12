"""`+` after a run: more rounds of L = 1 quads at the contexts whose check ended undecided, on the
arms still loaded, in the same recording.

A noisy host often ends a run with inconclusive checks and so with no verdict. Both arms take the
same branch at L = 1, so more paired quads at the same context narrow the same ratio's CI: each
`+` is a phase of its own (a PhaseStart of kind `l1`, its steps, its estimates), after which every
check at a measured context is decided again on all the L = 1 quads the run measured there (those
still inconclusive then with the check pooled over every context, as at a phase's end) and emitted
as a new Validity of its phase and context, which the dashboard folds in place of the old one;
then a new RunEnd. A budget's end measures its last rounds the same way.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from msgspec import structs

from mlatui.config.phase_kind import Pass, PhaseKind
from mlatui.measure.estimates import Outcome, control_outcome
from mlatui.measure.plans import (
    more_phase,
    more_phase_name,
    plan_for,
    sweep_segments,
)
from mlatui.measure.sampler import SamplerPlan
from mlatui.run.phases.base import (
    ProgressTracker,
    RunContext,
    StepSite,
    pool_checks,
    sample_steps,
    share_context,
)
from mlatui.run.phases.results import Checks, L1Quads
from mlatui.stream.event_base import Interval
from mlatui.stream.events import (
    Basis,
    PhaseStart,
    PhaseSummary,
    RunEnd,
    Validity,
)
from mlatui.stream.phrases import interval_text
from mlatui.stream.sources import RunControl

UNTIL_ROUNDS = 64  # the most rounds one context takes before a budget's end


def serve_more(ctx: RunContext, control: RunControl, checks: Checks, more: MoreRounds) -> None:
    """The run has ended: its RunEnd, then each `+` request's rounds (`more`: the run's, its
    L = 1 quads so far), each followed by a new RunEnd, until the stop flag is set (quit). A
    request with nothing undecided is said in the log and measures nothing. `checks`: the
    run's as it ended; each request's checks join them for the next."""

    def end() -> None:
        ctx.emit(RunEnd(ctx.now(), "completed", checks.invalid_contexts()))

    end()
    while not control.is_set():
        rounds = control.next_ask()
        if rounds is None or control.is_set():
            continue
        undecided = checks.undecided(more.last_pass)
        if not undecided or rounds < 1:
            ctx.log("info", "+: no undecided L = 1 check to measure")
            continue
        checks = checks.plus(more.measure(undecided, rounds))
        end()


class MoreRounds:
    """The `+` requests of one run, numbered: each a phase of L = 1 rounds of its own (of the
    A/A pass `last_pass` when there is one: its slots are A and B), after the run's
    `phases_before` phases. The L = 1 quads grow with every request."""

    def __init__(self, ctx: RunContext, last_pass: Pass, phases_before: int, l1: L1Quads) -> None:
        self.ctx, self.last_pass, self.phases_before, self.l1 = ctx, last_pass, phases_before, l1
        self.asked = 0

    def measure(
        self, checks: list[Validity], rounds: int, until_s: float | None = None
    ) -> list[Validity]:
        """`rounds` rounds of L = 1 quads at each of the checks' contexts, then every check
        there decided again on all the run's L = 1 quads at its context: its new Validity.
        `until_s` (a budget's end): rounds go on while the check is undecided, each context
        in its share of the time to it."""
        ctx = self.ctx
        self.asked += 1
        name = self.last_pass.phase_name(more_phase_name(self.asked))
        contexts = sorted({v.context for v in checks})
        shapes = {c: more_phase(name, c, rounds) for c in contexts}
        if until_s is not None:
            shapes = {c: structs.replace(p, max_rounds=UNTIL_ROUNDS) for c, p in shapes.items()}
        plans = {c: plan_for(shapes[c], (1,), ctx.seed, c, ctx.settle) for c in contexts}
        planned = sum(p.timed_calls() for p in plans.values())
        segments = [s for c in contexts for s in sweep_segments(shapes[c], ctx.settle)]
        index = self.phases_before + self.asked - 1
        start = PhaseStart(
            ctx.now(),
            name,
            PhaseKind.MORE,
            index,
            index + 1,
            planned,
            tuple(contexts),
            tuple(segments),
        )
        ctx.emit(start)
        progress = ProgressTracker(ctx, name, planned)
        out: list[Validity] = []
        for i, context in enumerate(contexts):
            ctx.check_stop()
            text = ctx.tokens_for(context + 1)
            length = share_context(ctx, text[:context])
            site = StepSite(name, length, text[length:])
            end = (
                None if until_s is None else ctx.now() + (until_s - ctx.now()) / (len(contexts) - i)
            )
            self._rounds_at(site, plans[context], progress, end)
            here = [v for v in checks if v.context == context]
            out += _decide_again(ctx, name, here, length, self.l1)
        out = pool_after(ctx, name, out, self.l1)
        ctx.emit(PhaseSummary(ctx.now(), name, PhaseKind.MORE, (), _said(contexts, out)))
        return out

    def _rounds_at(
        self, site: StepSite, plan: SamplerPlan, progress: ProgressTracker, end: float | None
    ) -> None:
        """Rounds at one context into the run's L = 1 quads. With a deadline (a budget's end),
        further runs of them, up to `plan.max_rounds` rounds in all, while the check on every
        quad the run measured there is still undecided: the sampler stops once its own run's
        quads decide, which may be a pair of rounds that reads valid while all of them together
        still read inconclusive."""
        ctx, left = self.ctx, plan.max_rounds
        while True:
            run = sample_steps(ctx, site, plan, progress, interim=False, deadline=end)
            self.l1 = self.l1.plus(site.length, run.timings, plan.control_width)
            left -= len({t.round for t in run.timings})
            if end is None or not run.timings or left < plan.min_rounds:
                return
            plan = dataclasses.replace(plan, max_rounds=left)
            ratio = self.l1.pooled_ratio(site.length, ctx.seed)
            undecided = ratio is not None and control_outcome(ratio, plan.tolerance_pct) is (
                Outcome.INCONCLUSIVE
            )
            if not ctx.leader_decides_each([undecided and ctx.now() < end])[0]:  # rank 0's
                return


def _said(contexts: Sequence[int], checks: Sequence[Validity]) -> str:
    """Each context's check as the rounds left it, the pooled check included."""
    first = {v.context: v for v in reversed(checks)}
    return "; ".join(
        f"{v.verdict}{' (pooled)' if v.pooled else ''} at {c}"
        if (v := first.get(c)) is not None
        else f"no ratio at {c}"
        for c in contexts
    )


def pool_after(ctx: RunContext, phase: str, checks: list[Validity], l1: L1Quads) -> list[Validity]:
    """The checks decided again after more rounds (under mlx.launch the same list on every
    rank), those still inconclusive decided once more with the check pooled over every L = 1
    quad the run measured, the new rounds included (as a phase's end decides its own:
    `pool_checks`): each one that makes valid (pooled) in its place. A context whose own CI,
    narrowed by the rounds, contains 1.00 can pass this way."""
    decided = pool_checks(ctx, phase, checks, l1)  # one collective: a yes/no per check
    return [
        structs.replace(v, valid=True, outcome=Outcome.VALID.value, basis=Basis.POOLED)
        if v.context in decided and v.verdict == Outcome.INCONCLUSIVE.value
        else v
        for v in checks
    ]


def _decide_again(
    ctx: RunContext, phase: str, checks: list[Validity], length: int, l1: L1Quads
) -> list[Validity]:
    timings = l1.pooled(length)
    ratio = l1.pooled_ratio(length, ctx.seed)
    if ratio is None:
        return []
    tolerance = checks[0].tolerance_pct
    outcome = control_outcome(ratio, tolerance)
    total = len({t.round for t in timings})
    ctx.log(
        "info" if outcome is Outcome.VALID else "warning",
        f"{phase}: {', '.join(v.phase for v in checks)} @ {length}: on all {total} rounds of "
        f"L = 1 quads this run measured there: {interval_text(ratio)}, {outcome.value}",
    )
    return redecided(ctx, checks, outcome, ratio, total)


def redecided(
    ctx: RunContext, checks: Sequence[Validity], outcome: Outcome, ratio: Interval, total: int
) -> list[Validity]:
    """Each check decided again on all `total` rounds of L = 1 quads at its context: emitted
    and returned (the run's checks then keep it in or out of the verdicts as it now reads)."""
    out = []
    for v in checks:
        new = structs.replace(
            v,
            t=ctx.now(),
            valid=outcome is Outcome.VALID,
            outcome=outcome.value,
            basis=Basis.OWN,
            diff_pct=(ratio.median - 1) * 100,
            ratio=ratio,
            rounds=total,
        )
        ctx.emit(new)
        out.append(new)
    return out
