"""The run's figures as one typed value, `RunSummary`, folded from the events (through
DashboardState) once: the verdict's parts, the L = 1 checks, the marginal costs, each phase's
estimates with their CIs, the A/A cells, the device's drift, what the verdicts left out, the
acceptance both arm panes show, the progress and the latest memory sample. The panes render the
parts they show through the same functions (`acceptance_of`, `progress_of`, `verdict_parts`).

Every printer renders it (`bench`'s stdout, the `e` export, `replay --dump`, `compare`: the one
`summary_markdown` in mlatui.views.export), with one formatter per unit (mlatui.views.units), so
no two surfaces can print different numbers for the same figure. Pure Python.

Sweep figures come from the paired estimates (medians over rounds with 95% CIs), available from
the first round on, so a mid-run summary has them; a run without estimates gives plain medians
of the samples, without a CI. Beside the summary: each (phase, context)'s L = 1 check (`Check`)
and its two L = 1 figures (`l1_figures`), and what a headless run reads of its events alone (the
checks as they ended, `invalid_contexts`; the event types a replay keeps for it).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from mlatui.config.phase_kind import Pass, rules_for
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
from mlatui.stream.phrases import CHECK_MARKS
from mlatui.views.dashboard_state import DashboardState
from mlatui.views.dashboard_views import Table, view_of
from mlatui.views.units import Ci
from mlatui.views.verdict_strip import Part, pane_setting, verdict_parts

DRIFTS_LISTED = 12


class Check(enum.StrEnum):
    """The L = 1 check of a (phase, context); PENDING before it is decided; POOLED: inconclusive
    alone, made valid by the run's pooled check (in verdicts, never shown as plain valid)."""

    VALID = "valid"
    POOLED = "valid (pooled)"
    INVALID = "invalid"
    INCONCLUSIVE = "inconclusive"
    PENDING = "pending"

    @property
    def mark(self) -> str:
        return CHECK_MARKS[self.value]

    @property
    def usable(self) -> bool:
        """Enters verdicts."""
        return self in (Check.VALID, Check.POOLED)


def check(state: DashboardState, phase: str, context: int) -> Check:
    v = state.validity.get((phase, context))
    if v is None:
        return Check.PENDING
    return Check.POOLED if v.valid and v.pooled else Check(v.verdict)


def sweep_phases(state: DashboardState) -> list[str]:
    return [p for p, kind in state.phase_kinds.items() if rules_for(kind).model_widths]


@dataclass(frozen=True)
class L1Figures:
    """Both arms' L = 1 figure in a check's row, per step as the sweep's: a decode or tune phase
    with a draft decides its check on synced verify steps; with no draft the check is decided on
    plain-decode blocks, whose figures are block times (a 12-token block read 46.7 ms beside
    the sweep's 4.03 ms step), so such a row shows the block time per token, said as such, or
    nothing when the block's length is not known."""

    stock_ms: float | None
    patched_ms: float | None
    block_tokens: int = 0  # > 0: per token of plain-decode blocks this long (not a step time)

    @property
    def per_token(self) -> bool:
        return self.block_tokens > 0

    @property
    def note(self) -> str:
        """What a marked row's figures are, for the table's legend."""
        return (
            f"per token of {self.block_tokens}-token plain-decode blocks (no draft: the check "
            "was decided on them)"
        )


def decided_on_blocks(kind: str, results: Iterable[DecodeResult], phase: str, context: int) -> bool:
    """A decode or tune check with no speculative result at its context: no verify steps."""
    if not rules_for(kind).decodes:
        return False
    return not any(r.depth > 0 and r.phase == phase and r.context == context for r in results)


def block_tokens(results: Iterable[DecodeResult], phase: str, context: int) -> int:
    return next(
        (
            r.block_tokens
            for r in results
            if r.depth == 0 and r.phase == phase and r.context == context and r.block_tokens
        ),
        0,
    )


def l1_figures(
    v: Validity, kind: str, results: Iterable[DecodeResult], phase: str, context: int
) -> L1Figures:
    """`v`'s two L = 1 figures as step times: its own (a sweep's, or a verify's), or its block
    times per token (None for both when the blocks' length is unknown)."""
    results = list(results)
    if not decided_on_blocks(kind, results, phase, context):
        return L1Figures(v.stock_l1_ms, v.patched_l1_ms)
    n = block_tokens(results, phase, context)
    if n <= 0:
        return L1Figures(None, None)
    return L1Figures(v.stock_l1_ms / n, v.patched_l1_ms / n, n)


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
    """Where the run is: its phase's steps done of those planned, and the status."""

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
    return ProgressFigures(state.phase.done, state.phase.total, state.status)


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


# (quantity, context, width, arm): `arm` is "" for the paired ratio
Figures = dict[tuple[Quantity, int, int, str], Ci]


def _figures(state: DashboardState, phase: str) -> Figures:
    """`phase`'s figures: its paired estimates (medians over rounds with 95% CIs, from the first
    round on, so a mid-run summary has them); a run without estimates: plain medians of the
    samples, without a CI (the first sweep phase's: samples are not kept per phase)."""
    found = sorted((c, e) for (p, c), e in state.estimates.items() if p == phase)
    if found:
        return {
            (r.quantity, e.context, int(r.width), r.arm): Ci(r.median, r.low, r.high)
            for _, e in found
            for r in e.rows
        }
    if phase != (sweep_phases(state) or [phase])[0]:
        return {}
    out: Figures = {}
    for arm, c, w in sorted(state.sweep_ms, key=lambda k: k[1:]):
        if (m := state.l_median(arm, c, w)) is not None:
            out[(Quantity.STEP_MS, c, w, arm)] = Ci(m)
    for c in sorted({c for (_, c, _) in state.sweep_ms}):
        for arm in ARMS:
            one, two = state.l_median(arm, c, 1), state.l_median(arm, c, 2)
            if one is not None and two is not None:
                out[(Quantity.MARGINAL_MS, c, 2, arm)] = Ci(two - one)
    return out


def _marginal(state: DashboardState) -> tuple[MarginalRow, ...]:
    rows = []
    for phase in sweep_phases(state):
        f = _figures(state, phase)
        for c in sorted({c for q, c, _, _ in f if q == Quantity.MARGINAL_MS}):
            s, p = (f.get((Quantity.MARGINAL_MS, c, 2, arm)) for arm in ARMS)
            rows.append(MarginalRow(phase, c, s, p, check(state, phase, c)))
    return tuple(rows)


def _sweep(state: DashboardState, phase: str) -> tuple[SweepRow, ...]:
    f = _figures(state, phase)
    # against a limit the run's own steps beat: no MBU (mbu_cell says so)
    no_mbu = (limit := limit_check(state)) is not None and limit.contradicted

    def by_arm(q: Quantity, c: int, w: int) -> dict[str, Ci]:
        hidden = no_mbu and q in (Quantity.MBU, Quantity.MBU_MOST)
        return {} if hidden else {a: f[(q, c, w, a)] for a in ARMS if (q, c, w, a) in f}

    rows = []
    for c, w in sorted({(c, w) for q, c, w, _ in f if q == Quantity.STEP_MS}):
        e = state.estimates.get((phase, c))
        stock, patched = (f.get((Quantity.STEP_MS, c, w, arm)) for arm in ARMS)
        rows.append(
            SweepRow(
                c,
                w,
                stock,
                patched,
                f.get((Quantity.RATIO, c, w, "")),
                f.get((Quantity.VS_L1, c, w, ARMS[1])),
                (e.rounds or None) if e is not None else None,
                e.drifting_rounds if e is not None else 0,
                check(state, phase, c),
                by_arm(Quantity.MBU, c, w),
                by_arm(Quantity.MBU_MOST, c, w),
                by_arm(Quantity.GB_S, c, w),
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
