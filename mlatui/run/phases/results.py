"""What a phase hands to the phases after it, as immutable values.

A phase returns a PhaseResult: its summary, the L = 1 quads it measured and (a sweep) its final
estimates per context. The engine keeps the pass's results so far (PassResults) and gives each
phase a PhaseInputs holding only what its kind declares it needs (Need), plus, for a phase the
budget grew, where its added rounds stop. No phase writes into state another phase reads.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from mlatui.config.phase_kind import Pass, PhaseKind
from mlatui.measure.estimates import ContextEstimates, Timing, control_ratio, stable_seed
from mlatui.measure.plans import run_checks, undecided_checks
from mlatui.stream.event_base import Interval
from mlatui.stream.events import ARMS, PhaseSummary, Validity


@dataclass(frozen=True)
class L1Quads:
    """The L = 1 control timings of every sampler run so far, each run with its context, in the
    order the runs ran: a check pools them at a context (same arms, same hypothesis, paired
    quads whose regimes cancel within each quad)."""

    runs: tuple[tuple[int, tuple[Timing, ...]], ...] = ()

    def plus(self, context: int, timings: Sequence[Timing], control_width: int | None) -> L1Quads:
        """With one more run's control quads (a run without a control adds nothing)."""
        if control_width is None:
            return self
        quads = tuple(t for t in timings if t.width == control_width)
        return L1Quads((*self.runs, (context, quads)))

    def __add__(self, later: L1Quads) -> L1Quads:
        return L1Quads(self.runs + later.runs)

    def count(self, context: int) -> int:
        """How many runs measured L = 1 quads at `context`."""
        return sum(1 for c, _ in self.runs if c == context)

    def contexts(self) -> list[int]:
        return sorted({c for c, _ in self.runs})

    def pooled(self, context: int) -> list[Timing]:
        """`context`'s L = 1 timings from every run, rounds renumbered so that no two runs share
        a round (the bootstrap resamples whole rounds)."""
        out: list[Timing] = []
        offset = 0
        for c, run in self.runs:
            if c != context:
                continue
            out += [replace(t, round=t.round + offset) for t in run]
            offset += 1 + max((t.round for t in run), default=0)
        return out

    def pooled_ratio(self, context: int, run_seed: int) -> Interval | None:
        """The paired stock/patched L = 1 ratio over every quad at `context`, bootstrapped on
        one seed per context: the same quads give the same interval wherever they are pooled (a
        sweep's check the budget decides again, the tune that borrows it, `+`). A sampler run's
        own check is bootstrapped on its plan's seed and may read otherwise: what acts on a
        check reads the one the run reports (mlatui.run.phases.decode.check_before_blocks)."""
        return control_ratio(self.pooled(context), ARMS, 1, stable_seed(run_seed, "l1", context))


@dataclass(frozen=True)
class Slices:
    """A budget's time slices: each segment of the plan (its part and context, as
    mlatui.measure.plans names them) ends by its deadline (run seconds); its sampler adds no
    round past it (mlatui.measure.sampler.within), and decode blocks grow up to `grow_to`
    rounds while their slice lasts. Empty without a budget."""

    ends: tuple[tuple[str, int, float], ...] = ()
    grow_to: int = 64

    def deadline(self, part: str, context: int) -> float | None:
        return next((end for p, c, end in self.ends if (p, c) == (part, context)), None)


@dataclass(frozen=True)
class Checks:
    """The run's latest L = 1 check per (phase, context), each phase with its kind: which
    contexts the verdicts leave out (RunEnd's), and which checks a budget or `+` measures."""

    latest: tuple[Validity, ...] = ()
    kinds: tuple[tuple[str, PhaseKind], ...] = ()

    def plus(
        self, checks: Iterable[Validity], kinds: Iterable[tuple[str, PhaseKind]] = ()
    ) -> Checks:
        """With these checks in place of those of their (phase, context), and these kinds."""
        latest = {(v.phase, v.context): v for v in self.latest}
        latest |= {(v.phase, v.context): v for v in checks}
        return Checks(tuple(latest.values()), tuple({**dict(self.kinds), **dict(kinds)}.items()))

    def __add__(self, later: Checks) -> Checks:
        return self.plus(later.latest, later.kinds)

    def undecided(self, last_pass: Pass = Pass.AB) -> list[Validity]:
        """The checks still inconclusive, of phases whose check is the run's, of `last_pass`
        (an A/A run's arms still loaded are its last pass's), by context then phase."""
        latest = {(v.phase, v.context): v for v in self.latest}
        return undecided_checks(latest, dict(self.kinds), last_pass)

    def of_run(self, last_pass: Pass = Pass.AB) -> list[Validity]:
        """Every check of those phases, whatever it reads: the same list on every rank."""
        latest = {(v.phase, v.context): v for v in self.latest}
        return run_checks(latest, dict(self.kinds), last_pass)

    def invalid_contexts(self) -> tuple[int, ...]:
        """The contexts a model phase's latest check leaves out of every verdict (invalid or
        inconclusive; an indexer phase's check leaves out only its own figures): RunEnd's."""
        kinds = dict(self.kinds)
        return tuple(
            sorted({v.context for v in self.latest if not v.valid and _gates(kinds.get(v.phase))})
        )


def _gates(kind: PhaseKind | None) -> bool:
    return kind is not None and kind.rules.run_check


@dataclass(frozen=True)
class PhaseResult:
    """A phase's summary and what later phases and the run's end may read of it: the L = 1
    quads it measured, its L = 1 checks as they ended and, for a sweep, its final estimates per
    context length."""

    summary: PhaseSummary
    l1: L1Quads = L1Quads()
    estimates: tuple[tuple[int, ContextEstimates], ...] = ()
    checks: tuple[Validity, ...] = ()
    # (label, context length, estimates) of every sampler run it ended: an A/A run's harness
    # bias is read from them
    finals: tuple[tuple[str, int, ContextEstimates], ...] = ()
    added_s: float = 0.0  # its rounds past the planned ones (SamplerRun.added_s), in seconds


class Need(enum.Enum):
    """What of the pass so far a phase kind reads."""

    L1_QUADS = "every L = 1 quad measured so far (the checks pool them)"
    SWEEP_ESTIMATES = "the sweeps' final estimates (a decode phase's `verify_from`)"


@dataclass(frozen=True)
class PhaseInputs:
    """What a phase receives besides the run's environment: what it declared it needs of the
    earlier phases, and a budget's time slices."""

    l1: L1Quads = L1Quads()
    sweeps: tuple[tuple[str, int, ContextEstimates], ...] = ()  # (phase, length, estimates)
    slices: Slices = Slices()

    def sweep_estimates(self, phase: str, length: int) -> ContextEstimates | None:
        return next((e for p, c, e in reversed(self.sweeps) if (p, c) == (phase, length)), None)


@dataclass(frozen=True)
class PassResults:
    """A pass so far: every L = 1 quad (in the order measured), the sweeps' estimates, the
    checks, the sampler runs' final estimates and the seconds of rounds past the planned ones."""

    l1: L1Quads = L1Quads()
    sweeps: tuple[tuple[str, int, ContextEstimates], ...] = ()
    checks: Checks = Checks()
    finals: tuple[tuple[str, int, ContextEstimates], ...] = ()
    added_s: float = 0.0

    def after(self, result: PhaseResult) -> PassResults:
        s = result.summary
        sweeps = (*self.sweeps, *((s.phase, c, e) for c, e in result.estimates))
        kind = PhaseKind.of(s.kind)
        checks = self.checks.plus(result.checks, [(s.phase, kind)] if kind else [])
        return PassResults(
            self.l1 + result.l1,
            sweeps,
            checks,
            (*self.finals, *result.finals),
            self.added_s + result.added_s,
        )

    def inputs(self, needs: frozenset[Need], slices: Slices = Slices()) -> PhaseInputs:
        """What a phase that declared `needs` receives."""
        return PhaseInputs(
            self.l1 if Need.L1_QUADS in needs else L1Quads(),
            self.sweeps if Need.SWEEP_ESTIMATES in needs else (),
            slices,
        )
