"""The key figure drawn from plain data (mlatui.views.key_figure.KeyFigure) on plotext's canvas
(widgets.plot): log-log with ticks a constant ratio apart, a marker shape per series at every
measured context, 95% CI whiskers, each point's ms beside it, the legend above the data area,
invalid and inconclusive contexts marked apart, and the context where the patched gate starts
absorbing L=2."""

from __future__ import annotations

import functools

from rich.text import Text

from mlatui.views.key_figure import FigurePoint, FigureView, KeyFigure, PointStatus
from mlatui.views.units import fmt_context, ms_text, percent_text

from .palette import GREY, SeriesLook, hex_colour, series_look
from .plot import LogAxes, LogLogPlot, log_log_axes

MIN_PLOT_ROWS = 3
CLIPPED = "↓"  # a CI whisker that runs past the bottom of the log axis
CROSSOVER = "┊"
VIEW_TITLES = {  # the key figure pane's title in each view
    FigureView.MARGINAL: "marginal cost of a 2nd query (L=2 − L=1) vs context",
    FigureView.MBU: "MBU vs context (L=2 step, % of the measured limit)",
}


def marker(point: FigurePoint, look: SeriesLook) -> tuple[str, str]:
    """(glyph, plotext style) of a point: the series' shape, filled when its check passed."""
    if point.status is PointStatus.INVALID:
        return "✗", "dim"
    if point.status is PointStatus.INCONCLUSIVE:
        return look.hollow, "dim"
    if point.status is PointStatus.PENDING:
        return look.small, ""
    return look.filled, "bold"


def looks(fig: KeyFigure, dark: bool) -> list[SeriesLook]:
    return [series_look(i, dark) for i in range(len(fig.series))]


def legend_items(
    fig: KeyFigure, dark: bool = True, with_ci: bool = True
) -> list[tuple[str, str, str]]:
    """(symbol, style, label) for what is drawn, in reading order."""
    shown = [(s, look) for s, look in zip(fig.series, looks(fig, dark), strict=True) if s.points]
    items = [(look.filled, f"bold {look.style}", s.name) for s, look in shown]
    statuses = {p.status for s in fig.series for p in s.points}
    if with_ci and has_ci(fig):
        items.append(("│", "", "95% CI"))
    if PointStatus.PENDING in statuses:
        items.append(("".join(look.small for _, look in shown), "", "L=1 check pending"))
    if PointStatus.INCONCLUSIVE in statuses:
        items.append(("".join(look.hollow for _, look in shown), "dim", "L=1 inconclusive"))
    if PointStatus.INVALID in statuses:
        items.append(("✗", "dim", "L=1 invalid"))
    if fig.crossover_context is not None:
        mark = f"L* ≥ 2 from {fmt_context(fig.crossover_context)}"
        items.append((CROSSOVER, hex_colour(GREY), mark))
    if any(p.low_ms is not None and p.low_ms <= 0 for s in fig.series for p in s.points):
        items.append((CLIPPED, "bold", "CI reaches ≤ 0 (off the log axis)"))
    if fig.legend_note:
        items.append(("", "", fig.legend_note))
    return items


def has_ci(fig: KeyFigure) -> bool:
    return any(p.low_ms is not None and p.high_ms is not None for s in fig.series for p in s.points)


def legend_lines(fig: KeyFigure, width: int, dark: bool = True, with_ci: bool = True) -> list[Text]:
    """The axis label, then the legend items, wrapped between items (never inside one)."""
    lines = [Text(fig.y_label, style="bold")]
    for sym, style, label in legend_items(fig, dark, with_ci):
        line = lines[-1]
        if line.cell_len + 2 + len(sym) + 1 + len(label) > width:
            lines.append(Text())
            line = lines[-1]
        else:
            line.append("  ")
        line.append(sym, style=style)
        line.append(f" {label}" if sym else label)
    return lines


def caption(fig: KeyFigure, width: int) -> Text:
    """Under the x ticks: the x label, the CI whisker's meaning and the gate note, as fit."""
    t = Text(fig.x_label, style="dim")
    extra = [("│ 95% CI", "")] if has_ci(fig) else []
    if fig.threshold_note:
        extra.append((fig.threshold_note, "dim"))
    for text, style in extra:
        if t.cell_len + 3 + len(text) <= width:
            t.append(" · ", style="dim")
            t.append(text, style=style)
    return t


def y_values(fig: KeyFigure) -> list[float]:
    return [
        v
        for s in fig.series
        for p in s.points
        for v in (p.ms, p.low_ms, p.high_ms)
        if v is not None and v > 0
    ]


def contexts(fig: KeyFigure) -> list[int]:
    return sorted({p.context for s in fig.series for p in s.points})


def figure_axes(fig: KeyFigure, width: int, plot_height: int) -> LogAxes:
    """The plot's axes: y ticks a constant ratio apart holding every value and CI end, x from
    the smallest to the largest context with room for the end markers and their labels."""
    return log_log_axes(y_values(fig), contexts(fig), width, plot_height)


def key_figure_text(fig: KeyFigure, width: int, height: int, dark: bool = True) -> Text:
    """The figure at this size. The pane redraws it at the UI's rate while a sweep runs, and
    most redraws see the same data (128 different figures in the 205 s default run): a
    figure already drawn at this size is not built again (plotext takes tens of ms)."""
    return _drawn(fig, width, height, dark).copy()


@functools.lru_cache(maxsize=16)
def _drawn(fig: KeyFigure, width: int, height: int, dark: bool) -> Text:
    if fig.empty and fig.notice:
        return Text(fig.notice, style="dim")
    if fig.empty:
        said = "this run has no sweep steps to plot" if fig.ended else "waiting for sweep steps…"
        return Text(f"marginal cost of the 2nd query (L=2 − L=1) vs context\n{said}", style="dim")
    footnote = (
        [Text(f"{fig.not_positive} point(s) ≤ 0 ms: off the log axis", style="dim")]
        if fig.not_positive
        else []
    )
    if not any(s.points for s in fig.series):
        return Text("\n").join(
            [*legend_lines(fig, width, dark), Text("no positive marginal cost yet"), *footnote]
        )
    legend = legend_lines(fig, width, dark, with_ci=False)
    with_caption = height - len(legend) - len(footnote) - 3 >= 6
    if not with_caption:
        legend = legend_lines(fig, width, dark)
    rows = height - len(legend) - len(footnote) - 2 - (1 if with_caption else 0)
    if rows < MIN_PLOT_ROWS or width < 24:
        return Text("(too small: z zooms)", style="dim")
    axes = figure_axes(fig, width, rows + 2)
    plot = draw(fig, axes, dark)
    out = [*legend, *plot[:-1]]
    out.append(_x_labels(plot[-1], width, "" if with_caption else " tokens"))
    if with_caption:
        out.append(caption(fig, width))
    out.extend(footnote)
    return Text("\n").join(out)


def draw(fig: KeyFigure, axes: LogAxes, dark: bool) -> list[Text]:
    """The plot's rows: the crossover mark, lines through neighbouring checked points, CI
    whiskers, markers, then each point's ms where it covers nothing drawn."""
    plot = LogLogPlot(axes)
    if fig.crossover_context is not None:
        plot.vline(fig.crossover_context, CROSSOVER, GREY)
    series = list(zip(fig.series, looks(fig, dark), strict=True))
    for s, look in series:
        # a line joins neighbouring contexts only: never through an excluded point between them
        run: list[FigurePoint] = []
        for p in [*s.points, None]:
            if p is not None and p.status in (PointStatus.VALID, PointStatus.PENDING):
                run.append(p)
                continue
            plot.line([q.context for q in run], [q.ms for q in run], look.colour)
            run = []
    offsets = _offsets(fig, axes)
    taken: set[tuple[int, int]] = set()
    for (s, look), dxs in zip(series, offsets, strict=True):
        for p, dx in zip(s.points, dxs, strict=True):
            if p.low_ms is None or p.high_ms is None:
                continue
            col = axes.col(p.context) + dx
            colour = look.colour if p.status is not PointStatus.INVALID else GREY
            plot.whisker(p.context, p.low_ms, p.high_ms, colour, dx)
            taken |= {(r, col) for r in range(axes.row(p.high_ms), axes.row(p.low_ms) + 1)}
            if p.low_ms < axes.y_range[0]:  # the CI goes below the axis (to 0 or under): say so
                plot.marker(p.context, axes.y_range[0], CLIPPED, look.colour, "bold", dx)
    for (s, look), dxs in zip(series, offsets, strict=True):
        for p, dx in zip(s.points, dxs, strict=True):
            glyph, style = marker(p, look)
            plot.marker(p.context, p.ms, glyph, look.colour, style, dx)
            taken.add((axes.row(p.ms), axes.col(p.context) + dx))
    for (s, look), dxs in zip(series, offsets, strict=True):
        for p, dx in zip(s.points, dxs, strict=True):
            _label(plot, taken, p, look, dx, fig.unit)
    return plot.rows()


def _offsets(fig: KeyFigure, axes: LogAxes) -> list[list[int]]:
    """Each point's column beside its context's: an A/A run's four series (which measure the
    same thing) side by side when the contexts leave room; any point whose cell another
    series' marker holds one column aside (right, else left), so no marker hides another."""
    cols = sorted({axes.col(c) for c in contexts(fig)})
    spacing = min((b - a for a, b in zip(cols, cols[1:], strict=False)), default=axes.cols)
    n = len(fig.series)
    base = [-3, -1, 1, 3] if n == 4 and spacing >= 10 else [0] * n
    held: set[tuple[int, int]] = set()
    offsets = []
    for s, dx0 in zip(fig.series, base, strict=True):
        mine = []
        for p in s.points:
            row, col = axes.row(p.ms), axes.col(p.context) + dx0
            step = next((d for d in (0, 1, -1, 2, -2) if (row, col + d) not in held), 0)
            held.add((row, col + step))
            mine.append(dx0 + step)
        offsets.append(mine)
    return offsets


def value_text(value: float, unit: str) -> str:
    """A point's value as the figure writes it beside the point: `12.3 ms` or `7.9%`."""
    return ms_text(value) if unit == "ms" else percent_text(value)


def _label(
    plot: LogLogPlot,
    taken: set[tuple[int, int]],
    p: FigurePoint,
    look: SeriesLook,
    dx: int,
    unit: str = "ms",
) -> None:
    """The point's value beside its marker, right or else left, where it covers no marker,
    whisker or other label (a line under it may give way)."""
    axes = plot.axes
    text = value_text(p.ms, unit)
    row, col = axes.row(p.ms), axes.col(p.context) + dx
    for start in (col + 2, col - 1 - len(text)):
        span = range(start - 1, start + len(text) + 1)
        if start < 0 or start + len(text) > axes.cols:
            continue
        if any((row, c) in taken for c in span):
            continue
        plot.text(text, row, start, look.colour, "dim" if p.status is not PointStatus.VALID else "")
        taken |= {(row, c) for c in range(start, start + len(text))}
        return


def _x_labels(labels: Text, width: int, tail: str) -> Text:
    line = labels.copy()
    line.rstrip()
    if tail and line.cell_len + len(tail) <= width:
        line.append(tail, style="dim")
    return line
