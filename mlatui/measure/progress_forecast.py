"""Seconds left, forecast from the costs a run has measured so far and the work its plan has left.

Wall time per unit of measured compute (settle steps, estimates, hand-over) is learned from the
gaps between events; the set-up of a segment (prefill, warm-up) from the gap before its first
event. Where the plan is adaptive (rounds added while the L = 1 check is inconclusive) the ETA is
a range: the point expects each context to need the share of its possible extra rounds that the
run's earlier contexts needed (half, before any has decided), the high end every context at its
most rounds.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from mlatui.config.scenario import Phase
from mlatui.measure.bound import likely_rejected
from mlatui.measure.plans import Segment, Setting, phase_segments
from mlatui.measure.progress_costs import Cost, CostTable, add, scale
from mlatui.stream.events import ARMS

# wall s per measured s (steps, blocks) until seen; a step segment's settle steps (two untimed
# L = 1 steps before every quad) are counted as compute of their own (on the 2-core CPU wall time
# was 1.00-1.06x the timed steps plus those, with OpenBLAS and with the reference BLAS)
PRIOR_OVERHEAD = {False: 1.06, True: 1.05}


@dataclass(frozen=True)
class Eta:
    """Seconds left: `mid` is the estimate, `low`..`high` its range; `extra_rounds` the rounds the
    adaptive check may still add; `partial` when some planned work has no cost model yet."""

    low: float
    mid: float
    high: float
    extra_rounds: int = 0
    partial: bool = False

    def minus(self, s: float) -> Eta:
        def f(x: float) -> float:
            return max(0.0, x - s)

        return Eta(f(self.low), f(self.mid), f(self.high), self.extra_rounds, self.partial)


@dataclass
class SegmentRun:
    seg: Segment
    start_t: float | None = None
    first_t: float | None = None
    last_t: float | None = None
    calls: int = 0
    done: bool = False

    def rounds(self) -> tuple[int, int]:
        """(fewest, most) rounds this segment can still end with, given what it has run."""
        s = self.seg
        started = math.ceil(self.calls / s.per_round) if s.per_round else 0
        base = max(s.first_rounds, started + started % 2)
        return base, max(base, s.last_round)


@dataclass
class PhaseRun:
    name: str
    kind: str
    segments: list[SegmentRun]
    planned: int = 0
    done: int = 0
    total: int = 0
    started_t: float | None = None
    finished: bool = False

    @property
    def modelled(self) -> bool:
        return bool(self.segments)


class Forecast:
    """The forecasting half of RunProgress: reads the phases, costs, gaps and outcomes it folds."""

    phases: list[PhaseRun]
    costs: CostTable
    wall_s: dict[bool, float]
    compute_s: dict[bool, float]
    prefill: list[tuple[float, float]]
    draft_kinds: tuple[str, ...]
    _settle: bool
    outcomes: dict[tuple[str, int], str]
    last_activity_t: float | None
    _current: tuple[int, int] | None
    _cache: tuple[Eta, Eta] | None
    _dirty: bool

    def overhead(self, blocks: bool) -> float:
        """Wall seconds per second of measured compute, for steps (settle steps, estimates and
        hand-over between them) or decode blocks."""
        wall, compute = self.wall_s[blocks], self.compute_s[blocks]
        return wall / compute if compute > 1.0 else PRIOR_OVERHEAD[blocks]

    def _continue_share(self, blocks: bool) -> float:
        """How often an inconclusive check asked for two more rounds, in this run's finished
        segments of the same sort (steps or blocks); Laplace's prior of one each way."""
        more = stops = 0
        for p in self.phases:
            for s in p.segments:
                seg = s.seg
                if not s.done or not s.calls or seg.last_round <= seg.first_rounds:
                    continue
                if bool(seg.tokens) != blocks:
                    continue
                rounds = round(s.calls / seg.per_round)
                more += max(0, (rounds - seg.first_rounds) // 2)
                stops += rounds < seg.last_round
        return (more + 1) / (more + stops + 2)

    def _call_cost(self, seg: Segment, width: int) -> Cost | None:
        """ms of one timed call of `width` in `seg`, averaged over the arms that run it."""
        costs: list[Cost] = []
        arms = seg.arms_at(width)
        for arm in arms:
            c = (
                self.costs.block(arm, seg.context, seg.setting(width), seg.tokens)
                if seg.tokens
                else self.costs.step(arm, seg.context, width)
            )
            if c is None:
                return None
            costs.append(c)
        total: Cost = (0.0, 0.0, 0.0)
        for c in costs:
            total = add(total, c)
        return scale(total, 1 / len(costs)) if costs else (0.0, 0.0, 0.0)

    def _round_cost(self, seg: Segment, settle: bool = True) -> Cost | None:
        total: Cost = (0.0, 0.0, 0.0)
        for width, n in seg.calls:
            c = self._call_cost(seg, width)
            if c is None:
                return None
            total = add(total, scale(c, n))
        if settle and not seg.tokens and 1 in dict(seg.calls):
            one = self._call_cost(seg, 1)
            if one is not None:  # two untimed L = 1 steps before each quad
                total = add(total, scale(one, 2 * seg.per_round / 4))
        untimed = self._untimed_round(seg)
        return add(total, untimed) if untimed is not None else None

    def _untimed_round(self, seg: Segment) -> Cost | None:
        """ms of one round's untimed plain blocks, one in each rejected (skipped) block's place;
        None when a plain block's cost is not known yet."""
        total: Cost = (0.0, 0.0, 0.0)
        calls = dict(seg.calls)
        for arm, width in seg.skipped:
            plain = self.costs.block(arm, seg.context, Setting(), seg.tokens)
            if plain is None:
                return None
            total = add(total, scale(plain, calls.get(width, 0)))
        return total

    def untimed_per_call_s(self, seg: Segment) -> float:
        """Seconds of the untimed plain blocks per timed call of `seg`: `_round_cost` counts
        them, so the wall time learned between timed blocks must not count them again (the
        overhead read 1.5x and the tune's ETA ran 30-60% high)."""
        untimed = self._untimed_round(seg) if seg.skipped and seg.per_round else None
        return untimed[1] / seg.per_round / 1e3 if untimed is not None else 0.0

    def _warmup(self, seg: Segment) -> Cost | None:
        total: Cost = (0.0, 0.0, 0.0)
        for width, _ in seg.calls:
            c = self._call_cost(seg, width)
            if c is None:
                return None
            total = add(total, scale(c, len(seg.arms_at(width)) * seg.warmup / 1e3))
        return total

    def expected(self, seg: Segment) -> Segment:
        """The block segment as it is expected to run: before the engine has said which of its
        settings its bound rejects, those the costs seen so far say it will
        (mlatui.measure.bound.likely_rejected) run no blocks."""
        if not seg.tokens or seg.skipped or not seg.bound_rejects:
            return seg
        for width, _, depth in seg.settings:
            if not depth:
                continue
            for arm in ARMS:
                plain = self.costs.step(arm, seg.context, 1)
                verify = self.costs.step(arm, seg.context, depth + 1)
                if plain and verify and likely_rejected(depth, plain[1], verify[1]):
                    seg = seg.without(arm, width)
        return seg

    def _segment_left(self, run: SegmentRun, settle: bool | None = None) -> tuple[Cost, int] | None:
        """Seconds left in a segment (set-up included when it has not started) and the rounds
        the check may still add. Expected extra rounds: at each remaining decision the check
        asks for two more with the share this run's earlier segments did."""
        seg = run.seg if run.calls else self.expected(run.seg)
        round_ms = self._round_cost(seg, self._settle if settle is None else settle)
        if round_ms is None or not seg.per_round:
            return None
        overhead = self.overhead(bool(seg.tokens))
        per_call = scale(round_ms, overhead / 1e3 / seg.per_round)
        lo, hi = SegmentRun(seg, calls=run.calls).rounds()
        q = self._continue_share(bool(seg.tokens))
        if run.calls and self.outcomes.get((seg.part, seg.context)) in ("valid", "invalid"):
            q = 0.0  # the check reads decided now: expect it to stop at its next decision
        mid = lo + 2 * sum(q**k for k in range(1, (hi - lo) // 2 + 1))
        left = [max(0.0, r * seg.per_round - run.calls) for r in (lo, mid, hi)]
        out: Cost = (per_call[0] * left[0], per_call[1] * left[1], per_call[2] * left[2])
        if run.calls == 0:
            warm = self._warmup(seg) or (0.0, 0.0, 0.0)
            out = add(out, scale(warm, overhead))
            if seg.opens_context:
                out = add(out, self._prefill(seg.context))
        return out, hi - lo

    def segment_s(self, seg: Segment, settle: bool = True, high: bool = False) -> float:
        """Seconds a segment would take from scratch (set-up included) with the costs seen so
        far; inf when it has no cost model. `high`: the high end."""
        got = self._segment_left(SegmentRun(seg), settle)
        return got[0][2 if high else 1] if got is not None else math.inf

    def forecast_s(self, phases: Sequence[Phase], settle: bool = True, high: bool = False) -> float:
        """Seconds the given phases would take from scratch (the budget's forecast)."""
        segs = (s for p in phases for s in phase_segments(p, self.draft_kinds, settle))
        return sum(self.segment_s(s, settle, high) for s in segs)

    def _prefill(self, context: int) -> Cost:
        from mlatui.measure.progress_costs import extrapolate

        return extrapolate(self.prefill, context) or (0.0, 0.0, 0.0)

    def _phase_left(self, p: PhaseRun, now_t: float) -> tuple[Eta, bool]:
        """(seconds left, modelled) for one phase; a phase without a cost model yet uses its
        own rate (elapsed / done x left) once started."""
        total: Cost = (0.0, 0.0, 0.0)
        extra = 0
        if p.modelled and not self.costs.empty:
            ok = True
            for run in p.segments:
                if run.done:
                    continue
                got = self._segment_left(run)
                if got is None:
                    ok = False
                    break
                total, extra = add(total, got[0]), extra + got[1]
            if ok:
                return Eta(total[0], total[1], total[2], extra), True
        if p.started_t is not None and p.done and p.total:
            rate = (now_t - p.started_t) / p.done
            left = rate * max(0, p.total - p.done)
            return Eta(left, left, left), True
        return Eta(0.0, 0.0, 0.0, 0, True), False

    def eta(self, now_t: float | None = None) -> tuple[Eta | None, Eta | None]:
        """(this phase, whole run) seconds left at `now_t` (the latest event when None)."""
        if self._current is None or self.costs.empty:
            return None, None
        last = self.last_activity_t or 0.0
        if self._dirty or self._cache is None:
            self._cache = self._compute(last)
            self._dirty = False
        since = max(0.0, (now_t if now_t is not None else last) - last)
        return self._cache[0].minus(since), self._cache[1].minus(since)

    def _compute(self, now_t: float) -> tuple[Eta, Eta]:
        pi = self._current[0] if self._current else 0
        phase_eta: Eta | None = None
        lo = mid = hi = 0.0
        extra, partial = 0, False
        for i, p in enumerate(self.phases):
            if p.finished or i < pi:
                continue
            got, modelled = self._phase_left(p, now_t)
            if i == pi:
                phase_eta = got
            lo, mid, hi = lo + got.low, mid + got.mid, hi + got.high
            extra += got.extra_rounds
            partial |= not modelled
        phase_eta = phase_eta or Eta(0.0, 0.0, 0.0)
        return phase_eta, Eta(lo, mid, hi, extra, partial)
