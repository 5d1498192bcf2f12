"""The key figure drawn from plain data (mlatui.views.key_figure.KeyFigure): log-log, 1-2-5 y ticks,
a marker at every measured context, 95% CI whiskers, the legend above the data area, invalid and
inconclusive contexts marked apart, and the context where the patched gate starts absorbing L=2."""

from __future__ import annotations

import math

from rich.text import Text

from mlatui.views.key_figure import FigurePoint, KeyFigure, PointStatus
from mlatui.views.rounding import fmt_context
from mlatui.views.units import ms_text
from widgets.axis import (
    fmt_tick,
    label_start,
    log_position,
    spread_labels,
    thin_evenly,
    ticks_125,
)
from widgets.canvas import Canvas

MARK_STYLE = "yellow"
MIN_PLOT_ROWS = 3
CLIPPED = "↓"  # a CI whisker that runs past the bottom of the log axis


def marker(point: FigurePoint, colour: str) -> tuple[str, str]:
    if point.status is PointStatus.INVALID:
        return "✗", f"dim {colour}"
    if point.status is PointStatus.INCONCLUSIVE:
        return "○", f"dim {colour}"
    if point.status is PointStatus.PENDING:
        return "•", colour
    return "●", f"bold {colour}"


def legend_items(fig: KeyFigure, with_ci: bool = True) -> list[tuple[str, str, str]]:
    """(symbol, style, label) for what is drawn, in reading order."""
    items = [("●", f"bold {s.colour}", s.name) for s in fig.series if s.points]
    statuses = {p.status for s in fig.series for p in s.points}
    if with_ci and has_ci(fig):
        items.append(("│", "", "95% CI"))
    if PointStatus.PENDING in statuses:
        items.append(("•", "", "L=1 check pending"))
    if PointStatus.INCONCLUSIVE in statuses:
        items.append(("○", "dim", "L=1 inconclusive"))
    if PointStatus.INVALID in statuses:
        items.append(("✗", "dim", "L=1 invalid"))
    if fig.crossover_context is not None:
        items.append(("┊", MARK_STYLE, f"L* ≥ 2 from {fmt_context(fig.crossover_context)}"))
    if any(p.low_ms is not None and p.low_ms <= 0 for s in fig.series for p in s.points):
        items.append((CLIPPED, "bold", "CI reaches ≤ 0 (off the log axis)"))
    return items


def has_ci(fig: KeyFigure) -> bool:
    return any(p.low_ms is not None and p.high_ms is not None for s in fig.series for p in s.points)


def legend_lines(fig: KeyFigure, width: int, with_ci: bool = True) -> list[Text]:
    """The axis label, then the legend items, wrapped between items (never inside one)."""
    lines = [Text(fig.y_label, style="bold")]
    for sym, style, label in legend_items(fig, with_ci):
        line = lines[-1]
        if line.cell_len + 2 + len(sym) + 1 + len(label) > width:
            lines.append(Text())
            line = lines[-1]
        else:
            line.append("  ")
        line.append(sym, style=style)
        line.append(f" {label}")
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


def y_range(fig: KeyFigure) -> tuple[float, float]:
    values = [
        v
        for s in fig.series
        for p in s.points
        for v in (p.ms, p.low_ms, p.high_ms)
        if v is not None and v > 0
    ]
    ticks = ticks_125(min(values), max(values))
    return ticks[0], ticks[-1]


def _sub_y(value: float, low: float, high: float, rows: int) -> int:
    """Braille row (0 = top) of a value on the log axis."""
    sub = rows * 4
    f = (math.log(min(max(value, low), high)) - math.log(low)) / (math.log(high) - math.log(low))
    return (sub - 1) - round(f * (sub - 1))


def key_figure_text(fig: KeyFigure, width: int, height: int) -> Text:
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
            [*legend_lines(fig, width), Text("no positive marginal cost yet"), *footnote]
        )
    legend = legend_lines(fig, width, with_ci=False)
    with_caption = height - len(legend) - len(footnote) - 3 >= 6
    if not with_caption:
        legend = legend_lines(fig, width)
    rows = height - len(legend) - len(footnote) - 2 - (1 if with_caption else 0)
    if rows < MIN_PLOT_ROWS or width < 24:
        return Text("(too small: z zooms)", style="dim")
    y_lo, y_hi = y_range(fig)
    ticks = ticks_125(y_lo, y_hi)
    tick_rows = [log_position(v, y_lo, y_hi, rows) for v in ticks]
    ticks = thin_evenly(ticks, tick_rows, min_gap=2 if rows >= 10 else 1)
    labels = {rows - 1 - log_position(v, y_lo, y_hi, rows): fmt_tick(v) for v in ticks}
    gutter = max(len(s) for s in labels.values()) + 1
    cols = width - gutter
    contexts = sorted({p.context for s in fig.series for p in s.points})
    xcol = _x_columns(contexts, cols)
    cs = list(xcol.values())
    spacing = min((b - a for a, b in zip(cs, cs[1:], strict=False)), default=cols)
    offsets = [0] * len(fig.series)
    if len(fig.series) == 2 and spacing >= 6:
        offsets = [-1, 1]
    elif len(fig.series) == 4 and spacing >= 10:  # an A/A run: A and B of each pass
        offsets = [-3, -1, 1, 3]
    canvas = Canvas(rows, cols)
    if fig.crossover_context is not None:
        col = _x_column(fig.crossover_context, contexts, cols)
        for r in range(rows):
            canvas.put(r, col, "┊", MARK_STYLE)
    for s, dx in zip(fig.series, offsets, strict=True):
        # a line joins neighbouring contexts only: never through an excluded point between them
        linked = [
            (a, b)
            for a, b in zip(s.points, s.points[1:], strict=False)
            if {a.status, b.status} <= {PointStatus.VALID, PointStatus.PENDING}
        ]
        for a, b in linked:
            canvas.line(
                2 * (xcol[a.context] + dx),
                _sub_y(a.ms, y_lo, y_hi, rows),
                2 * (xcol[b.context] + dx),
                _sub_y(b.ms, y_lo, y_hi, rows),
                s.colour,
            )
    for s, dx in zip(fig.series, offsets, strict=True):
        for p in s.points:
            col = xcol[p.context] + dx
            if p.low_ms is not None and p.high_ms is not None:
                top = _sub_y(p.high_ms, y_lo, y_hi, rows) // 4
                bottom = _sub_y(max(p.low_ms, y_lo), y_lo, y_hi, rows) // 4
                for r in range(top, bottom + 1):
                    canvas.put(r, col, "│", s.colour)
                if p.low_ms < y_lo:  # the CI goes below the axis (to 0 or under): say so
                    canvas.put(bottom, col, CLIPPED, f"bold {s.colour}")
            sym, style = marker(p, s.colour)
            canvas.put(_sub_y(p.ms, y_lo, y_hi, rows) // 4, col, sym, style)
    for s, dx in zip(fig.series, offsets, strict=True):
        for p in s.points:
            _label(canvas, _sub_y(p.ms, y_lo, y_hi, rows) // 4, xcol[p.context] + dx, p, s.colour)
    out = [*legend]
    for r in range(rows):
        line = Text()
        if r in labels:
            line.append(f"{labels[r]:>{gutter - 1}}┤", style="dim")
        else:
            line.append(" " * (gutter - 1) + "│", style="dim")
        line.append_text(canvas.row_text(r))
        out.append(line)
    out.append(_x_axis(xcol, gutter, cols))
    out.append(_x_labels(contexts, xcol, gutter, width, "" if with_caption else " tokens"))
    if with_caption:
        out.append(caption(fig, width))
    out.extend(footnote)
    return Text("\n").join(out)


def _label(canvas: Canvas, row: int, col: int, p: FigurePoint, colour: str) -> None:
    """The point's ms beside its marker, right or else left, where nothing is drawn yet."""
    text = ms_text(p.ms)
    for start in (col + 2, col - 1 - len(text)):
        cells = range(start, start + len(text))
        if (
            start >= 0
            and cells[-1] < canvas.cols
            and all(
                canvas.chars[row][c] == " "
                for c in range(start - 1, start + len(text) + 1)
                if 0 <= c < canvas.cols
            )
        ):
            for c, ch in zip(cells, text, strict=True):
                canvas.put(row, c, ch, colour)
            return


def _x_column(context: int, contexts: list[int], cols: int) -> int:
    if contexts[0] == contexts[-1]:
        return cols // 2
    inner = max(1, cols - 4)
    c = min(max(context, contexts[0]), contexts[-1])
    return 2 + log_position(c, contexts[0], contexts[-1], inner)


def _x_columns(contexts: list[int], cols: int) -> dict[int, int]:
    return {c: _x_column(c, contexts, cols) for c in contexts}


def _x_axis(xcol: dict[int, int], gutter: int, cols: int) -> Text:
    axis = ["─"] * cols
    for col in xcol.values():
        axis[col] = "┬"
    return Text(" " * (gutter - 1) + "└" + "".join(axis), style="dim")


def _x_labels(contexts: list[int], xcol: dict[int, int], gutter: int, width: int, tail: str):
    names = [fmt_context(c) for c in contexts]
    positions = [gutter + xcol[c] for c in contexts]
    keep = spread_labels(positions, names, width)
    cells = [" "] * width
    for i in keep:
        start = label_start(positions[i], names[i], width)
        cells[start : start + len(names[i])] = names[i]
    if tail and gutter > 4:  # no caption row: the gutter names the axis
        cells[: gutter - 1] = "ctx".rjust(gutter - 1)
    line = "".join(cells).rstrip()
    if tail and len(line) + len(tail) <= width:
        line += tail
    return Text(line, style="dim")
