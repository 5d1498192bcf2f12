"""The budget's time left over, spent on an undecided L = 1 check: more rounds of L = 1 quads at its
context, then the check decided again on every L = 1 quad the run measured there.

A budgeted run used to end with checks undecided and time unused (the H200's 100 s launch ended
at 47 s with every L = 1 check inconclusive). Both arms take the same branch at L = 1, so more
paired quads at the same context narrow the same ratio's CI: the context's own check, with more
rounds (the tune's check at a context already pools the sweep's quads there,
mlatui.run.phases.decode). A decided check is emitted again as a Validity of its phase and
context, which the dashboard folds in place of the undecided one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from mlatui.config.phase_kind import PhaseKind
from mlatui.config.scenario import Phase
from mlatui.measure.estimates import (
    Outcome,
    Timing,
    control_outcome,
    stable_seed,
)
from mlatui.measure.plans import CONTROL_QUADS
from mlatui.measure.sampler import Hooks, SamplerPlan, sample_context
from mlatui.measure.timing import L1_TOLERANCE_PCT
from mlatui.run.arms import recopy_in_place
from mlatui.run.phases.base import (
    RunContext,
    StepSite,
    cache_rounds_hook,
    forward_and_trim,
    share_context,
)
from mlatui.run.phases.results import L1Quads
from mlatui.stream.events import Basis, LogMessage, Step, Validity
from mlatui.stream.interval import Interval
from mlatui.stream.phrases import interval_text

PAIR_ROUNDS = 2  # rounds come in mirrored pairs; the clock and the check are read after each
# the most rounds one attempt adds at a context: a ratio whose CI still straddles the tolerance
# after that many is the device's noise at the bound, which more time would not settle
MAX_EXTRA_ROUNDS = 24


def extra_check_phase(context: int, rounds: int = PAIR_ROUNDS) -> Phase:
    """The least an attempt runs (a prefill, the warm-up, one pair of rounds), as a phase the
    forecast can cost (settle steps and quads included)."""
    return Phase(
        "l1", PhaseKind.SWEEP, (context,), widths=(1,), reps=rounds, max_rounds=rounds, warmup=1
    )


def more_l1_rounds(
    ctx: RunContext, checks: Sequence[Validity], attempt: int, deadline_s: float, l1: L1Quads
) -> tuple[list[Validity], L1Quads]:
    """Pairs of rounds of L = 1 quads at the checks' one context (Step events labelled
    `<first check's phase>:l1`) while the check on every L = 1 quad of the run there (`l1` and
    these rounds) is undecided and another pair, as long as the last one took, ends by
    `deadline_s` (run time), at most MAX_EXTRA_ROUNDS; then each check's new Validity (emitted
    when it is decided) or the check as it was, and the quads these rounds measured. Every
    phase's check at one context reads the same quads (a tune's pools the sweep's), so one
    attempt decides them all."""
    check = checks[0]
    label = f"{check.phase}:l1"
    text = ctx.tokens_for(check.context + 1)
    length = share_context(ctx, text[: check.context])
    rounds = _ExtraRounds(ctx, StepSite(label, length, text[length : length + 1]), l1)
    plan = SamplerPlan(
        (1,),
        min_rounds=PAIR_ROUNDS,
        max_rounds=MAX_EXTRA_ROUNDS,
        warmup=1,
        control_width=1,
        control_quads=CONTROL_QUADS,
        tolerance_pct=L1_TOLERANCE_PCT,
        seed=stable_seed(ctx.seed, label, length, attempt),
        settle=ctx.settle,
    )
    run = sample_context(plan, rounds.hooks(plan, check.tolerance_pct, deadline_s))
    mine = L1Quads().plus(length, run.timings, plan.control_width)
    timings = (l1 + mine).pooled(length)
    ratio = (l1 + mine).pooled_ratio(length, ctx.seed)
    if ratio is None:
        return list(checks), mine
    outcome = control_outcome(ratio, check.tolerance_pct)
    total = len({t.round for t in timings})
    ctx.emit(
        LogMessage(
            ctx.now(),
            "info",
            f"budget: {', '.join(v.phase for v in checks)} @ {length}: {run.rounds} more rounds of "
            f"L = 1 quads; on all {total} rounds this run measured there: {interval_text(ratio)}, "
            f"{outcome.value}",
        )
    )
    if outcome is Outcome.INCONCLUSIVE:
        return list(checks), mine
    return redecided(ctx, checks, outcome, ratio, total), mine


class _ExtraRounds:
    """The sampler's hooks for one attempt: synced L = 1 steps on the shared context, Step
    events after each timed region, and another pair of rounds only while the check on every
    quad so far is undecided and the pair, as long as the last one took, ends by the deadline."""

    def __init__(self, ctx: RunContext, site: StepSite, l1: L1Quads) -> None:
        self.ctx, self.site, self.l1 = ctx, site, l1
        self.step = forward_and_trim(site.tail)
        self.pending: list[tuple[str, float, int, int]] = []
        self.current: list[Timing] = []
        self.marks = [ctx.now()]  # the run time at the start and after each pair of rounds

    def hooks(self, plan: SamplerPlan, tolerance_pct: float, deadline_s: float) -> Hooks:
        ctx = self.ctx

        def more(wants_more: bool) -> bool:
            rounds = 1 + max((t.round for t in self.current), default=-1)
            if rounds % PAIR_ROUNDS:
                return True  # whole pairs: each arm first equally often
            now = ctx.now()
            pair_s = now - self.marks[-1]
            self.marks.append(now)
            if rounds >= plan.max_rounds or now + pair_s > deadline_s:
                return False
            return self._undecided(tolerance_pct)

        return Hooks(
            self._measure,
            warm=lambda arm, width: ctx.workers[arm].call(self.step) and None,
            clock=ctx.now,
            on_timing=self._on_timing,
            check_stop=ctx.check_stop,
            decide_more=more,
            between_rounds=cache_rounds_hook(ctx, lambda a: recopy_in_place(a.caches)),
        )

    def _measure(self, arm: str, width: int) -> float:
        ms, absorbed, materialised = self.ctx.workers[arm].call(self.step)
        self.pending.append((arm, ms, absorbed, materialised))
        return ms

    def _on_timing(self, t: Timing) -> None:  # after the timed region has closed
        arm, ms, absorbed, materialised = self.pending.pop()
        self.current.append(t)
        site, ctx = self.site, self.ctx
        ctx.emit(
            Step(ctx.now(), site.label, arm, site.length, 1, t.round, ms, absorbed, materialised)
        )

    def _undecided(self, tolerance_pct: float) -> bool:
        ratio = self.l1.plus(self.site.length, self.current, 1).pooled_ratio(
            self.site.length, self.ctx.seed
        )
        return ratio is None or control_outcome(ratio, tolerance_pct) is Outcome.INCONCLUSIVE


def redecided(
    ctx: RunContext, checks: Sequence[Validity], outcome: Outcome, ratio: Interval, total: int
) -> list[Validity]:
    """Each check decided again on all `total` rounds of L = 1 quads at its context: emitted
    and returned (the run's checks then keep it in or out of the verdicts as it now reads)."""
    out = []
    for v in checks:
        new = replace(
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
