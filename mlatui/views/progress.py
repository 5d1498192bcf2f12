"""Honest progress: per-phase and whole-run ETA from the measured cost of each (context, width)
already seen, extrapolated to the planned remaining work; elapsed time; a stall flag; model
loading as its own phase. A pure fold of events (no mlx, no textual), fed by DashboardState.

The plan comes from each PhaseStart's `plan` (mlatui.measure.plans segments) or, for recordings made
before it existed, from the header's scenario through the same functions. Wall time per unit of
measured compute (settle steps, estimates, hand-over) is learned from the gaps between events;
the set-up of a segment (prefill, warm-up) from the gap before its first event. Where the plan is
adaptive (rounds added while the L = 1 check is inconclusive) the ETA is a range: the point
expects each context to need the share of its possible extra rounds that the run's earlier
contexts needed (half, before any has decided), the high end every context at its most rounds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from mlatui.measure.plans import Segment, Setting, phase_segments
from mlatui.stream.events import (
    ARMS,
    BudgetPlanned,
    DecodeBlock,
    Estimate,
    Event,
    LoadProgress,
    LoadStart,
    PhaseStart,
    Progress,
    RunHeader,
    SpecStep,
    Step,
)
from mlatui.views.loading_view import LoadView
from mlatui.views.progress_costs import Cost, CostTable, add, scale

PRIOR_OVERHEAD = {False: 1.3, True: 1.05}  # wall s per measured s (steps, blocks) until seen
STALL_MIN_S = 10.0
STALL_FACTOR = 5.0  # times the slowest gap between steps seen


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
        f = lambda x: max(0.0, x - s)  # noqa: E731
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


class RunProgress:
    def __init__(self) -> None:
        self.phases: list[PhaseRun] = []
        self.costs = CostTable()
        # inside segments, between consecutive timed events, for steps [False] and blocks [True]
        self.wall_s = {False: 0.0, True: 0.0}
        self.compute_s = {False: 0.0, True: 0.0}  # the measured compute of the same events
        self.prefill: list[tuple[float, float]] = []  # (context, set-up s beyond warm-up)
        self.slowest_gap_s = 0.0
        self.last_activity_t: float | None = None
        self.load: LoadView | None = None
        self.draft_kinds: tuple[str, ...] = ("",)  # the run's draft kinds; "": one, unnamed
        self._passes: list[str] = [""]
        self._settle = True
        self.outcomes: dict[tuple[str, int], str] = {}  # (part, context): the check as it stands
        self._current: tuple[int, int] | None = None  # (phase index, segment index)
        self._cache: tuple[Eta, Eta] | None = None
        self._dirty = True

    # -- folding ----------------------------------------------------------------------------

    def apply(self, e: Event) -> None:
        if isinstance(e, (Step, DecodeBlock, SpecStep)):
            self._timed(e)
        elif isinstance(e, PhaseStart):
            self._phase_start(e)
        elif isinstance(e, Estimate):
            self.outcomes[(e.phase, e.context)] = e.outcome
        elif isinstance(e, Progress):
            p = self._phase(e.phase)
            if p is not None:
                p.done, p.total = e.done, e.total
        elif isinstance(e, RunHeader):
            self._header(e)
        elif isinstance(e, BudgetPlanned):
            self._budget(e)
        elif isinstance(e, (LoadStart, LoadProgress)):
            self._load(e)
            return
        else:
            return
        self._dirty = True

    def _header(self, h: RunHeader) -> None:
        kinds = (h.settings or {}).get("draft_kinds")
        has_draft = h.draft not in ("none", "")
        self.draft_kinds = tuple(kinds) if kinds is not None else ("",) if has_draft else ()
        self._passes = (h.settings or {}).get("passes") or [""]
        self._settle = bool((h.settings or {}).get("settle", True))
        self._plan_from((h.scenario or {}).get("phases") or [])

    def _budget(self, e: BudgetPlanned) -> None:
        """The phases that will run once the budget scaled the scenario down (not yet started
        ones; the header still describes the scenario as written)."""
        if not any(p.started_t is not None for p in self.phases):
            self.phases = []
            self._plan_from(list(e.phases))

    def _plan_from(self, raw: list[dict]) -> None:
        from dataclasses import replace

        from mlatui.config.scenario import parse_phase

        for tag in self._passes:
            for i, d in enumerate(raw):
                try:
                    phase = parse_phase("header", {k: v for k, v in d.items() if k != "name"}, i)
                except Exception:  # noqa: BLE001 - an old or odd scenario: no forecast for it
                    continue
                name = f"{d.get('name')}/{tag}" if tag else str(d.get("name"))
                phase = replace(phase, name=name)
                segs = phase_segments(phase, self.draft_kinds, self._settle)
                self.phases.append(
                    PhaseRun(
                        name,
                        phase.kind,
                        [SegmentRun(s) for s in segs],
                        sum(s.planned_calls for s in segs),
                    )
                )

    def _phase(self, name: str) -> PhaseRun | None:
        return next((p for p in self.phases if p.name == name), None)

    def _phase_start(self, e: PhaseStart) -> None:
        p = self._phase(e.phase)
        if p is None:
            p = PhaseRun(e.phase, e.kind, [])
            self.phases.append(p)
        if e.plan:
            p.segments = [SegmentRun(Segment.from_dict(d)) for d in e.plan]
        if sum(s.seg.planned_calls for s in p.segments) != e.planned_steps:
            p.segments = []  # not the plan the engine ran: fall back to the phase's rate
        p.planned, p.total, p.started_t = e.planned_steps, e.planned_steps, e.t
        for q in self.phases[: self.phases.index(p)]:
            q.finished = True
            for s in q.segments:
                s.done = True
        self.last_activity_t = e.t
        self._current = (self.phases.index(p), -1)

    def _timed(self, e: Step | DecodeBlock | SpecStep) -> None:
        if isinstance(e, Step):
            self.costs.add_step(e.arm, e.context, e.width, e.ms)
            ms = e.ms
        elif isinstance(e, DecodeBlock):
            self.costs.add_block(
                e.arm, e.context, Setting(e.draft_kind, e.depth), e.tokens, e.ms, len(e.accepted)
            )
            ms = e.ms
        else:
            ms = e.draft_ms + e.verify_ms
        run = self._find(e.phase, e.context)
        prev_t = self.last_activity_t
        if run is not None:
            if run.calls == 0:
                run.start_t = prev_t if prev_t is not None else e.t
                self._setup_seen(run, e.t - run.start_t)
            elif run.last_t is not None:
                gap = e.t - run.last_t
                blocks = bool(run.seg.tokens)
                self.wall_s[blocks] += gap
                self.compute_s[blocks] += ms / 1e3
                self.slowest_gap_s = max(self.slowest_gap_s, gap)
            run.first_t = run.first_t if run.first_t is not None else e.t
            run.last_t = e.t
            run.calls += 1
        self.last_activity_t = e.t

    def _find(self, part: str, context: int) -> SegmentRun | None:
        """The segment an event belongs to: the current one, or a later one of its phase
        (earlier segments are then done)."""
        if self._current is None:
            return None
        pi, si = self._current
        segs = self.phases[pi].segments
        if 0 <= si < len(segs) and segs[si].seg.part == part and segs[si].seg.context == context:
            return segs[si]
        for j in range(max(si, 0), len(segs)):
            s = segs[j].seg
            if s.part == part and (s.context == context or j > si):
                for k in range(0, j):
                    segs[k].done = True
                self._current = (pi, j)
                return segs[j]
        return None

    def _setup_seen(self, run: SegmentRun, gap_s: float) -> None:
        self.slowest_gap_s = max(self.slowest_gap_s, gap_s)
        if run.seg.opens_context:
            warm = self._warmup(run.seg)
            self.prefill.append((run.seg.context, max(0.0, gap_s - (warm[1] if warm else 0.0))))

    def _load(self, e: LoadStart | LoadProgress) -> None:
        if isinstance(e, LoadStart):
            self.load = LoadView.start(e)
        elif self.load is not None:
            self.load.progress(e)
        self.last_activity_t = e.t

    # -- forecasting ------------------------------------------------------------------------

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
        """ms of one timed call of `width` in `seg`, both arms averaged."""
        costs = []
        for arm in ARMS:
            c = (
                self.costs.block(arm, seg.context, seg.setting(width), seg.tokens)
                if seg.tokens
                else self.costs.step(arm, seg.context, width)
            )
            if c is None:
                return None
            costs.append(c)
        return scale(add(costs[0], costs[1]), 0.5)

    def _round_cost(self, seg: Segment) -> Cost | None:
        total: Cost = (0.0, 0.0, 0.0)
        for width, n in seg.calls:
            c = self._call_cost(seg, width)
            if c is None:
                return None
            total = add(total, scale(c, n))
        return total

    def _warmup(self, seg: Segment) -> Cost | None:
        total: Cost = (0.0, 0.0, 0.0)
        for width, _ in seg.calls:
            c = self._call_cost(seg, width)
            if c is None:
                return None
            total = add(total, scale(c, 2 * seg.warmup / 1e3))
        return total

    def _segment_left(self, run: SegmentRun) -> tuple[Cost, int] | None:
        """Seconds left in a segment (set-up included when it has not started) and the rounds
        the check may still add. Expected extra rounds: at each remaining decision the check
        asks for two more with the share this run's earlier segments did."""
        seg = run.seg
        round_ms = self._round_cost(seg)
        if round_ms is None or not seg.per_round:
            return None
        overhead = self.overhead(bool(seg.tokens))
        per_call = scale(round_ms, overhead / 1e3 / seg.per_round)
        lo, hi = run.rounds()
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

    def forecast_s(self, phases, settle: bool = True) -> float:
        """Seconds the given phases would take from scratch with the costs seen so far (the
        budget planner's forecast); inf when some segment has no cost model."""
        total = 0.0
        for phase in phases:
            for seg in phase_segments(phase, self.draft_kinds, settle):
                got = self._segment_left(SegmentRun(seg))
                if got is None:
                    return math.inf
                total += got[0][1]
        return total

    def _prefill(self, context: int) -> Cost:
        from mlatui.views.progress_costs import extrapolate

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

    # -- what the header shows --------------------------------------------------------------

    def steps(self) -> tuple[int, int]:
        """(done, planned) timed calls of the whole run; planned grows as rounds are added."""
        done = sum(p.done for p in self.phases)
        total = sum(p.total or p.planned for p in self.phases)
        return done, total

    def stall_threshold_s(self) -> float:
        return max(STALL_MIN_S, STALL_FACTOR * self.slowest_gap_s)

    def stalled_s(self, now_t: float | None) -> float | None:
        """Seconds without a step (or a load progress) when past the threshold, else None."""
        if now_t is None or self.last_activity_t is None:
            return None
        quiet = now_t - self.last_activity_t
        return quiet if quiet >= self.stall_threshold_s() else None
