"""Progress and the forecast, a pure fold of events (no mlx, no textual): phases and segments as
planned (the header's `phase_plans`, a BudgetPlanned's, then each PhaseStart's `plan`) and as
run, the costs seen, stalls, loading and the seconds left. The budget forecasts with the same
model from its probe's steps (`forecast_s`, `segment_s`).

A segment's time is its timed calls at the costs seen, times the wall seconds per measured second
seen between events (settle steps, estimates, hand-over), plus its set-up (prefill, warm-up). A
cost is a (low, mid, high) triple of ms: a context not measured is extrapolated along the context
axis, a decode block not seen is built from its context's synced steps. Where an undecided L = 1
check may add rounds, the point expects the share of extra rounds the run's earlier segments
took (half before any ended), the high end every round: the ETA is a range.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from mlatui.config.scenario import Phase
from mlatui.measure.bound import likely_rejected
from mlatui.measure.loading import LoadView
from mlatui.measure.plans import Segment, Setting, phase_segments
from mlatui.stream.events import (
    ARMS,
    BudgetPlanned,
    DecodeBlock,
    DecodeResult,
    Estimate,
    Event,
    LoadProgress,
    LoadStart,
    PhasePlan,
    PhaseStart,
    Progress,
    RunHeader,
    Step,
)

Cost = tuple[float, float, float]  # (low, mid, high)
NONE: Cost = (0.0, 0.0, 0.0)
PRIOR_ACCEPT = 0.5  # per draft position, until a block of that depth is seen
PRIOR_DRAFT_SHARE = 0.25  # a drafted token, as a share of the target's L = 1 step
# wall s per measured s until seen, for steps [False] (their settle steps count as compute) and
# blocks [True]: 1.00-1.06 on the 2-core CPU, with OpenBLAS and with the reference BLAS
PRIOR_OVERHEAD = {False: 1.06, True: 1.05}
STALL_MIN_S = 10.0
STALL_FACTOR = 5.0  # times the slowest gap between steps seen


def scale(c: Cost, k: float) -> Cost:
    return (c[0] * k, c[1] * k, c[2] * k)


def add(a: Cost, b: Cost) -> Cost:
    return (a[0] + b[0], a[1] + b[1], a[2] + b[2])


def weighted(parts: Iterable[tuple[Cost | None, float]]) -> Cost | None:
    """The sum of each cost times its weight; None when a cost is not known."""
    out = NONE
    for c, k in parts:
        if c is None:
            return None
        out = add(out, scale(c, k))
    return out


def extrapolate(points: Sequence[tuple[float, float]], x: float) -> Cost | None:
    """y at x from measured (x, y) points: interpolated inside them; outside, a least-squares line
    (slope >= 0, intercept >= 0), with growth in proportion from the nearest point as the high
    end. One point: constant .. proportional."""
    pts = sorted(points)
    if not pts:
        return None
    for (x0, y0), (x1, y1) in zip(pts, pts[1:], strict=False):
        if x0 <= x <= x1:
            y = y0 if x1 == x0 else y0 + (y1 - y0) * (x - x0) / (x1 - x0)
            return (y, y, y)
    below = x < pts[0][0]
    x0, y0 = pts[0] if below else pts[-1]
    prop = y0 * x / x0 if x0 > 0 else y0
    if len(pts) == 1:
        lo, hi = sorted((y0, prop))
        return (lo, (lo + hi) / 2, hi)
    a, b = _line(pts)
    mid = max(0.0, a + b * x)
    return (min(y0, prop, mid), mid, max(y0, prop, mid)) if below else (mid, mid, max(mid, prop))


def _line(pts: Sequence[tuple[float, float]]) -> tuple[float, float]:
    n = len(pts)
    mx = sum(p[0] for p in pts) / n
    my = sum(p[1] for p in pts) / n
    sxx = sum((p[0] - mx) ** 2 for p in pts)
    b = max(0.0, sum((p[0] - mx) * (p[1] - my) for p in pts) / sxx) if sxx else 0.0
    a = my - b * mx
    if a < 0:  # through the origin instead
        b = sum(p[0] * p[1] for p in pts) / sum(p[0] ** 2 for p in pts)
        a = 0.0
    return a, b


class CostTable:
    """Mean ms per (arm, context, width) of synced steps and per token of decode blocks, with each
    setting's tokens per verify step: an MTP head and a draft model accept and cost differently."""

    def __init__(self) -> None:
        self.steps: dict[tuple[str, int, int], list[float]] = {}  # -> [sum ms, n]
        self.blocks: dict[tuple[str, int, Setting], list[float]] = {}  # -> [sum ms, tokens]
        self.verify_steps: dict[Setting, list[int]] = {}  # -> [tokens emitted, verify steps]

    def add_step(self, arm: str, context: int, width: int, ms: float) -> None:
        cell = self.steps.setdefault((arm, context, width), [0.0, 0])
        cell[0] += ms
        cell[1] += 1

    def add_block(
        self, arm: str, context: int, setting: Setting, tokens: int, ms: float, verifies: int
    ) -> None:
        setting = setting if setting.depth else Setting()  # plain decode: one setting
        cell = self.blocks.setdefault((arm, context, setting), [0.0, 0])
        cell[0] += ms
        cell[1] += tokens
        if setting.depth and verifies:
            v = self.verify_steps.setdefault(setting, [0, 0])
            v[0] += tokens
            v[1] += verifies

    @property
    def empty(self) -> bool:
        return not self.steps and not self.blocks

    def step(self, arm: str, context: int, width: int) -> Cost | None:
        cell = self.steps.get((arm, context, width))
        if cell:
            m = cell[0] / cell[1]
            return (m, m, m)
        points = [(c, s / n) for (a, c, w), (s, n) in self.steps.items() if a == arm and w == width]
        if len(points) == 1 and width > 1 and context > points[0][0]:
            got = self._wider_from_one(arm, context, *points[0])
            if got is not None:
                return got
        if points:
            return extrapolate(points, context)
        lower = sorted({w for (a, _, w) in self.steps if a == arm and w < width}, reverse=True)
        return self.step(arm, context, lower[0]) if lower else None

    def _wider_from_one(self, arm: str, context: int, c0: int, y0: float) -> Cost | None:
        """A wide step seen at one shorter context only: its cost over the L = 1 step's (the stock
        arm re-expanding the cache, the extra queries' attention) grows in proportion to the
        context (a slow device's probe sees one length: extrapolated as any other, the stock
        arm's verify steps at 4x the length read ~60% of their cost)."""
        cell = self.steps.get((arm, c0, 1))
        one = self.step(arm, context, 1)
        if not cell or one is None:
            return None
        extra = max(0.0, y0 - cell[0] / cell[1])
        grown = extra * context / c0
        return (one[0] + extra, one[1] + grown, max(one[2] + grown, y0 * context / c0))

    def tokens_per_verify(self, setting: Setting) -> float:
        seen = self.verify_steps.get(setting)
        if seen and seen[1]:
            return seen[0] / seen[1]
        return 1 + sum(PRIOR_ACCEPT**i for i in range(1, setting.depth + 1))

    def block(self, arm: str, context: int, setting: Setting, tokens: int) -> Cost | None:
        """A block's ms: as seen; else along the context axis from this setting's blocks; else
        its synced steps (depth d: its verify steps at L = d + 1, d drafted tokens each)."""
        setting = setting if setting.depth else Setting()
        cell = self.blocks.get((arm, context, setting))
        if cell and cell[1]:
            m = cell[0] / cell[1] * tokens
            return (m, m, m)
        points = [
            (c, ms / n)
            for (a, c, st), (ms, n) in self.blocks.items()
            if (a, st) == (arm, setting) and n
        ]
        if points:
            got = extrapolate(points, context)
            return scale(got, tokens) if got else None
        one, d = self.step(arm, context, 1), setting.depth
        if one is None or d == 0:
            return scale(one, tokens) if one else None
        verify = self.step(arm, context, d + 1) or one
        per_verify = add(verify, scale(one, d * PRIOR_DRAFT_SHARE))
        return scale(per_verify, tokens / self.tokens_per_verify(setting))


@dataclass(frozen=True)
class Eta:
    """Seconds left: `mid`, in `low`..`high`; `extra_rounds` the rounds undecided checks may
    still add; `partial` when some planned work has no cost model yet."""

    low: float
    mid: float
    high: float
    extra_rounds: int = 0
    partial: bool = False

    def minus(self, s: float) -> Eta:
        low, mid, high = (max(0.0, x - s) for x in (self.low, self.mid, self.high))
        return Eta(low, mid, high, self.extra_rounds, self.partial)


@dataclass
class SegmentRun:
    seg: Segment
    start_t: float | None = None
    last_t: float | None = None
    calls: int = 0
    done: bool = False


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


def _planned_phase(p: PhasePlan) -> PhaseRun:
    runs = [SegmentRun(seg) for seg in p.plan]
    return PhaseRun(p.phase, p.kind, runs, sum(r.seg.planned_calls for r in runs))


class RunProgress:
    """The fold: phases and segments as planned and as run, the costs seen, the run's activity."""

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
        self.outcomes: dict[tuple[str, int], str] = {}  # (part, context): the check as it stands
        self._settle = True
        self._current: tuple[int, int] | None = None  # (phase index, segment index)
        self._cache: tuple[Eta, Eta] | None = None

    def apply(self, e: Event) -> None:
        match e:
            case Step() | DecodeBlock():
                self._timed(e)
            case PhaseStart():
                self._phase_start(e)
            case Estimate():
                self.outcomes[(e.phase, e.context)] = e.outcome
            case Progress():
                for p in self.phases:
                    if p.name == e.phase:
                        p.done, p.total = e.done, e.total
            case RunHeader():
                kinds = e.settings.draft_kinds
                has_draft = e.draft not in ("none", "")
                self.draft_kinds = kinds if kinds is not None else ("",) * has_draft
                self._settle = e.settings.settles
                self.phases = [_planned_phase(p) for p in e.phase_plans]
            case BudgetPlanned():  # the phases not started yet, as planned (again)
                started = [p for p in self.phases if p.started_t is not None]
                names = {p.name for p in started}
                self.phases = started + [
                    _planned_phase(p) for p in e.phase_plans if p.phase not in names
                ]
            case LoadStart():
                self.load = LoadView.start(e)
                self.last_activity_t = e.t
                return
            case LoadProgress():
                if self.load is not None:
                    self.load.progress(e)
                self.last_activity_t = e.t
                return
            case DecodeResult(measured=False):  # rejected by bound: its arm runs no blocks here
                for run in (s for p in self.phases for s in p.segments):
                    if (run.seg.part, run.seg.context) == (e.phase, e.context) and run.seg.tokens:
                        for width, kind, depth in run.seg.settings:
                            if (depth, kind) == (e.depth, e.draft_kind):
                                run.seg = run.seg.without(e.arm, width)
            case _:
                return
        self._cache = None

    def _phase_start(self, e: PhaseStart) -> None:
        p = next((p for p in self.phases if p.name == e.phase), None)
        if p is None:
            p = PhaseRun(e.phase, e.kind, [])
            self.phases.append(p)
        if e.plan:
            p.segments = [SegmentRun(seg) for seg in e.plan]
        if sum(r.seg.planned_calls for r in p.segments) != e.planned_steps:
            p.segments = []  # not the plan the engine ran: the phase's own rate
        p.planned, p.total, p.started_t = e.planned_steps, e.planned_steps, e.t
        i = self.phases.index(p)
        for q in self.phases[:i]:
            q.finished = True
            for s in q.segments:
                s.done = True
        self.last_activity_t = e.t
        self._current = (i, -1)

    def _timed(self, e: Step | DecodeBlock) -> None:
        if isinstance(e, Step):
            self.costs.add_step(e.arm, e.context, e.width, e.ms)
        elif isinstance(e, DecodeBlock):
            setting = Setting(e.draft_kind, e.depth)
            self.costs.add_block(e.arm, e.context, setting, e.tokens, e.ms, len(e.accepted))
        ms = e.ms
        run, prev_t = self._find(e.phase, e.context), self.last_activity_t
        self.last_activity_t = e.t
        if run is None:
            return
        if run.calls == 0:
            run.start_t = prev_t if prev_t is not None else e.t
            gap_s = e.t - run.start_t
            self.slowest_gap_s = max(self.slowest_gap_s, gap_s)
            if run.seg.opens_context:
                warm = self._warmup(run.seg)
                self.prefill.append((run.seg.context, max(0.0, gap_s - (warm[1] if warm else 0))))
        elif run.last_t is not None:
            gap_s, blocks = e.t - run.last_t, bool(run.seg.tokens)
            self.wall_s[blocks] += gap_s
            self.compute_s[blocks] += ms / 1e3
            if blocks:  # the gap also held its share of untimed plain blocks (_round_cost's)
                self.compute_s[blocks] += self._untimed_per_call_s(run.seg)
            elif self._settle and isinstance(e, Step):  # and its share of settle steps
                one = self.costs.step(e.arm, e.context, 1)
                self.compute_s[blocks] += one[1] / 2 / 1e3 if one else 0.0
            self.slowest_gap_s = max(self.slowest_gap_s, gap_s)
        run.last_t = e.t
        run.calls += 1

    def _find(self, part: str, context: int) -> SegmentRun | None:
        """The segment an event belongs to: the current one, or a later one of its phase (the
        earlier ones are then done)."""
        if self._current is None:
            return None
        pi, si = self._current
        segs = self.phases[pi].segments
        if 0 <= si < len(segs) and (segs[si].seg.part, segs[si].seg.context) == (part, context):
            return segs[si]
        for j in range(max(si, 0), len(segs)):
            s = segs[j].seg
            if s.part == part and (s.context == context or j > si):
                for k in range(j):
                    segs[k].done = True
                self._current = (pi, j)
                return segs[j]
        return None

    def steps(self) -> tuple[int, int]:
        """(done, planned) timed calls of the whole run; planned grows as rounds are added."""
        return sum(p.done for p in self.phases), sum(p.total or p.planned for p in self.phases)

    def stall_threshold_s(self) -> float:
        return max(STALL_MIN_S, STALL_FACTOR * self.slowest_gap_s)

    def stalled_s(self, now_t: float | None) -> float | None:
        """Seconds without a step (or a load progress) when past the threshold, else None."""
        if now_t is None or self.last_activity_t is None:
            return None
        quiet = now_t - self.last_activity_t
        return quiet if quiet >= self.stall_threshold_s() else None

    def overhead(self, blocks: bool) -> float:
        """Wall seconds per second of measured compute, for steps or for decode blocks."""
        wall, compute = self.wall_s[blocks], self.compute_s[blocks]
        return wall / compute if compute > 1.0 else PRIOR_OVERHEAD[blocks]

    def _continue_share(self, blocks: bool) -> float:
        """How often an undecided check asked for two more rounds in this run's finished segments
        of the same sort (steps or blocks); Laplace's prior of one each way."""
        more = stops = 0
        for s in (s for p in self.phases for s in p.segments):
            seg = s.seg
            if (
                s.done
                and s.calls
                and seg.last_round > seg.first_rounds
                and bool(seg.tokens) == blocks
            ):
                rounds = round(s.calls / seg.per_round)
                more += max(0, (rounds - seg.first_rounds) // 2)
                stops += rounds < seg.last_round
        return (more + 1) / (more + stops + 2)

    def _call_cost(self, seg: Segment, width: int) -> Cost | None:
        """ms of one timed call of `width` in `seg`, averaged over the arms that run it."""
        arms = seg.arms_at(width)
        costs = (
            self.costs.block(a, seg.context, seg.setting(width), seg.tokens)
            if seg.tokens
            else self.costs.step(a, seg.context, width)
            for a in arms
        )
        total = weighted((c, 1) for c in costs)
        return scale(total, 1 / len(arms)) if total is not None and arms else total

    def _round_cost(self, seg: Segment, settle: bool) -> Cost | None:
        parts = [(self._call_cost(seg, w), float(n)) for w, n in seg.calls]
        if settle and not seg.tokens and 1 in dict(seg.calls):  # two untimed L = 1 steps a quad
            parts.append((self._call_cost(seg, 1), 2 * seg.per_round / 4))
        parts.append((self._untimed_round(seg), 1))
        return weighted(parts)

    def _untimed_round(self, seg: Segment) -> Cost | None:
        """ms of one round's untimed plain blocks, one in each rejected block's place."""
        calls = dict(seg.calls)
        return weighted(
            (self.costs.block(arm, seg.context, Setting(), seg.tokens), calls.get(width, 0))
            for arm, width in seg.skipped
        )

    def _untimed_per_call_s(self, seg: Segment) -> float:
        untimed = self._untimed_round(seg) if seg.skipped and seg.per_round else None
        return untimed[1] / seg.per_round / 1e3 if untimed is not None else 0.0

    def _warmup(self, seg: Segment) -> Cost | None:
        return weighted(
            (self._call_cost(seg, w), len(seg.arms_at(w)) * seg.warmup / 1e3) for w, _ in seg.calls
        )

    def expected(self, seg: Segment) -> Segment:
        """The block segment as it is expected to run: before the engine says which settings its
        bound rejects, those the costs seen say it will (likely_rejected) run no blocks."""
        if not seg.tokens or seg.skipped or not seg.bound_rejects:
            return seg
        for width, _, depth in seg.settings:
            for arm in ARMS if depth else ():
                plain = self.costs.step(arm, seg.context, 1)
                verify = self.costs.step(arm, seg.context, depth + 1)
                if plain and verify and likely_rejected(depth, plain[1], verify[1]):
                    seg = seg.without(arm, width)
        return seg

    def _segment_left(self, run: SegmentRun, settle: bool) -> tuple[Cost, int] | None:
        """Seconds left in a segment (set-up included when not started) and the rounds its check
        may still add: two more at each remaining decision, with the share this run's earlier
        segments took (none once its check reads decided)."""
        seg = run.seg if run.calls else self.expected(run.seg)
        round_ms = self._round_cost(seg, settle)
        if round_ms is None or not seg.per_round:
            return None
        overhead = self.overhead(bool(seg.tokens))
        per_call = scale(round_ms, overhead / 1e3 / seg.per_round)
        started = math.ceil(run.calls / seg.per_round)
        lo = max(seg.first_rounds, started + started % 2)
        hi = max(lo, seg.last_round)
        decided = self.outcomes.get((seg.part, seg.context)) in ("valid", "invalid")
        q = 0.0 if run.calls and decided else self._continue_share(bool(seg.tokens))
        mid = lo + 2 * sum(q**k for k in range(1, (hi - lo) // 2 + 1))
        left = [max(0.0, r * seg.per_round - run.calls) for r in (lo, mid, hi)]
        out: Cost = (per_call[0] * left[0], per_call[1] * left[1], per_call[2] * left[2])
        if run.calls == 0:
            out = add(out, scale(self._warmup(seg) or NONE, overhead))
            if seg.opens_context:
                out = add(out, extrapolate(self.prefill, seg.context) or NONE)
        return out, hi - lo

    def segment_s(self, seg: Segment, settle: bool = True, high: bool = False) -> float:
        """Seconds a segment would take from scratch with the costs seen (inf without a cost
        model); `high`: its check at its most rounds."""
        got = self._segment_left(SegmentRun(seg), settle)
        return got[0][2 if high else 1] if got is not None else math.inf

    def forecast_s(self, phases: Sequence[Phase], settle: bool = True, high: bool = False) -> float:
        """Seconds the given phases would take from scratch (the budget's forecast)."""
        segs = (s for p in phases for s in phase_segments(p, self.draft_kinds, settle))
        return sum(self.segment_s(s, settle, high) for s in segs)

    def _phase_left(self, p: PhaseRun, now_t: float) -> tuple[Eta, bool]:
        """(seconds left, modelled) for one phase; one without a cost model yet, once started,
        at its own rate (elapsed / done x left)."""
        left = [self._segment_left(r, self._settle) for r in p.segments if not r.done]
        if p.segments and not self.costs.empty and None not in left:
            got = [g for g in left if g is not None]
            total = weighted((cost, 1) for cost, _ in got) or NONE
            return Eta(*total, sum(rounds for _, rounds in got)), True
        if p.started_t is not None and p.done and p.total:
            rest = (now_t - p.started_t) / p.done * max(0, p.total - p.done)
            return Eta(rest, rest, rest), True
        return Eta(0.0, 0.0, 0.0, 0, True), False

    def eta(self, now_t: float | None = None) -> tuple[Eta | None, Eta | None]:
        """(this phase, whole run) seconds left at `now_t` (the latest event when None)."""
        if self._current is None or self.costs.empty:
            return None, None
        last = self.last_activity_t or 0.0
        if self._cache is None:
            pi = self._current[0]
            lefts = [
                (i, *self._phase_left(p, last))
                for i, p in enumerate(self.phases)
                if not p.finished and i >= pi
            ]
            run = weighted(((e.low, e.mid, e.high), 1) for _, e, _ in lefts) or NONE
            extra = sum(e.extra_rounds for _, e, _ in lefts)
            phase = next((e for i, e, _ in lefts if i == pi), Eta(0.0, 0.0, 0.0))
            self._cache = phase, Eta(*run, extra, not all(m for _, _, m in lefts))
        since = max(0.0, (now_t if now_t is not None else last) - last)
        return self._cache[0].minus(since), self._cache[1].minus(since)
