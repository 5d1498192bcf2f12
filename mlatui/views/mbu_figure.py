"""The key figure's MBU view: each arm's L = 2 step's MBU (necessary bytes over step time,
against the device's measured read limit) per sweep context, with its CI, from the RunSummary's
sweep rows (the same figures the tables print), and the share of the stock arm's step bytes that
are re-expansion at the largest context, from the recorded byte census.

Plain data (no textual, no mlx); widgets.figure draws it like the marginal-cost view."""

from __future__ import annotations

from collections.abc import Sequence

from mlatui.measure.byte_census import StepBytes
from mlatui.views.bandwidth_pane import limit_check
from mlatui.views.bandwidth_text import limit_unknown
from mlatui.views.dashboard_state import DashboardState
from mlatui.views.key_figure import ARM_COLOURS, FigurePoint, FigureSeries, KeyFigure, PointStatus
from mlatui.views.rounding import Ci, fmt_context, sig
from mlatui.views.run_tables import Check
from mlatui.views.summary import RunSummary, SweepRow, summarize

MBU_WIDTH = 2  # the verify step the marginal-cost view is about
NO_BYTES = "MBU vs context: this recording carries no step bytes (made before the byte census)"
STATUS_OF_CHECK = {
    Check.VALID: PointStatus.VALID,
    Check.POOLED: PointStatus.VALID,
    Check.PENDING: PointStatus.PENDING,
    Check.INCONCLUSIVE: PointStatus.INCONCLUSIVE,
    Check.INVALID: PointStatus.INVALID,
}


def _percent(v: float | None) -> float | None:
    return None if v is None else v * 100


def mbu_points(
    rows: Sequence[SweepRow], arm: str, width: int = MBU_WIDTH
) -> tuple[FigurePoint, ...]:
    """One arm's MBU (in %) at each context of `rows` that measured `width`, by context."""
    points = {}
    for r in rows:
        ci: Ci | None = r.mbu.get(arm) if r.width == width else None
        if ci is None or ci.median <= 0:
            continue
        points[r.context] = FigurePoint(
            r.context,
            ci.median * 100,
            _percent(ci.low),
            _percent(ci.high),
            STATUS_OF_CHECK[r.check],
        )
    return tuple(points[c] for c in sorted(points))


def sweep_rows(summary: RunSummary) -> list[SweepRow]:
    """Every sweep phase's rows in run order (a later phase's row of a context replaces an
    earlier one's in mbu_points)."""
    return [r for p in summary.phases for r in p.sweep]


def limit_label(summary: RunSummary) -> str:
    bandwidth = summary.header.device.get("bandwidth") if summary.header is not None else None
    if not bandwidth:
        return "the measured limit"
    return f"{sig(bandwidth['measured_read_gb_s'], 3)} GB/s measured"


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
            notice = f"MBU vs context: {limit_unknown(limit)}"
        return KeyFigure(series, y_label=y_label, ended=ended, unit="%", notice=notice)
    note = re_expansion_note(state, rows, MBU_WIDTH)
    return KeyFigure(series, y_label=y_label, ended=ended, unit="%", legend_note=note)
