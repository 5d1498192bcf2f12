"""The run's figures as one typed value, `RunSummary`, folded from the events (through
DashboardState) once: the verdict's parts, the L = 1 checks, the marginal costs, each phase's
estimates with their CIs, the A/A cells, the device's drift, what the verdicts left out, the
acceptance both arm panes show, the progress and the latest memory sample. The panes render the
parts they show through the same functions (`acceptance_of`, `progress_of`, `verdict_parts`).

Every printer renders it (`bench`'s stdout, the `e` export, `replay --dump`, `compare`: the one
`summary_markdown` in mlatui.views.export), with one formatter per unit (mlatui.views.units), so
no two surfaces can print different numbers for the same figure. Pure Python.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from mlatui.config.phase_kind import Pass
from mlatui.measure.bandwidth import LimitCheck
from mlatui.measure.plans import Setting
from mlatui.stream.events import (
    ARMS,
    DecodeResult,
    DriftEvent,
    Estimate,
    Event,
    MemorySample,
    PhaseSummary,
    PooledValidity,
    RunHeader,
    Validity,
)
from mlatui.stream.phase_rows import Quantity
from mlatui.views.dashboard_state import DashboardState
from mlatui.views.dashboard_views import Table, view_of
from mlatui.views.run_tables import (
    Cell,
    Check,
    L1Figures,
    check,
    l1_figures,
    sweep_cells,
    sweep_phases,
)
from mlatui.views.units import Ci
from mlatui.views.verdict_strip import Part, pane_setting, verdict_parts

DRIFTS_LISTED = 12


@dataclass(frozen=True)
class CheckRow:
    """One (phase, context)'s L = 1 check as it stands, with both arms' L = 1 figures."""

    phase: str
    context: int
    validity: Validity
    check: Check
    figures: L1Figures


@dataclass(frozen=True)
class MarginalRow:
    """The marginal cost of a second query (L = 2 − L = 1) per arm at one sweep context."""

    phase: str
    context: int
    stock: Ci | None
    patched: Ci | None
    check: Check


@dataclass(frozen=True)
class SweepRow:
    """One context and width of a sweep: each arm's step, the paired ratio, the second slot's
    step over its L = 1 step (`vs_l1`), the rounds and how many of them drifted, and each arm's
    MBU (`mbu`: over the fewest bytes the step must read; `mbu_most`: the most; recordings
    without the bytes have neither, nor has a run whose steps read faster than its measured
    limit: limit_check) and effective GB/s (`gb_s`)."""

    context: int
    width: int
    stock: Ci | None
    patched: Ci | None
    ratio: Ci | None
    vs_l1: Ci | None
    rounds: int | None
    drifting: int
    check: Check
    mbu: dict[str, Ci] = field(default_factory=dict)  # arm -> MBU
    mbu_most: dict[str, Ci] = field(default_factory=dict)
    gb_s: dict[str, Ci] = field(default_factory=dict)  # arm -> effective GB/s (fewest bytes)


@dataclass(frozen=True)
class DecodeRow:
    result: DecodeResult
    check: Check


@dataclass(frozen=True)
class PhaseFigures:
    name: str
    kind: str
    table: Table
    running: bool  # no summary yet and the run is in it
    sweep: tuple[SweepRow, ...] = ()
    decode: tuple[DecodeRow, ...] = ()
    summary: PhaseSummary | None = None  # the phase's own rows (a kind shown by its rows)


@dataclass(frozen=True)
class Acceptance:
    """One arm's acceptance of the setting both arm panes show (verdict_strip.pane_setting):
    P(accept i | 1..i-1 accepted) by draft position, accepted drafts per verify step, the rule."""

    arm: str
    setting: Setting
    conditional: tuple[float | None, ...]
    mean_accepted: float | None
    rule: str


def acceptance_of(state: DashboardState, arm: str) -> Acceptance | None:
    setting = pane_setting(state)
    if setting is None or arm not in state.arms:
        return None
    a = state.arms[arm]
    counts = a.counts.get(setting)
    conditional = tuple(counts.conditional) if counts else ()
    mean = counts.mean_accepted if counts else None
    return Acceptance(arm, setting, conditional, mean, a.rules.get(setting, ""))


@dataclass(frozen=True)
class ProgressFigures:
    """Where the run is: its phase, the phase's steps done of those planned, the status."""

    phase: str
    kind: str
    index: int
    total_phases: int
    done: int
    total: int
    status: str

    @property
    def completed(self) -> bool:
        return self.status == "completed"

    @property
    def fraction(self) -> float:
        """A completed run ran what it needed (a sampler stops once decided): its bar is full."""
        return 1.0 if self.completed else min(1.0, self.done / self.total) if self.total else 0.0

    @property
    def steps_text(self) -> str:
        """`40/128` while running; `985 steps of 1024 planned` once completed."""
        if not self.completed:
            return f"{self.done}/{self.total}"
        return f"{self.done} steps" + (
            f" of {self.total} planned" if self.done < self.total else ""
        )


def progress_of(state: DashboardState) -> ProgressFigures:
    p = state.phase
    return ProgressFigures(p.name, p.kind, p.index, p.total_phases, p.done, p.total, state.status)


@dataclass(frozen=True)
class RunSummary:
    header: RunHeader | None
    status: str  # waiting | running | completed | interrupted | error
    status_text: str  # the status as the metadata says it ("running (phase 2/2 tune: 3/9)")
    verdict: tuple[Part, ...]
    checks: tuple[CheckRow, ...]
    pooled: tuple[PooledValidity, ...]
    tolerance_pct: float
    marginal: tuple[MarginalRow, ...]
    phases: tuple[PhaseFigures, ...]
    null_finals: tuple[Estimate, ...]  # an A/A pass's final estimates (its bias cells)
    drifts: tuple[DriftEvent, ...]
    left_out: tuple[int, ...]  # contexts whose L = 1 check did not pass (when not running)
    synthetic: bool
    draft_kinds: tuple[str, ...]
    acceptance: tuple[Acceptance, ...]  # per arm, the one setting both panes show
    progress: ProgressFigures
    memory: MemorySample | None  # the latest sample


def limit_check(state: DashboardState) -> LimitCheck | None:
    """The header's measured read limit against the most any step of the run read (the largest
    median GB/s of every estimate so far); None without a limit or without a rate."""
    bandwidth = state.header.device.bandwidth if state.header is not None else None
    limit = bandwidth.measured_read_gb_s if bandwidth else None
    rates = [
        float(r.median) for e in state.estimates.values() for r in e.rows if r.quantity == "gb_s"
    ]
    if not limit or not rates:
        return None
    return LimitCheck(float(limit), max(rates))


def _status_text(state: DashboardState) -> str:
    if state.status == "running" and state.phase.name:
        p = state.phase
        return f"running (phase {p.index + 1}/{p.total_phases} {p.name}: {p.done}/{p.total})"
    return state.status + (f" ({state.error})" if state.error else "")


def _checks(state: DashboardState) -> tuple[CheckRow, ...]:
    """By phase (in run order), then context: as the dashboard lists them."""
    order = {p: i for i, p in enumerate(state.phase_kinds)}
    found = sorted(
        state.validity.items(), key=lambda kv: (order.get(kv[0][0], len(order)), kv[0][1])
    )
    return tuple(
        CheckRow(
            phase,
            context,
            v,
            check(state, phase, context),
            l1_figures(v, state.phase_kinds.get(phase, ""), state.decode_results, phase, context),
        )
        for (phase, context), v in found
    )


def _by(cells: list[Cell], quantity: Quantity) -> dict[tuple[int, int, str], Cell]:
    return {(c.context, c.width, c.arm): c for c in cells if c.quantity == quantity}


def _ci(cell: Cell | None) -> Ci | None:
    return cell.ci if cell is not None else None


def _marginal(state: DashboardState) -> tuple[MarginalRow, ...]:
    rows = []
    for phase in sweep_phases(state):
        marg = _by(sweep_cells(state, phase), Quantity.MARGINAL_MS)
        for context in sorted({c for c, _, _ in marg}):
            s, p = marg.get((context, 2, "stock")), marg.get((context, 2, "patched"))
            rows.append(MarginalRow(phase, context, _ci(s), _ci(p), check(state, phase, context)))
    return tuple(rows)


def _sweep(state: DashboardState, phase: str) -> tuple[SweepRow, ...]:
    cells = sweep_cells(state, phase)
    step, ratio, vs_l1 = (_by(cells, q) for q in (Quantity.STEP_MS, Quantity.RATIO, Quantity.VS_L1))
    mbu, most, rate = (_by(cells, q) for q in (Quantity.MBU, Quantity.MBU_MOST, Quantity.GB_S))
    if (limit := limit_check(state)) is not None and limit.contradicted:
        mbu, most = {}, {}  # against a limit the run's own steps beat: no figure (mbu_cell says)
    rows = []
    for context, width in sorted({(c, w) for c, w, _ in step}):
        s, p = step.get((context, width, "stock")), step.get((context, width, "patched"))
        estimate = state.estimates.get((phase, context))
        rows.append(
            SweepRow(
                context,
                width,
                _ci(s),
                _ci(p),
                _ci(ratio.get((context, width, ""))),
                _ci(vs_l1.get((context, width, ARMS[1]))),
                next((x.rounds for x in (s, p) if x and x.rounds), None),
                estimate.drifting_rounds if estimate is not None else 0,
                check(state, phase, context),
                {a: c.ci for a in ARMS if (c := mbu.get((context, width, a))) is not None},
                {a: c.ci for a in ARMS if (c := most.get((context, width, a))) is not None},
                {a: c.ci for a in ARMS if (c := rate.get((context, width, a))) is not None},
            )
        )
    return tuple(rows)


def _decode(state: DashboardState, phase: str) -> tuple[DecodeRow, ...]:
    """Plain first, then each setting in the run's order of kinds, both arms each."""
    kinds = list(state.draft_kinds)

    def order(r: DecodeResult) -> tuple:
        kind = kinds.index(r.draft_kind) if r.draft_kind in kinds else len(kinds)
        return (r.context, r.depth > 0, kind, r.depth, ARMS.index(r.arm) if r.arm in ARMS else 2)

    mine = sorted((r for r in state.decode_results if r.phase == phase), key=order)
    return tuple(DecodeRow(r, check(state, r.phase, r.context)) for r in mine)


def _phases(state: DashboardState) -> tuple[PhaseFigures, ...]:
    out = []
    for phase, kind in state.phase_kinds.items():
        summary = next((s for s in state.summaries if s.phase == phase), None)
        table = view_of(kind).table
        running = summary is None and state.status == "running" and phase == state.phase.name
        out.append(
            PhaseFigures(
                phase,
                kind,
                table,
                running,
                _sweep(state, phase) if table is Table.SWEEP else (),
                _decode(state, phase) if table is Table.DECODE else (),
                summary,
            )
        )
    return tuple(out)


def summarize(state: DashboardState) -> RunSummary:
    """The run's figures as the dashboard holds them now (mid-run: what exists so far)."""
    tolerance = next(iter(state.validity.values())).tolerance_pct if state.validity else 2.0
    left_out = sorted({c for (_, c), v in state.validity.items() if not v.valid})
    finals = [e for e in state.estimates.values() if e.final and Pass.of(e.phase).null]
    return RunSummary(
        header=state.header,
        status=state.status,
        status_text=_status_text(state),
        verdict=tuple(verdict_parts(state)),
        checks=_checks(state),
        pooled=tuple(sorted(state.pooled.values(), key=lambda p: p.t)),
        tolerance_pct=tolerance,
        marginal=_marginal(state),
        phases=_phases(state),
        null_finals=tuple(sorted(finals, key=lambda e: e.t)),
        drifts=tuple(state.drifts),
        left_out=tuple(left_out) if state.status != "running" else (),
        synthetic=state.synthetic,
        draft_kinds=tuple(state.draft_kinds),
        acceptance=tuple(a for arm in ARMS if (a := acceptance_of(state, arm)) is not None),
        progress=progress_of(state),
        memory=state.memory,
    )


def summarize_events(events: Sequence[Event]) -> RunSummary:
    """`summarize` of the dashboard fold of `events` (a recording, or `bench`'s run)."""
    state = DashboardState()
    state.apply_all(list(events))
    return summarize(state)


def drift_line(drifts: Sequence[DriftEvent]) -> str:
    shown = ", ".join(
        f"{d.phase} @ {d.context} round {d.round + 1} {d.change_pct:+.0f}%"
        for d in drifts[:DRIFTS_LISTED]
    )
    if len(drifts) > DRIFTS_LISTED:
        shown += f", … ({len(drifts) - DRIFTS_LISTED} more)"
    return (
        f"Device drift: {len(drifts)} step(s) of the L = 1 level > 10% between rounds "
        f"(both arms; paired figures cancel them): {shown}"
    )


def invalid_contexts(events: Sequence[Event]) -> list[tuple[str, int, float, str]]:
    """(phase, context, signed diff %, outcome) of every context whose L = 1 check was not valid."""
    return [
        (v.phase, v.context, v.diff_pct, v.verdict) for v in final_checks(events) if not v.valid
    ]


# The event types the summary folds: a replay keeps only these (not every step).
SUMMARY_EVENT_TYPES = frozenset(
    {
        "header",
        "phase_start",
        "phase_summary",
        "validity",
        "pooled_validity",
        "estimate",
        "drift",
        "decode_result",
        "run_end",
    }
)


def final_checks(events: Sequence[Event]) -> list[Validity]:
    """Each (phase, context)'s L = 1 check as it ended: a pooled decision replaces the own one
    (in the order the checks were first made)."""
    out: dict[tuple[str, int], Validity] = {}
    for v in events:
        if isinstance(v, Validity):
            out[(v.phase, v.context)] = v
    return list(out.values())
