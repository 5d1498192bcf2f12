"""Progress and the forecast, a pure fold of events (no mlx, no textual): phases and segments as
planned (the header's `phase_plans`, a BudgetPlanned's, then each PhaseStart's `plan`) and as run,
the costs seen, stalls, loading and the seconds left. The budget forecasts from its probe's
steps with the same cost model (`CostTable`, `forecast_s`, `segment_s`).

A segment's time is its timed calls at the costs seen, times the wall seconds per measured second
seen between events (settle steps, estimates, hand-over), plus its set-up (prefill, warm-up). A
context not measured is read along the context axis; a decode block not seen is built from its
context's synced steps. Where an undecided L = 1 check may add rounds, the point expects the
share of extra rounds the run's earlier segments took (half before any ended), the range runs
from the planned rounds to every round.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from mlatui.config.scenario import Phase
from mlatui.measure.acceptance import likely_rejected
from mlatui.measure.plans import PLAIN, Segment, Setting, phase_segments
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

PRIOR_ACCEPT = 0.5  # per draft position, until a block of that depth is seen
PRIOR_DRAFT_SHARE = 0.25  # a drafted token, as a share of the target's L = 1 step
# wall s per measured s until seen, for steps [False] (their settle steps count as compute) and
# blocks [True]: 1.00-1.06 on the 2-core CPU, with OpenBLAS and with the reference BLAS
PRIOR_OVERHEAD = {False: 1.06, True: 1.05}
STALL_MIN_S = 10.0
STALL_FACTOR = 5.0  # times the slowest gap between steps seen


@dataclass
class LoadView:
    """Model loading as a phase of its own: the latest load, what loads and how far (bytes read
    are an estimate when `measure` is not "exact")."""

    what: str = ""
    source: str = ""
    random_build: bool = False
    files: int = 0
    total_bytes: int = 0
    params: int = 0
    bytes_read: int = 0
    files_read: int = 0
    measure: str = ""
    started_t: float = 0.0
    last_t: float = 0.0  # the last time bytes moved
    done: bool = False

    @classmethod
    def start(cls, e: LoadStart) -> LoadView:
        return cls(
            e.what,
            e.source,
            e.random_build,
            e.files,
            e.total_bytes,
            e.params,
            started_t=e.t,
            last_t=e.t,
        )

    def progress(self, e: LoadProgress) -> None:
        if e.bytes_read != self.bytes_read or e.files_read != self.files_read or e.done:
            self.last_t = e.t
        self.bytes_read, self.files_read, self.measure, self.done = (
            e.bytes_read,
            e.files_read,
            e.measure,
            e.done,
        )

    @property
    def seconds(self) -> float:
        return self.last_t - self.started_t


def extrapolate(points: Sequence[tuple[float, float]], x: float) -> float | None:
    """y at x from measured (x, y) points: interpolated between them; beyond them along the line
    through the two nearest (never falling); one point: halfway between flat and proportional."""
    pts = sorted(points)
    if len(pts) < 2:
        return None if not pts else (pts[0][1] + pts[0][1] * x / pts[0][0]) / 2
    i = min(max(1, sum(p[0] < x for p in pts)), len(pts) - 1)
    (x0, y0), (x1, y1) = pts[i - 1], pts[i]
    slope = (y1 - y0) / (x1 - x0) if x1 > x0 else 0.0
    if x0 <= x <= x1:
        return y0 + slope * (x - x0)
    x0, y0 = (x0, y0) if x < x0 else (x1, y1)
    return max(0.0, y0 + max(0.0, slope) * (x - x0))


class CostTable:
    """Mean ms per (arm, context, width) of synced steps and per token of decode blocks, each
    setting's tokens per verify step (an MTP head and a draft model accept and cost differently),
    and the seconds a new context's set-up takes (prefill beyond warm-up)."""

    def __init__(self) -> None:
        self.steps: dict[tuple[str, int, int], list[float]] = {}  # -> [sum ms, n]
        self.blocks: dict[tuple[str, int, Setting], list[float]] = {}  # -> [sum ms, tokens]
        self.verify_steps: dict[Setting, list[int]] = {}  # -> [tokens emitted, verify steps]
        self.prefill: list[tuple[float, float]] = []  # (context, s)

    def add_step(self, arm: str, context: int, width: int, ms: float) -> None:
        cell = self.steps.setdefault((arm, context, width), [0.0, 0])
        cell[0], cell[1] = cell[0] + ms, cell[1] + 1

    def add_block(
        self, arm: str, context: int, setting: Setting, tokens: int, ms: float, verifies: int
    ) -> None:
        setting = setting if setting.depth else PLAIN  # plain decode: one setting
        cell = self.blocks.setdefault((arm, context, setting), [0.0, 0])
        cell[0], cell[1] = cell[0] + ms, cell[1] + tokens
        if setting.depth and verifies:
            v = self.verify_steps.setdefault(setting, [0, 0])
            v[0], v[1] = v[0] + tokens, v[1] + verifies

    @property
    def empty(self) -> bool:
        return not self.steps and not self.blocks

    def step(self, arm: str, context: int, width: int) -> float | None:
        """A step's ms: as seen; else along the context axis; else its narrower width's."""
        points = [(c, s / n) for (a, c, w), (s, n) in self.steps.items() if (a, w) == (arm, width)]
        if len(points) == 1 and width > 1 and context > points[0][0]:
            # seen at one shorter context only (a slow device's probe): the wide step's extra
            # over the L = 1 step (re-expanding the cache, the extra queries) grows with context
            (c0, y0), one = points[0], self.steps.get((arm, points[0][0], 1))
            plain = self.step(arm, context, 1)
            if one and plain is not None:
                return plain + max(0.0, y0 - one[0] / one[1]) * context / c0
        if points:
            return extrapolate(points, context)
        lower = sorted({w for (a, _, w) in self.steps if a == arm and w < width})
        return self.step(arm, context, lower[-1]) if lower else None

    def growth(self, context: int) -> float:
        """How much more than its forecast a step past the contexts measured may cost: in
        proportion to the context from the longest (the ETA's high end)."""
        pts = sorted(
            (c, s / n) for (a, c, w), (s, n) in self.steps.items() if (a, w) == (ARMS[0], 1)
        )
        mid = extrapolate(pts, context)
        if not pts or context <= pts[-1][0] or not mid:
            return 1.0
        return max(1.0, pts[-1][1] * context / pts[-1][0] / mid)

    def tokens_per_verify(self, setting: Setting) -> float:
        seen = self.verify_steps.get(setting)
        if seen and seen[1]:
            return seen[0] / seen[1]
        return 1 + sum(PRIOR_ACCEPT**i for i in range(1, setting.depth + 1))

    def block(self, arm: str, context: int, setting: Setting, tokens: int) -> float | None:
        """A block's ms: along the context axis from this setting's blocks; else from its synced
        steps (depth d: its verify steps at L = d + 1, d drafted tokens each)."""
        setting = setting if setting.depth else PLAIN
        points = [
            (c, ms / n)
            for (a, c, st), (ms, n) in self.blocks.items()
            if (a, st) == (arm, setting) and n
        ]
        if points:
            per_token = extrapolate(points, context)
            return None if per_token is None else per_token * tokens
        one, d = self.step(arm, context, 1), setting.depth
        if one is None or d == 0:
            return None if one is None else one * tokens
        per_verify = (self.step(arm, context, d + 1) or one) + one * d * PRIOR_DRAFT_SHARE
        return per_verify * tokens / self.tokens_per_verify(setting)

    def call_ms(self, seg: Segment, width: int) -> float | None:
        """ms of one timed call of `width` in `seg`, averaged over the arms that run it."""
        arms = seg.arms_at(width)
        costs = [
            self.block(a, seg.context, seg.setting(width), seg.tokens)
            if seg.tokens
            else self.step(a, seg.context, width)
            for a in arms
        ]
        return _sum([(c, 1 / len(arms)) for c in costs])

    def untimed_round_ms(self, seg: Segment) -> float | None:
        """A round's untimed plain blocks, one in each rejected block's place."""
        calls = dict(seg.calls)
        parts = [
            (self.block(a, seg.context, PLAIN, seg.tokens), calls.get(w, 0)) for a, w in seg.skipped
        ]
        return _sum(parts)

    def round_ms(self, seg: Segment, settle: bool) -> float | None:
        parts: list[tuple[float | None, float]] = [(self.call_ms(seg, w), n) for w, n in seg.calls]
        if settle and not seg.tokens and 1 in dict(seg.calls):  # two untimed L = 1 steps a quad
            parts.append((self.call_ms(seg, 1), seg.per_round / 2))
        return _sum([*parts, (self.untimed_round_ms(seg), 1)])

    def warmup_ms(self, seg: Segment) -> float | None:
        return _sum(
            [(self.call_ms(seg, w), len(seg.arms_at(w)) * seg.warmup) for w, _ in seg.calls]
        )

    def expected(self, seg: Segment) -> Segment:
        """The block segment as it is expected to run: before the engine says which settings its
        bound rejects, those the costs seen say it will (likely_rejected) run no blocks."""
        if not seg.tokens or seg.skipped or not seg.bound_rejects:
            return seg
        for width, _, depth in seg.settings:
            for arm in ARMS if depth else ():
                plain, verify = (
                    self.step(arm, seg.context, 1),
                    self.step(arm, seg.context, depth + 1),
                )
                if plain and verify and likely_rejected(depth, plain, verify):
                    seg = seg.without(arm, width)
        return seg


def _sum(parts: Sequence[tuple[float | None, float]]) -> float | None:
    """The sum of each cost times its count; None when a cost is not known."""
    known = [(c, n) for c, n in parts if c is not None]
    return sum(c * n for c, n in known) if len(known) == len(parts) else None


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

    def __add__(self, o: Eta) -> Eta:
        sums = (self.low + o.low, self.mid + o.mid, self.high + o.high)
        return Eta(*sums, self.extra_rounds + o.extra_rounds, self.partial or o.partial)


NO_TIME = Eta(0.0, 0.0, 0.0)


@dataclass
class SegmentRun:
    seg: Segment
    last_t: float | None = None
    calls: int = 0
    done: bool = False


@dataclass
class PhaseRun:
    name: str
    segments: list[SegmentRun] = field(default_factory=list)
    planned: int = 0
    done: int = 0
    total: int = 0
    started_t: float | None = None
    finished: bool = False


def _planned(p: PhasePlan) -> PhaseRun:
    return PhaseRun(p.phase, [SegmentRun(s) for s in p.plan], sum(s.planned_calls for s in p.plan))


class RunProgress:
    """The fold: phases and segments as planned and as run, the costs seen, the run's activity."""

    def __init__(self) -> None:
        self.phases: list[PhaseRun] = []
        self.costs = CostTable()
        # inside segments, between consecutive timed events, for steps [False] and blocks [True]:
        # the wall seconds, and the compute the cost model counts for them
        self.wall_s = {False: 0.0, True: 0.0}
        self.compute_s = {False: 0.0, True: 0.0}
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
                for p in (p for p in self.phases if p.name == e.phase):
                    p.done, p.total = e.done, e.total
            case RunHeader():
                kinds = e.settings.draft_kinds
                has_draft = e.draft not in ("none", "")
                self.draft_kinds = kinds if kinds is not None else ("",) * has_draft
                self._settle = e.settings.settles
                self.phases = [_planned(p) for p in e.phase_plans]
            case BudgetPlanned():  # the phases not started yet, as planned (again)
                started = [p for p in self.phases if p.started_t is not None]
                names = {p.name for p in started}
                self.phases = started + [_planned(p) for p in e.phase_plans if p.phase not in names]
            case LoadStart() | LoadProgress():
                if isinstance(e, LoadStart):
                    self.load = LoadView.start(e)
                elif self.load is not None:
                    self.load.progress(e)
                self.last_activity_t = e.t
                return
            case DecodeResult(measured=False):  # rejected by bound: its arm runs no blocks here
                for run in (s for p in self.phases for s in p.segments):
                    if (run.seg.part, run.seg.context) == (e.phase, e.context) and run.seg.tokens:
                        for width, kind, depth in run.seg.settings:
                            if (kind, depth) == (e.draft_kind, e.depth):
                                run.seg = run.seg.without(e.arm, width)
            case _:
                return
        self._cache = None

    def _phase_start(self, e: PhaseStart) -> None:
        p = next((p for p in self.phases if p.name == e.phase), None)
        if p is None:
            self.phases.append(p := PhaseRun(e.phase))
        p.segments = [SegmentRun(seg) for seg in e.plan] or p.segments
        if sum(r.seg.planned_calls for r in p.segments) != e.planned_steps:
            p.segments = []  # not the plan the engine ran: the phase's own rate
        p.planned, p.total, p.started_t = e.planned_steps, e.planned_steps, e.t
        i = self.phases.index(p)
        for q in self.phases[:i]:
            q.finished = True
            for s in q.segments:
                s.done = True
        self.last_activity_t, self._current = e.t, (i, -1)

    def _timed(self, e: Step | DecodeBlock) -> None:
        if isinstance(e, Step):
            self.costs.add_step(e.arm, e.context, e.width, e.ms)
        else:
            setting = Setting(e.draft_kind, e.depth)
            self.costs.add_block(e.arm, e.context, setting, e.tokens, e.ms, len(e.accepted))
        run, prev_t = self._find(e.phase, e.context), self.last_activity_t
        self.last_activity_t = e.t
        if run is None:
            return
        seg, blocks = run.seg, bool(run.seg.tokens)
        since_t = run.last_t if run.calls else prev_t  # the first call: since the one before
        gap_s = e.t - (since_t if since_t is not None else e.t)
        if run.calls == 0 and seg.opens_context:
            warm_s = (self.costs.warmup_ms(seg) or 0.0) / 1e3
            self.costs.prefill.append((seg.context, max(0.0, gap_s - warm_s)))
        elif run.calls:
            self.wall_s[blocks] += gap_s
            untimed = self.costs.untimed_round_ms(seg) if blocks and seg.skipped else None
            one = self.costs.step(e.arm, e.context, 1) if self._settle and not blocks else None
            # the gap also held its share of untimed plain blocks, or of settle steps
            extra_ms = (untimed or 0.0) / max(1, seg.per_round) if blocks else (one or 0.0) / 2
            self.compute_s[blocks] += (e.ms + extra_ms) / 1e3
        self.slowest_gap_s = max(self.slowest_gap_s, gap_s)
        run.last_t, run.calls = e.t, run.calls + 1

    def _find(self, part: str, context: int) -> SegmentRun | None:
        """The segment an event belongs to: the current one, or a later one of its phase (the
        earlier ones are then done)."""
        if self._current is None:
            return None
        pi, si = self._current
        segs = self.phases[pi].segments
        later = [j for j in range(max(si, 0), len(segs)) if segs[j].seg.part == part]
        j = next((j for j in later if segs[j].seg.context == context), None)
        j = next((j for j in later if j > si), None) if j is None else j
        if j is None:
            return None
        for k in range(j):
            segs[k].done = True
        self._current = (pi, j)
        return segs[j]

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

    def _segment_left(self, run: SegmentRun, settle: bool) -> Eta | None:
        """Seconds left in a segment (set-up included when not started), from its planned rounds
        to its most, and the rounds its check may still add: two more at each remaining decision,
        with the share this run's earlier segments took (none once its check reads decided)."""
        seg = run.seg if run.calls else self.costs.expected(run.seg)
        round_ms = self.costs.round_ms(seg, settle)
        if round_ms is None or not seg.per_round:
            return None
        overhead = self.overhead(bool(seg.tokens))
        per_call_s = round_ms * overhead / 1e3 / seg.per_round
        started = math.ceil(run.calls / seg.per_round)
        lo = max(seg.first_rounds, started + started % 2)
        hi = max(lo, seg.last_round)
        decided = self.outcomes.get((seg.part, seg.context)) in ("valid", "invalid")
        q = 0.0 if run.calls and decided else self._continue_share(bool(seg.tokens))
        mid = lo + 2 * sum(q**k for k in range(1, (hi - lo) // 2 + 1))
        setup_s = 0.0
        if run.calls == 0:
            setup_s = (self.costs.warmup_ms(seg) or 0.0) * overhead / 1e3
            if seg.opens_context:
                setup_s += extrapolate(self.costs.prefill, seg.context) or 0.0
        low, mid, high = (max(0.0, r * seg.per_round - run.calls) for r in (lo, mid, hi))
        high *= self.costs.growth(seg.context)
        low, mid, high = (setup_s + per_call_s * calls for calls in (low, mid, high))
        return Eta(low, mid, high, hi - lo)

    def segment_s(self, seg: Segment, settle: bool = True) -> float:
        """Seconds a segment would take from scratch with the costs seen (inf without a cost
        model), its check decided after the planned rounds as often as this run's were."""
        got = self._segment_left(SegmentRun(seg), settle)
        return got.mid if got is not None else math.inf

    def forecast_s(self, phases: Sequence[Phase], settle: bool = True) -> float:
        """Seconds the given phases would take from scratch (the budget's forecast)."""
        segs = (s for p in phases for s in phase_segments(p, self.draft_kinds, settle))
        return sum(self.segment_s(s, settle) for s in segs)

    def _phase_left(self, p: PhaseRun, now_t: float) -> Eta:
        """Seconds left in one phase; one without a cost model yet, once started, at its own rate
        (elapsed / done x left), before: not estimated (`partial`)."""
        left = [self._segment_left(r, self._settle) for r in p.segments if not r.done]
        if p.segments and not self.costs.empty and None not in left:
            return sum((e for e in left if e is not None), NO_TIME)
        if p.started_t is not None and p.done and p.total:
            rest = (now_t - p.started_t) / p.done * max(0, p.total - p.done)
            return Eta(rest, rest, rest)
        return Eta(0.0, 0.0, 0.0, partial=True)

    def eta(self, now_t: float | None = None) -> tuple[Eta | None, Eta | None]:
        """(this phase, whole run) seconds left at `now_t` (the latest event when None)."""
        if self._current is None or self.costs.empty:
            return None, None
        last, pi = self.last_activity_t or 0.0, self._current[0]
        if self._cache is None:
            lefts = [self._phase_left(p, last) for p in self.phases[pi:] if not p.finished]
            self._cache = lefts[0] if lefts else NO_TIME, sum(lefts, NO_TIME)
        since = max(0.0, (now_t if now_t is not None else last) - last)
        return self._cache[0].minus(since), self._cache[1].minus(since)
