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
from typing import Protocol

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
    def added_s(self) -> float:
        """Seconds of the rounds past the planned ones (an undecided check's, a budget's)."""
        planned = [t.t for t in self.timings if t.round < self.plan.first_rounds]
        return max(0.0, self.timings[-1].t - planned[-1]) if planned else 0.0

    @property
    def final(self) -> ContextEstimates:
        """The estimates after the last round (sample_context runs at least one)."""
        if self.estimates is None:
            raise RuntimeError("no round was sampled")
        return self.estimates


class Harness(Protocol):
    """What the sampler drives: `measure(arm, width)` is the caller's timed step (it runs the
    forward on the arm's thread, syncs, and returns plain milliseconds); the rest are its hooks,
    all run outside the timed calls. `Hooks` makes one from plain functions."""

    def measure(self, arm: str, width: int) -> float: ...

    def warm(self, arm: str, width: int) -> object:
        """An untimed step (warm-up and settle steps)."""

    def clock(self) -> float:
        """Run seconds, stamped on each Timing."""

    def on_timing(self, timing: Timing) -> None: ...

    def on_round(self, estimates: ContextEstimates) -> None: ...

    def check_stop(self) -> None:
        """Raises to stop between calls."""

    def decide_more(self, wants_more: bool) -> bool:
        """Overrules the sampler's wish for another round (rank 0 decides for every rank)."""

    def between_rounds(self, done: int) -> None:
        """Before every round after the first, untimed: fresh copies of each arm's state, so
        what one copy's placement in memory costs is a round-to-round effect the CIs see."""

    def on_skip(self, arm: str, width: int) -> None:
        """Where a call in `plan.skip` would have been, untimed (decode blocks keep the skipped
        arm's stream as long as the other's)."""


def _nothing(*_: object) -> None:
    return None


def _as_wanted(wants_more: bool) -> bool:
    return wants_more


def _no_clock() -> float:
    return 0.0


def _measure_again(arm: str, width: int) -> object:
    raise AssertionError("replaced by `measure` when the Hooks are made")


@dataclass(frozen=True)
class Hooks:
    """A Harness from plain functions: `measure`, and whichever hooks the caller has (`warm`
    defaults to `measure`, untimed)."""

    measure: Callable[[str, int], float]
    warm: Callable[[str, int], object] = _measure_again
    clock: Callable[[], float] = _no_clock
    on_timing: Callable[[Timing], None] = _nothing
    on_round: Callable[[ContextEstimates], None] = _nothing
    check_stop: Callable[[], None] = _nothing
    decide_more: Callable[[bool], bool] = _as_wanted
    between_rounds: Callable[[int], None] = _nothing
    on_skip: Callable[[str, int], None] = _nothing

    def __post_init__(self) -> None:
        if self.warm is _measure_again:
            object.__setattr__(self, "warm", self.measure)


def sample_context(plan: SamplerPlan, harness: Harness) -> SamplerRun:
    """Warm up every width in both arms, then run rounds until the control is decided (valid or
    invalid) after at least `min_rounds`, or `max_rounds` are done (`harness.decide_more` may
    overrule either)."""
    run = SamplerRun(plan)
    _warm_up(plan, harness)
    control = plan.control_width
    settle_width = control if control is not None and control in plan.widths else min(plan.widths)
    pause_gc = timed_gc_paused()
    while True:
        if run.rounds:
            harness.check_stop()
            harness.between_rounds(run.rounds)
        _sample_round(run, harness, settle_width, pause_gc)
        run.rounds += 1
        if not _estimate_round(run, harness):
            return run


def _warm_up(plan: SamplerPlan, h: Harness) -> None:
    for width in plan.widths:  # the first call at a new width compiles: never timed
        for _ in range(plan.warmup):
            for arm in quad(plan.arms, False)[:2]:
                if (arm, width) in plan.skip:
                    continue
                h.check_stop()
                h.warm(arm, width)


def _sample_round(run: SamplerRun, h: Harness, settle_width: int, pause_gc: bool) -> None:
    """One round's quads, each opened by an untimed settle step per arm when the plan asks."""
    plan = run.plan
    quads = round_quads(plan.widths, run.rounds, plan.arms, plan.control_width, plan.control_quads)
    for calls in quads:
        for i, (width, arm) in enumerate(calls):
            h.check_stop()
            if plan.settle and i == 0:  # untimed: every arm's last step is a light one
                first = next((a for w, a in calls if (a, w) not in plan.skip), arm)
                for other in (a for a in plan.arms if a != first):
                    h.warm(other, settle_width)
                h.warm(first, settle_width)
            if (arm, width) in plan.skip:
                h.on_skip(arm, width)  # untimed, in the skipped call's place
                continue
            with gc_paused(pause_gc):
                ms = h.measure(arm, width)
            timing = Timing(run.rounds, width, arm, ms, h.clock())
            run.timings.append(timing)
            h.on_timing(timing)


def _estimate_round(run: SamplerRun, h: Harness) -> bool:
    """The estimates after a round (handed to `on_round`); whether to sample another."""
    plan = run.plan
    control = (
        control_ratio(run.timings, plan.arms, plan.control_width, plan.seed)
        if plan.control_width in plan.widths
        else None
    )
    decision = control_outcome(control, plan.tolerance_pct) if control else None
    wants_more = h.decide_more(_wants_more(plan, run.rounds, decision))
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
    h.on_round(run.estimates)
    return wants_more


def until(deadline: float | None) -> Callable[[bool], bool]:
    """A `decide_more` for the sampler: no new pair of rounds once `deadline` (monotonic
    seconds) has passed; the second round of a pair always runs (each arm first equally often).
    Without a deadline, the sampler's own wish."""
    if deadline is None:
        return _as_wanted
    rounds = 0

    def more(wants: bool) -> bool:
        nonlocal rounds
        rounds += 1
        return wants if rounds % 2 else wants and time.monotonic() < deadline

    return more


def within(
    decide: Callable[[bool], bool],
    clock: Callable[[], float],
    deadline: float,
    planned_rounds: int,
    grow_to: int = 0,
) -> Callable[[bool], bool]:
    """A `decide_more` for a budget's time slice: `decide` (rank 0's answer under mlx.launch)
    asked, after each pair of rounds, for the next pair (taking as long as the last one did)
    only if it ends by `deadline`: a planned one if half of it does, one past `planned_rounds`
    (the sampler's wish, or up to `grow_to` rounds one for a narrower CI) if all of it does."""
    rounds = 0
    mark = clock()

    def more(wants: bool) -> bool:
        nonlocal rounds, mark
        rounds += 1
        if not rounds % 2:
            now = clock()
            pair_s, mark = now - mark, now
            if rounds < planned_rounds:
                wants = now + pair_s / 2 <= deadline
            else:
                wants = (wants or rounds < grow_to) and now + pair_s <= deadline
        return decide(wants)

    return more


def _wants_more(plan: SamplerPlan, rounds: int, decision: Outcome | None) -> bool:
    if rounds < plan.first_rounds or rounds % 2:
        return True  # always whole pairs of rounds: each arm first equally often
    if rounds >= plan.max_rounds:
        return False
    return decision is Outcome.INCONCLUSIVE
