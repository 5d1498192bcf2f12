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

import contextlib
import gc
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
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
from mlatui.stream.events import ARMS

L1_TOLERANCE_PCT = 2.0

_gc_lock = threading.Lock()
_gc_paused_depth = 0
_gc_was_enabled = False


def timed_gc_paused() -> bool:
    """Whether timed calls run with Python's cyclic collector paused: yes unless
    MLATUI_TIMED_GC=keep (a diagnostic). A collection that lands inside one arm's timed step
    costs that sample milliseconds the other arm's neighbour does not pay; paused, collections
    happen between samples (in the untimed settle steps and hand-overs) instead."""
    return os.environ.get("MLATUI_TIMED_GC", "pause").strip().lower() != "keep"


@contextlib.contextmanager
def gc_paused(enabled: bool = True) -> Iterator[None]:
    """Cyclic garbage collection off for the block, then back as it was. Nestable and safe
    across threads (the collector is process-wide: the outermost block restores it)."""
    global _gc_paused_depth, _gc_was_enabled
    if not enabled:
        yield
        return
    with _gc_lock:
        if _gc_paused_depth == 0:
            _gc_was_enabled = gc.isenabled()
            gc.disable()
        _gc_paused_depth += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_paused_depth -= 1
            if _gc_paused_depth == 0 and _gc_was_enabled:
                gc.enable()


def timed_ms(step: Callable[[], object], sync: Callable[[object], None]) -> float:
    """Run `step` and `sync` its result; the wall time between the two sync points, in ms.
    The caller must have synced everything `step` depends on before calling."""
    start = time.perf_counter_ns()
    sync(step())
    return (time.perf_counter_ns() - start) / 1e6


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
    rejected by bound for one arm: mlatui.measure.acceptance)."""
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
    tolerance_pct: float = L1_TOLERANCE_PCT
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


def _nothing(*_: object) -> None:
    return None


def _as_wanted(wants_more: bool) -> bool:
    return wants_more


def _no_clock() -> float:
    return 0.0


@dataclass(frozen=True)
class Hooks:
    """What the sampler drives: `measure(arm, width)` is the caller's timed step (it runs the
    forward on the arm's thread, syncs, and returns plain milliseconds); the rest are its hooks,
    all run outside the timed calls, each a no-op unless given."""

    measure: Callable[[str, int], float]
    # an untimed step (warm-up and settle steps); None: `measure`, untimed
    warm: Callable[[str, int], object] | None = None
    clock: Callable[[], float] = _no_clock  # run seconds, stamped on each Timing
    on_timing: Callable[[Timing], None] = _nothing
    on_round: Callable[[ContextEstimates], None] = _nothing
    check_stop: Callable[[], None] = _nothing  # raises to stop between calls
    # overrules the sampler's wish for another round (rank 0 decides for every rank)
    decide_more: Callable[[bool], bool] = _as_wanted
    # before every round after the first, untimed: fresh copies of each arm's state, so what one
    # copy's placement in memory costs is a round-to-round effect the CIs see
    between_rounds: Callable[[int], None] = _nothing
    # where a call in `plan.skip` would have been, untimed (decode blocks keep the skipped arm's
    # stream as long as the other's)
    on_skip: Callable[[str, int], None] = _nothing

    def untimed(self, arm: str, width: int) -> object:
        return (self.warm or self.measure)(arm, width)


def sample_context(plan: SamplerPlan, harness: Hooks) -> SamplerRun:
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


def _warm_up(plan: SamplerPlan, h: Hooks) -> None:
    for width in plan.widths:  # the first call at a new width compiles: never timed
        for _ in range(plan.warmup):
            for arm in quad(plan.arms, False)[:2]:
                if (arm, width) in plan.skip:
                    continue
                h.check_stop()
                h.untimed(arm, width)


def _sample_round(run: SamplerRun, h: Hooks, settle_width: int, pause_gc: bool) -> None:
    """One round's quads, each opened by an untimed settle step per arm when the plan asks."""
    plan = run.plan
    quads = round_quads(plan.widths, run.rounds, plan.arms, plan.control_width, plan.control_quads)
    for calls in quads:
        for i, (width, arm) in enumerate(calls):
            h.check_stop()
            if plan.settle and i == 0:  # untimed: every arm's last step is a light one
                first = next((a for w, a in calls if (a, w) not in plan.skip), arm)
                for other in (a for a in plan.arms if a != first):
                    h.untimed(other, settle_width)
                h.untimed(first, settle_width)
            if (arm, width) in plan.skip:
                h.on_skip(arm, width)  # untimed, in the skipped call's place
                continue
            with gc_paused(pause_gc):
                ms = h.measure(arm, width)
            timing = Timing(run.rounds, width, arm, ms, h.clock())
            run.timings.append(timing)
            h.on_timing(timing)


def _estimate_round(run: SamplerRun, h: Hooks) -> bool:
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
