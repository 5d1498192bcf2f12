"""The key figure's data: each arm's marginal cost of a 2nd query (L=2 − L=1) against context,
with its CI, the L = 1 check of each context, and where the patched gate starts absorbing L = 2.
Its MBU view (`m`): each arm's L = 2 step's MBU (necessary bytes over step time, against the
device's measured read limit) per sweep context, with its CI, from the RunSummary's sweep rows
(the figures the tables print), and the share of the stock arm's step bytes that are
re-expansion at the largest context, from the recorded byte census.

Plain data built from DashboardState (no textual, no mlx); widgets.figure draws it.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

from mlatui.config.phase_kind import Pass, rules_for
from mlatui.measure.bandwidth import StepBytes
from mlatui.stream.events import Thresholds
from mlatui.views.dashboard_state import DashboardState
from mlatui.views.summary import Check, RunSummary, SweepRow, check, limit_check, summarize
from mlatui.views.units import Ci, above_limit, fmt_context, sig

ARM_COLOURS = {"stock": "red", "patched": "green"}


class FigureView(enum.StrEnum):
    """What the key figure plots against context (the `m` key switches between them)."""

    MARGINAL = "marginal"  # the marginal cost of a 2nd query, ms
    MBU = "mbu"  # each arm's L = 2 step's MBU, % of the device's measured limit

    @property
    def other(self) -> FigureView:
        return FigureView.MBU if self is FigureView.MARGINAL else FigureView.MARGINAL


class PointStatus(enum.StrEnum):
    VALID = "valid"
    PENDING = "pending"  # measured, L = 1 check not decided yet
    INCONCLUSIVE = "inconclusive"
    INVALID = "invalid"


@dataclass(frozen=True)
class FigurePoint:
    context: int
    ms: float
    low_ms: float | None = None
    high_ms: float | None = None
    status: PointStatus = PointStatus.VALID


@dataclass(frozen=True)
class FigureSeries:
    name: str
    colour: str
    points: tuple[FigurePoint, ...]


@dataclass(frozen=True)
class KeyFigure:
    series: tuple[FigureSeries, ...]
    # the smallest context from which the patched gate takes the absorbed path at L = 2, when
    # the run's thresholds place it inside the measured range; None otherwise
    crossover_context: int | None = None
    threshold_note: str = ""  # what the thresholds say about L = 2 over the measured range
    not_positive: int = 0  # points <= 0 ms, which a log axis cannot show
    y_label: str = "ms, lower is better"
    x_label: str = "context (tokens)"
    ended: bool = False  # the run is over: an empty figure will stay empty
    unit: str = "ms"  # of the values beside the points: "ms" or "%"
    legend_note: str = ""  # the legend's last item (the stock arm's re-expansion share)
    notice: str = ""  # why an empty figure stays empty (a recording without step bytes)

    @property
    def empty(self) -> bool:
        return not any(s.points for s in self.series) and not self.not_positive


def sweep_status(state: DashboardState, context: int) -> PointStatus:
    checks = [
        v
        for (p, c), v in state.validity.items()
        if c == context and rules_for(state.phase_kinds.get(p, "sweep")).model_widths
    ]
    if not checks:
        return PointStatus.PENDING
    verdicts = {v.verdict for v in checks}
    for status in (PointStatus.INVALID, PointStatus.INCONCLUSIVE):
        if status.value in verdicts:
            return status
    return PointStatus.VALID


def absorbs_from(table: dict[int, int], width: int = 2) -> int | None:
    """The smallest context of the table from which every listed L* admits `width`."""
    start = None
    for t, limit in sorted(table.items()):
        if limit >= width:
            start = t if start is None else start
        else:
            start = None
    return start


def threshold_mark(thresholds: Thresholds, contexts: list[int]) -> tuple[int | None, str]:
    """(crossover context inside the measured range or None, a note when L = 2 is absorbed at
    every measured context) for the formula and calibrated gates; nothing for the others."""
    if not contexts or thresholds.policy not in ("formula", "calibrated"):
        return None, ""
    table = thresholds.gate_table()
    start = absorbs_from(table)
    if start is None:
        return None, ""
    if contexts[0] < start <= contexts[-1]:
        return start, ""
    if start > contexts[-1]:
        return None, ""
    inside = [v for t, v in table.items() if contexts[0] <= t <= contexts[-1]]
    lowest = min(inside or [table[start]])
    return None, f"patched absorbs L=2 (L* ≥ {lowest})"


def _pass_series(state: DashboardState) -> list[FigureSeries] | None:
    """An A/A run's series, one per (pass, slot): `A aa-stock`, `B aa-stock`, `A aa-patched`…
    from each pass's own estimates (two passes at one context must not overwrite each other);
    None when the recording has no per-pass estimates."""
    passes = [
        p
        for p, kind in state.phase_kinds.items()
        if rules_for(kind).model_widths and Pass.of(p).null
    ]
    if not passes:
        return None
    colours = {"stock": ("red", "yellow"), "patched": ("green", "cyan")}
    series = []
    for phase in passes:
        variant = Pass.of(phase).variant or ""
        for slot, arm in enumerate(state.arms):
            points = []
            for (p, c), e in sorted(state.estimates.items(), key=lambda kv: kv[0][1]):
                row = next(
                    (
                        r
                        for r in e.rows
                        if p == phase and (r.quantity, r.arm, r.width) == ("marginal_ms", arm, 2)
                    ),
                    None,
                )
                if row is None or row.median <= 0:
                    continue
                status = STATUS_OF_CHECK[check(state, phase, c)]
                points.append(FigurePoint(c, row.median, row.low, row.high, status))
            colour = colours.get(variant, ("cyan", "magenta"))[min(slot, 1)]
            series.append(FigureSeries(f"{'AB'[min(slot, 1)]} {variant}", colour, tuple(points)))
    return series if any(s.points for s in series) else None


def key_figure(state: DashboardState) -> KeyFigure:
    """Both arms' marginal cost per sweep context; an A/A run's arms are named A and B (both
    run one variant, so 'stock' and 'patched' would misname them)."""
    from mlatui.views.verdict_strip import is_null_run

    null = is_null_run(state)
    series, not_positive = [], 0
    passes = _pass_series(state) if null else None
    for i, arm in enumerate(state.arms if passes is None else ()):
        points = []
        for c, ms, low, high in state.marginal_ci(arm):
            if ms <= 0:
                not_positive += 1
                continue
            points.append(FigurePoint(c, ms, low, high, sweep_status(state, c)))
        name = "AB"[i] if null and i < 2 else arm
        series.append(FigureSeries(name, ARM_COLOURS.get(arm, "cyan"), tuple(points)))
    series = passes if passes is not None else series
    contexts = sorted({p.context for s in series for p in s.points})
    thresholds = state.header.thresholds if state.header is not None else Thresholds()
    crossover, note = threshold_mark(thresholds, contexts)
    ended = state.status in ("completed", "interrupted", "error")
    return KeyFigure(tuple(series), crossover, note, not_positive, ended=ended)


MBU_WIDTH = 2  # the verify step the marginal-cost view is about
NO_BYTES = "MBU vs context: this recording carries no step bytes (made before the byte census)"
STATUS_OF_CHECK = {
    Check.VALID: PointStatus.VALID,
    Check.POOLED: PointStatus.VALID,
    Check.PENDING: PointStatus.PENDING,
    Check.INCONCLUSIVE: PointStatus.INCONCLUSIVE,
    Check.INVALID: PointStatus.INVALID,
}


def mbu_points(
    rows: Sequence[SweepRow], arm: str, width: int = MBU_WIDTH
) -> tuple[FigurePoint, ...]:
    """One arm's MBU (in %) at each context of `rows` that measured `width`, by context."""
    points = {}
    for r in rows:
        ci: Ci | None = r.mbu.get(arm) if r.width == width else None
        if ci is None or ci.median <= 0:
            continue
        pct = ci.scaled(100)
        points[r.context] = FigurePoint(
            r.context, pct.median, pct.low, pct.high, STATUS_OF_CHECK[r.check]
        )
    return tuple(points[c] for c in sorted(points))


def sweep_rows(summary: RunSummary) -> list[SweepRow]:
    """Every sweep phase's rows in run order (a later phase's row of a context replaces an
    earlier one's in mbu_points)."""
    return [r for p in summary.phases for r in p.sweep]


def limit_label(summary: RunSummary) -> str:
    bandwidth = summary.header.device.bandwidth if summary.header is not None else None
    if not bandwidth:
        return "the measured limit"
    return f"{sig(bandwidth.measured_read_gb_s, 3)} GB/s measured"


def re_expansion_note(state: DashboardState, rows: Sequence[SweepRow], width: int) -> str:
    """`stock L=2 @128K: 96% of bytes re-expansion`: of the bytes the stock step reads at the
    largest context (its necessary fewest plus what the materialised branch builds and reads
    back, as the run's byte census recorded them); "" unless the stock arm took that branch."""
    stock = state.arms.get("stock")
    if stock is None or not stock.materialised_calls:
        return ""
    measured = [r.context for r in rows if r.width == width and "stock" in r.mbu]
    if not measured:
        return ""
    context = max(measured)
    recorded = [
        e.step_bytes[str(width)]
        for (_, c), e in state.estimates.items()
        if c == context and str(width) in e.step_bytes
    ]
    if not recorded:
        return ""
    step = StepBytes.from_dict(recorded[-1])
    read = step.total.low + step.materialised_extra
    share = step.materialised_extra / read if read else 0.0
    return f"stock L={width} @{fmt_context(context)}: {share:.0%} of bytes re-expansion"


def mbu_figure(state: DashboardState) -> KeyFigure:
    """Each arm's MBU at L = 2 against context; an empty figure with a one-line notice where
    the recording has sweep steps but no MBU (no step bytes, no measured limit, or a limit the
    run's own steps read faster than)."""
    summary = summarize(state)
    rows = sweep_rows(summary)
    ended = state.status in ("completed", "interrupted", "error")
    y_label = f"MBU of L={MBU_WIDTH}, % of {limit_label(summary)}"
    series = tuple(
        FigureSeries(arm, ARM_COLOURS.get(arm, "cyan"), mbu_points(rows, arm)) for arm in state.arms
    )
    if not any(s.points for s in series):
        limit = limit_check(state)
        notice = NO_BYTES if rows else ""
        if limit is not None and limit.contradicted:
            notice = f"MBU vs context: {above_limit(limit)}"
        return KeyFigure(series, y_label=y_label, ended=ended, unit="%", notice=notice)
    note = re_expansion_note(state, rows, MBU_WIDTH)
    return KeyFigure(series, y_label=y_label, ended=ended, unit="%", legend_note=note)
