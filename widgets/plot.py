"""A log-log plot drawn by plotext inside our widgets: the figure is built on plotext's canvas
(markers, braille lines, whiskers, gridline-free axes, ticks, text) and its output is turned
into rich Text rows. Values go in as they are; the plot takes their log10, so plotext's linear
axes are the log axes and every cell is where plotext's own mapping puts it (`col`, `row`).
The axis arithmetic of every character plot lives here too: compact tick labels (`fmt_tick`)
and a linear axis' top (`nice_ceiling`, the step bars').

plotext keeps one global figure: plots are built on the UI thread only, one at a time."""

from __future__ import annotations

import math
from dataclasses import dataclass

import plotext as plx
from rich.text import Text

from mlatui.views.units import fmt_context

RGB = tuple[int, int, int]


def fmt_tick(value: float) -> str:
    """Tick values compactly: 0.05, 0.5, 5, 50, 500, 5k, 50k, 500k, 5M."""
    if value <= 0:
        return "0"
    for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if value >= scale:
            return f"{value / scale:g}{suffix}"
    return f"{value:.6g}"


def nice_ceiling(value: float) -> float:
    """The next value >= `value` with two significant digits (a linear axis' top: 272 -> 280)."""
    if value <= 0:
        return 1.0
    exp = math.floor(math.log10(value)) - 1
    step = 10.0**exp
    return math.ceil(value / step - 1e-9) * step


def cell(value: float, low: float, high: float, cells: int) -> int:
    """The cell (0 .. cells-1) plotext puts `value` in on an axis from low to high
    (plotext's utility.get_matrix_data: round half up, after rounding away float noise)."""
    if cells <= 1 or high == low:
        return 0
    return math.floor(round(0.5 + (cells - 1) * (value - low) / (high - low), 8))


@dataclass(frozen=True)
class LogAxes:
    """The plot's geometry: its size, the value range of each axis, and the ticks."""

    width: int
    height: int
    x_range: tuple[float, float]  # values (context tokens), log axis
    y_range: tuple[float, float]  # values (ms), log axis
    x_ticks: tuple[tuple[float, str], ...]
    y_ticks: tuple[tuple[float, str], ...]

    @property
    def gutter(self) -> int:
        """Columns left of the data area: the longest y label, then the axis."""
        return max((len(label) for _, label in self.y_ticks), default=0) + 1

    @property
    def cols(self) -> int:
        return self.width - self.gutter

    @property
    def rows(self) -> int:
        return self.height - 2  # the x axis and its labels under the data

    def col(self, x: float) -> int:
        """The data-area column of value `x` (0 = the first column right of the axis)."""
        lo, hi = (math.log10(v) for v in self.x_range)
        return cell(math.log10(x), lo, hi, self.cols)

    def row(self, y: float) -> int:
        """The data-area row of value `y`, 0 at the top."""
        lo, hi = (math.log10(v) for v in self.y_range)
        y = min(max(y, self.y_range[0]), self.y_range[1])
        return self.rows - 1 - cell(math.log10(y), lo, hi, self.rows)

    def x_at(self, col: int) -> float:
        """The log10 value plotext maps to the middle of data column `col`."""
        lo, hi = (math.log10(v) for v in self.x_range)
        return lo + (hi - lo) * col / max(1, self.cols - 1)

    def y_at(self, row: int) -> float:
        lo, hi = (math.log10(v) for v in self.y_range)
        return lo + (hi - lo) * (self.rows - 1 - row) / max(1, self.rows - 1)


class LogLogPlot:
    """One figure on plotext's canvas. Calls draw in order: a later one covers an earlier."""

    def __init__(self, axes: LogAxes):
        self.axes = axes
        plx.clear_figure()
        plx.limitsize(False, False)  # the pane, not the terminal plotext sees, sets the size
        plx.plotsize(axes.width, axes.height)
        plx.theme("clear")  # no backgrounds: the pane's own colours show through
        plx.xaxes(True, False)
        plx.yaxes(True, False)
        lx = [math.log10(v) for v in axes.x_range]
        ly = [math.log10(v) for v in axes.y_range]
        plx.xlim(*lx)
        plx.ylim(*ly)
        plx.xticks([math.log10(v) for v, _ in axes.x_ticks], [s for _, s in axes.x_ticks])
        # the labels right-aligned to one width, so the gutter is the same on every row
        width = axes.gutter - 1
        plx.yticks(
            [math.log10(v) for v, _ in axes.y_ticks], [s.rjust(width) for _, s in axes.y_ticks]
        )

    def line(self, xs: list[float], ys: list[float], colour: RGB, dx: int = 0) -> None:
        """A braille line through the points (values), from the middle of each point's cell:
        plotext maps braille dots on a grid 2x4 finer than its cells, which can put a line's end
        a cell away from the marker of the same value."""
        if len(xs) < 2:
            return
        a = self.axes
        cols = [a.col(x) + dx for x in xs]
        rows = [a.rows - 1 - a.row(y) for y in ys]  # from the bottom, as plotext counts
        lx, ly = (math.log10(v) for v in a.x_range), (math.log10(v) for v in a.y_range)
        (x0, x1), (y0, y1) = lx, ly
        sub_x = [x0 + (x1 - x0) * (2 * c + 0.5) / max(1, 2 * a.cols - 1) for c in cols]
        sub_y = [y0 + (y1 - y0) * (4 * r + 1.5) / max(1, 4 * a.rows - 1) for r in rows]
        plx.plot(sub_x, sub_y, marker="braille", color=colour)

    def _x(self, x: float, dx: int) -> float:
        """log10 of `x`, or the middle of the cell `dx` columns beside it."""
        return self.axes.x_at(self.axes.col(x) + dx) if dx else math.log10(x)

    def whisker(self, x: float, low: float, high: float, colour: RGB, dx: int = 0) -> None:
        low = max(low, self.axes.y_range[0])
        lx = self._x(x, dx)
        plx.plot([lx, lx], _logs([low, high]), marker="│", color=colour)

    def marker(
        self, x: float, y: float, glyph: str, colour: RGB, style: str = "", dx: int = 0
    ) -> None:
        plx.scatter([self._x(x, dx)], _logs([y]), marker=glyph, color=colour, style=style or None)

    def vline(self, x: float, glyph: str, colour: RGB) -> None:
        """A dotted vertical line across the data area (plotext's vline is solid and crosses
        the axis)."""
        plx.plot(_logs([x, x]), _logs(list(self.axes.y_range)), marker=glyph, color=colour)

    def text(self, text: str, row: int, col: int, colour: RGB, style: str = "") -> None:
        """`text` starting at data cell (row from the top, col)."""
        plx.text(
            text,
            self.axes.x_at(col),
            self.axes.y_at(row),
            color=colour,
            style=style or None,
            alignment="left",
        )

    def rows(self) -> list[Text]:
        """The built figure: `height` rows of `width` cells, axes and tick labels dim."""
        out = Text.from_ansi(plx.build()).split("\n", allow_blank=True)
        rows = [line for line in out][: self.axes.height]
        gutter = self.axes.gutter
        for i, line in enumerate(rows):
            line.rstrip()
            if i < self.axes.rows:
                line.stylize("dim", 0, gutter)
            else:
                line.stylize("dim")
        return rows


def _logs(values: list[float]) -> list[float]:
    return [math.log10(v) for v in values]


@dataclass(frozen=True)
class EvenLogAxis:
    low: float  # the axis' ends (values)
    high: float
    ticks: tuple[float, ...]  # every tick the same number of rows from the next


DOUBLING = math.log10(2)
# tick steps in decades, in order of preference: decades, every 2nd or 3rd decade (few rows for
# a wide range), doublings from a power of ten (10, 20, 40, 80: a range under a decade or two)
STEPS = (1.0, 2.0, 3.0, DOUBLING, 2 * DOUBLING)


def even_log_axis(low: float, high: float, rows: int, min_gap: int = 2) -> EvenLogAxis:
    """A log axis over `rows` rows holding [low, high], with ticks a constant ratio apart that
    land on rows a constant number of rows apart (at least `min_gap`): the axis' ends are chosen
    so that every tick sits exactly on a row, the data centred between them."""
    if low <= 0 or high <= 0:
        raise ValueError("a log axis needs positive bounds")
    a, b = sorted((math.log10(low), math.log10(high)))
    if b - a < 1e-6:  # one value: a decade around it
        a, b = a - 0.5, b + 0.5
    fallback: EvenLogAxis | None = None
    for step in STEPS:
        gap = math.floor((rows - 3) * step / (b - a))  # rows per step; 2 rows of slack
        if gap < 1:
            continue
        per_unit = gap / step  # rows per decade
        total = (rows - 1) / per_unit  # decades the axis spans
        lo = a - (total - (b - a)) / 2
        # ticks at whole steps from 1 (1, 100, 10k), doublings from the power of ten below the data
        anchor = 0 if step >= 1 else math.floor(a + 1e-9)
        first = anchor + math.ceil((lo - anchor) / step - 1e-9) * step
        lo = first - math.ceil((first - lo) * per_unit - 1e-9) / per_unit  # first on a row
        hi = lo + total
        ticks = []
        t = first
        while t <= hi + 1e-9:
            ticks.append(float(f"{10**t:.6g}"))
            t += step
        axis = EvenLogAxis(10**lo, 10**hi, tuple(ticks))
        if len(ticks) >= 2 and gap >= min_gap:
            return axis
        fallback = fallback or axis
    if fallback is None:  # too few rows for any step: the data's own range, unticked
        return EvenLogAxis(low, high if high > low else low * 10, ())
    return fallback


def log_log_axes(ms: list[float], contexts: list[int], width: int, height: int) -> LogAxes:
    """Axes for ms (all > 0) against context: y ticks from `even_log_axis`, x ticks at every
    context, with room beside the end markers (2 cells left, up to 6 right for a label)."""
    y_axis = even_log_axis(min(ms), max(ms), height - 2)
    labels = tuple((t, fmt_tick(t)) for t in y_axis.ticks)
    cols = width - (max((len(s) for _, s in labels), default=0) + 1)
    lo, hi = min(contexts), max(contexts)
    if lo == hi:
        x_range = (lo / 2, hi * 2)
    else:
        left, right = 2, min(6, max(1, cols // 8))
        per_cell = (hi / lo) ** (1 / max(1, cols - 1 - left - right))
        x_range = (lo / per_cell**left, hi * per_cell**right)
    x_ticks = tuple((float(c), fmt_context(c)) for c in sorted(set(contexts)))
    return LogAxes(width, height, x_range, (y_axis.low, y_axis.high), x_ticks, labels)
