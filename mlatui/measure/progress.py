"""Honest progress, a pure fold of events: phases and segments as planned and as run, stalls, loading.

No mlx, no textual; the dashboard (DashboardState) folds it, and the budget (mlatui.run.budget)
forecasts with the same cost model from its probe's steps. The plan comes from each PhaseStart's `plan`
(mlatui.measure.plans segments) or, for recordings made before it existed, from the header's
scenario through the same functions. The ETA it offers (`eta`, `forecast_s`) is
mlatui.measure.progress_forecast's, from the costs and gaps folded here.
"""

from __future__ import annotations

from typing import Any

from mlatui.config.phase_kind import Pass
from mlatui.measure.loading import LoadView
from mlatui.measure.plans import Segment, Setting, phase_segments
from mlatui.measure.progress_costs import CostTable
from mlatui.measure.progress_forecast import Eta, Forecast, PhaseRun, SegmentRun
from mlatui.stream.events import (
    BudgetPlanned,
    DecodeBlock,
    DecodeResult,
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

STALL_MIN_S = 10.0
STALL_FACTOR = 5.0  # times the slowest gap between steps seen


class RunProgress(Forecast):
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
        self._passes: list[Pass] = [Pass.AB]
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
        elif isinstance(e, DecodeResult) and not e.measured:
            self._rejected(e)
        else:
            return
        self._dirty = True

    def _rejected(self, e: DecodeResult) -> None:
        """A setting rejected by bound before its context's blocks: its arm runs none of them."""
        for p in self.phases:
            for run in p.segments:
                seg = run.seg
                if seg.part != e.phase or seg.context != e.context or not seg.tokens:
                    continue
                for width, kind, depth in seg.settings:
                    if depth == e.depth and kind == e.draft_kind:
                        run.seg = seg.without(e.arm, width)

    def _header(self, h: RunHeader) -> None:
        kinds = (h.settings or {}).get("draft_kinds")
        has_draft = h.draft not in ("none", "")
        self.draft_kinds = tuple(kinds) if kinds is not None else ("",) if has_draft else ()
        tags = (h.settings or {}).get("passes") or [""]
        self._passes = [Pass.of_tag(str(tag)) for tag in tags]
        self._settle = bool((h.settings or {}).get("settle", True))
        self._plan_from((h.scenario or {}).get("phases") or [])

    def _budget(self, e: BudgetPlanned) -> None:
        """The phases that will run once the budget scaled the scenario down (not yet started
        ones; the header still describes the scenario as written)."""
        if not any(p.started_t is not None for p in self.phases):
            self.phases = []
            self._plan_from(list(e.phases))

    def _plan_from(self, raw: list[dict[str, Any]]) -> None:
        """The phases to come, as the header's plan or a BudgetPlanned lists them (each pass's:
        a started phase's own PhaseStart.plan replaces its segments)."""
        from dataclasses import replace

        from mlatui.config.scenario import Phase

        written = [p for p in (Phase.from_dict(d) for d in raw if isinstance(d, dict)) if p]
        for run_pass in self._passes:
            for p in written:
                name = run_pass.phase_name(p.name)
                phase = replace(p, name=name)
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
                if blocks:  # the gap also held its share of untimed plain blocks
                    self.compute_s[blocks] += self.untimed_per_call_s(run.seg)
                if not blocks and self._settle and isinstance(e, Step):  # its share of settles
                    one = self.costs.step(e.arm, e.context, 1)
                    self.compute_s[blocks] += one[1] / 2 / 1e3 if one else 0.0
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
