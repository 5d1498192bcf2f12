"""The one sampler: every comparison in mlatui is scheduled and timed here.

A context's measurement is a sequence of rounds. In each round every width is measured once per
arm as an A B B A quad (B A A B on odd rounds), widths in an order that rotates from round to
round, so every arm and every width sees the same device regimes. The control width (L = 1) gets
`control_quads` quads per round, spread through it. Warm-up calls come before the rounds and are
never timed. Estimates come from each round's own samples (see `mlatui.measure.estimates`), so a regime
change between rounds moves both arms together and cancels in the paired figures.

Nothing here imports mlx: `measure(arm, width)` is the caller's timed step (it runs the forward on
the arm's thread, syncs, and returns plain milliseconds). Every timed call runs with Python's
cyclic garbage collector paused (`MLATUI_TIMED_GC=keep` leaves it on), so a collection never lands
inside one arm's sample; it runs in the untimed calls between samples.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from mlatui.measure.estimates import (
    BOOTSTRAP_RESAMPLES,
    INTERIM_RESAMPLES,
    ContextEstimates,
    Outcome,
    Timing,
    control_outcome,
    control_ratio,
    estimate_context,
)
from mlatui.measure.timing import gc_paused, timed_gc_paused
from mlatui.stream.events import ARMS


def quad(arms: Sequence[str], mirrored: bool) -> tuple[str, str, str, str]:
    a, b = arms
    return (b, a, a, b) if mirrored else (a, b, b, a)


def _rotate(xs: Sequence[int], k: int) -> list[int]:
    if not xs:
        return []
    k %= len(xs)
    return [*xs[k:], *xs[:k]]


def round_slots(
    widths: Sequence[int], round_index: int, control_width: int | None, control_quads: int
) -> list[int]:
    """The widths of one round's quads, in order: the control width's quads spread between the
    other widths, the whole order rotated every pair of rounds."""
    others = [w for w in widths if w != control_width]
    controls = control_quads if control_width in widths else 0
    slots: list[int] = []
    for i in range(max(len(others), controls)):
        if i < controls:
            slots.append(control_width)  # type: ignore[arg-type]
        if i < len(others):
            slots.append(others[i])
    # a round and its mirror share one order, so each order runs once in each orientation
    return _rotate(slots, round_index // 2)


def round_quads(
    widths: Sequence[int],
    round_index: int,
    arms: Sequence[str] = ARMS,
    control_width: int | None = 1,
    control_quads: int = 1,
    skip: frozenset[tuple[str, int]] = frozenset(),
) -> list[list[tuple[int, str]]]:
    """Round `round_index`'s quads in order, each its (width, arm) calls. An (arm, width) in
    `skip` is never measured: its width's quads keep only the other arm's two calls (a setting
    rejected by bound for one arm: mlatui.measure.bound)."""
    mirrored = round_index % 2 == 1
    out = []
    for w in round_slots(widths, round_index, control_width, control_quads):
        calls = [(w, arm) for arm in quad(arms, mirrored) if (arm, w) not in skip]
        if calls:
            out.append(calls)
    return out


def round_schedule(
    widths: Sequence[int],
    round_index: int,
    arms: Sequence[str] = ARMS,
    control_width: int | None = 1,
    control_quads: int = 1,
    skip: frozenset[tuple[str, int]] = frozenset(),
) -> list[tuple[int, str]]:
    """(width, arm) in the order round `round_index` measures them."""
    return [
        call
        for q in round_quads(widths, round_index, arms, control_width, control_quads, skip)
        for call in q
    ]


@dataclass(frozen=True)
class SamplerPlan:
    """How one context is measured. Rounds are added in pairs (a round and its mirror)."""

    widths: tuple[int, ...]
    min_rounds: int = 6
    max_rounds: int = 18
    warmup: int = 1
    control_width: int | None = 1  # None: no L = 1 check (e.g. forced branches)
    control_quads: int = 1
    tolerance_pct: float = 2.0
    arms: tuple[str, str] = ARMS
    seed: int = 0
    # Before every quad, one untimed step per arm at the smallest width (the opening arm last).
    # Without it each arm's first sample of a quad follows its own step of the previous slot's
    # width: on the H200 an arm's step after its own L >= 2 materialised step ran 5-11% slower,
    # so the real patch's L = 1 ratio read 1.02-1.09 (stock "slower") where an A/A, symmetric by
    # construction, could not see it.
    settle: bool = True
    # (arm, width) never measured, warm-up included: a setting rejected by bound for that arm
    skip: frozenset[tuple[str, int]] = frozenset()

    def __post_init__(self) -> None:
        if self.min_rounds < 2 or self.max_rounds < self.min_rounds:
            raise ValueError("need 2 <= min_rounds <= max_rounds")
        if self.control_width is not None and any(w == self.control_width for _, w in self.skip):
            raise ValueError("the control width is measured in both arms")

    @property
    def first_rounds(self) -> int:
        return self.min_rounds + self.min_rounds % 2

    def timed_calls(self, rounds: int | None = None) -> int:
        per_round = len(
            round_schedule(
                self.widths, 0, self.arms, self.control_width, self.control_quads, self.skip
            )
        )
        return per_round * (self.first_rounds if rounds is None else rounds)


@dataclass
class SamplerRun:
    """What one context's sampling produced: every timed sample and the final estimates."""

    plan: SamplerPlan
    timings: list[Timing] = field(default_factory=list)
    estimates: ContextEstimates | None = None
    rounds: int = 0

    @property
    def outcome(self) -> Outcome | None:
        return None if self.estimates is None else self.estimates.control_outcome

    @property
    def final(self) -> ContextEstimates:
        """The estimates after the last round (sample_context runs at least one)."""
        if self.estimates is None:
            raise RuntimeError("no round was sampled")
        return self.estimates


def sample_context(
    plan: SamplerPlan,
    measure: Callable[[str, int], float],
    *,
    warm: Callable[[str, int], None] | None = None,
    clock: Callable[[], float] = lambda: 0.0,
    on_timing: Callable[[Timing], None] = lambda t: None,
    on_round: Callable[[ContextEstimates], None] = lambda e: None,
    check_stop: Callable[[], None] = lambda: None,
    decide_more: Callable[[bool], bool] | None = None,
    between_rounds: Callable[[int], None] | None = None,
    on_skip: Callable[[str, int], None] | None = None,
) -> SamplerRun:
    """Warm up every width in both arms, then run rounds until the control is decided (valid or
    invalid) after at least `min_rounds`, or `max_rounds` are done. `decide_more(wants_more)`
    lets the caller overrule the decision (rank 0 decides for all ranks in a distributed run).
    `between_rounds(r)` runs untimed before every round r > 0: the caller gives each arm fresh
    copies of its state there, so that whatever one copy's placement in memory costs is a
    round-to-round effect the confidence intervals see, not a constant of the whole context.
    `on_skip(arm, width)` runs, untimed, where a call in `plan.skip` would have been (decode
    blocks use it to keep the skipped arm's stream as long as the other's)."""
    run = SamplerRun(plan)
    warm_step: Callable[[str, int], object] = warm if warm is not None else measure
    for width in plan.widths:  # the first call at a new width compiles: never timed
        for _ in range(plan.warmup):
            for arm in quad(plan.arms, False)[:2]:
                if (arm, width) in plan.skip:
                    continue
                check_stop()
                warm_step(arm, width)
    settle_width = plan.control_width if plan.control_width in plan.widths else min(plan.widths)
    pause_gc = timed_gc_paused()
    while True:
        if between_rounds is not None and run.rounds:
            check_stop()
            between_rounds(run.rounds)
        quads = round_quads(
            plan.widths, run.rounds, plan.arms, plan.control_width, plan.control_quads
        )
        for calls in quads:
            for i, (width, arm) in enumerate(calls):
                check_stop()
                if plan.settle and i == 0:  # untimed: every arm's last step is a light one
                    first = next((a for w, a in calls if (a, w) not in plan.skip), arm)
                    for other in (a for a in plan.arms if a != first):
                        warm_step(other, settle_width)
                    warm_step(first, settle_width)
                if (arm, width) in plan.skip:
                    if on_skip is not None:
                        on_skip(arm, width)  # untimed, in the skipped call's place
                    continue
                with gc_paused(pause_gc):
                    ms = measure(arm, width)
                timing = Timing(run.rounds, width, arm, ms, clock())
                run.timings.append(timing)
                on_timing(timing)
        run.rounds += 1
        control = (
            control_ratio(run.timings, plan.arms, plan.control_width, plan.seed)
            if plan.control_width in plan.widths
            else None
        )
        decision = control_outcome(control, plan.tolerance_pct) if control else None
        wants_more = _wants_more(plan, run.rounds, decision)
        if decide_more is not None:
            wants_more = decide_more(wants_more)
        # interim estimates (fewer resamples) for the live view; the final one in full, once
        run.estimates = estimate_context(
            run.timings,
            plan.arms,
            plan.control_width,
            plan.tolerance_pct,
            plan.seed,
            BOOTSTRAP_RESAMPLES if not wants_more else INTERIM_RESAMPLES,
        )
        if (
            control is not None and plan.control_width is not None
        ):  # the check shown is the one decided on, at full resamples
            run.estimates.ratio[plan.control_width] = control
            run.estimates.control_outcome = decision
        on_round(run.estimates)
        if not wants_more:
            return run


def until(deadline: float | None) -> Callable[[bool], bool] | None:
    """A `decide_more` for `sample_context`: no new pair of rounds once `deadline` (monotonic
    seconds) has passed; the second round of a pair always runs (each arm first equally often).
    None without a deadline."""
    if deadline is None:
        return None
    rounds = 0

    def more(wants: bool) -> bool:
        nonlocal rounds
        rounds += 1
        return wants if rounds % 2 else wants and time.monotonic() < deadline

    return more


def _wants_more(plan: SamplerPlan, rounds: int, decision: Outcome | None) -> bool:
    if rounds < plan.first_rounds or rounds % 2:
        return True  # always whole pairs of rounds: each arm first equally often
    if rounds >= plan.max_rounds:
        return False
    return decision is Outcome.INCONCLUSIVE
