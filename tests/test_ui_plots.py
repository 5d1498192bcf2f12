"""The plots as pure functions: log ticks, the key figure's data and drawing, the arms' bars on
one scale, fitting header pieces and footer hints, the demo text."""

from __future__ import annotations

import math
from pathlib import Path

import msgspec
import pytest
import ui_events

from mlatui.stream.events import Thresholds
from mlatui.stream.recorder import read_recording
from mlatui.views.dashboard_state import DashboardState
from mlatui.views.dashboard_views import StepSeries, priority_widths, step_chart
from mlatui.views.key_figure import (
    FigurePoint,
    FigureSeries,
    KeyFigure,
    PointStatus,
    absorbs_from,
    key_figure,
    threshold_mark,
)
from mlatui.widgets import header, plot
from mlatui.widgets.figure import key_figure_text
from mlatui.widgets.keybar import Hint, fit_hints
from mlatui.widgets.plot import LogAxes, even_log_axis
from mlatui.widgets.render import DEMO_TEXT, DEMO_TINY, demo_text
from mlatui.widgets.stepchart import chart_lines

# a fixed recording (a full default run, schema 3): the strings below are read from it
DEMO = Path(__file__).parents[1] / "tests" / "fixtures" / "recordings" / "cpu-default-full.jsonl.gz"


def state_of(events) -> DashboardState:
    s = DashboardState()
    s.apply_all(events)
    return s


@pytest.fixture(scope="module")
def demo() -> DashboardState:
    rec = read_recording(DEMO)
    return state_of([rec.header, *rec.events])


# -- ticks ---------------------------------------------------------------------------------


def test_log_axis_ticks_are_a_constant_ratio_and_rows_apart_and_hold_the_data():
    cases = ((3.47, 252, 14), (3.47, 252, 6), (18.9, 49.1, 12), (0.5, 5e4, 9), (5, 5, 10))
    for low, high, rows in cases:
        ax = even_log_axis(low, high, rows)
        assert ax.low <= low and high <= ax.high, (low, high, rows, ax)
        assert len(ax.ticks) >= 2, (low, high, rows, ax)
        ratios = {round(b / a, 6) for a, b in zip(ax.ticks, ax.ticks[1:], strict=False)}
        assert len(ratios) == 1 and ratios <= {2.0, 4.0, 10.0, 100.0, 1000.0}, ax.ticks
        grid = LogAxes(60, rows + 2, (1, 2), (ax.low, ax.high), (), ())
        tick_rows = [grid.row(t) for t in ax.ticks]
        gaps = {a - b for a, b in zip(tick_rows, tick_rows[1:], strict=False)}
        assert len(gaps) == 1 and min(gaps) >= 2, (low, high, rows, tick_rows)
    assert even_log_axis(3.47, 252, 20).ticks == (10, 100)  # decades when the data spans them
    assert even_log_axis(18.9, 49.1, 12).ticks == (20, 40)  # doublings under a decade
    assert even_log_axis(0.5, 5e4, 9).ticks == (1, 100, 1e4, 1e6)  # every 2nd decade, few rows
    with pytest.raises(ValueError):
        even_log_axis(0, 10, 10)


def test_tick_labels_are_compact():
    got = [plot.fmt_tick(v) for v in (0.05, 0.5, 1, 2, 5, 20, 200, 1000, 5000, 20000, 2e6)]
    assert got == ["0.05", "0.5", "1", "2", "5", "20", "200", "1k", "5k", "20k", "2M"]


def test_a_linear_axis_top_keeps_two_digits():
    assert plot.nice_ceiling(272) == 280 and plot.nice_ceiling(9.3) == 9.3


# -- the key figure ------------------------------------------------------------------------


def test_key_figure_data_carries_ci_and_check_status(demo):
    fig = key_figure(demo)
    stock, patched = fig.series
    assert (stock.name, patched.name) == ("stock", "patched")
    by_ctx = {p.context: p for p in stock.points}
    assert by_ctx[512].status is PointStatus.INCONCLUSIVE
    assert by_ctx[4096].status is PointStatus.VALID
    assert all(p.low_ms <= p.ms <= p.high_ms for p in stock.points + patched.points)
    assert by_ctx[4096].ms > 20 * {p.context: p for p in patched.points}[4096].ms
    assert fig.crossover_context is None and "patched absorbs L=2 (L* ≥ 127)" in fig.threshold_note


def test_threshold_crossover_inside_the_measured_range():
    t = Thresholds(policy="calibrated", calibrated={512: 1, 1024: 1, 2048: 4, 4096: 8})
    assert absorbs_from({512: 1, 1024: 1, 2048: 4, 4096: 8}) == 2048
    assert threshold_mark(t, [512, 4096]) == (2048, "")
    assert threshold_mark(msgspec.structs.replace(t, policy="stock"), [512, 4096]) == (None, "")
    assert threshold_mark(t, [4096, 8192])[0] is None


def _fig(points_stock, points_patched, **kw) -> KeyFigure:
    return KeyFigure(
        (
            FigureSeries("stock", "red", tuple(points_stock)),
            FigureSeries("patched", "green", tuple(points_patched)),
        ),
        **kw,
    )


def test_key_figure_draws_legend_outside_markers_whiskers_and_ticks():
    fig = _fig(
        [
            FigurePoint(512, 18.0, 17.0, 19.0),
            FigurePoint(1024, 35.0, 34.0, 36.0, PointStatus.INVALID),
            FigurePoint(2048, 128.0, 120.0, 133.0),
            FigurePoint(4096, 241.0, 233.0, 244.0),
        ],
        [
            FigurePoint(512, 0.6, 0.5, 1.0, PointStatus.INCONCLUSIVE),
            FigurePoint(1024, 3.1, 3.0, 3.4, PointStatus.INVALID),
            FigurePoint(2048, 2.9, 1.8, 3.6),
            FigurePoint(4096, 4.2, 3.1, 5.2),
        ],
        crossover_context=1024,
    )
    lines = key_figure_text(fig, 70, 20).plain.split("\n")
    assert len(lines) == 20 and max(map(len, lines)) <= 70
    first_axis = next(i for i, line in enumerate(lines) if "┤" in line or "│" in line[:6])
    legend = "\n".join(lines[:first_axis])
    for item in (
        "ms, lower is better",
        "● stock",
        "▲ patched",
        "○△ L=1 inconclusive",
        "✗ L=1 invalid",
    ):
        assert item in legend, item
    assert "┊ L* ≥ 2 from 1K" in legend
    data = lines[first_axis : first_axis + 15]
    assert sum(line.count("●") for line in data) == 3  # stock's points whose check passed
    assert sum(line.count("▲") for line in data) == 2  # patched's
    assert sum(line.count("✗") for line in data) == 2 and any("△" in line for line in data)
    assert any("┊" in line for line in data)
    axis_line = next(line for line in lines if "└" in line)
    assert axis_line.count("┬") == 4  # a tick at every measured context
    labels = [line.split("┤")[0].strip() for line in data if "┤" in line]
    assert labels == ["100", "10", "1"]  # decades: the data spans them
    assert "512" in lines[-2] and "4K" in lines[-2] and "context (tokens)" in lines[-1]
    assert "│ 95% CI" in lines[-1]
    # no ratio of the two series' medians: it has no CI of its own
    assert not any("×" in line for line in lines)
    for ms in ("18.0", "128", "241", "2.90", "4.20", "35.0", "3.10"):  # each point's ms
        assert any(ms in line for line in data), ms


def plot_rows(lines: list[str]) -> range:
    """The rows of the data area: above the x axis, with the y axis at their left."""
    axis_row = next(i for i, line in enumerate(lines) if "└" in line)
    y_axis = lines[axis_row].index("└")
    top = axis_row
    while top > 0 and len(lines[top - 1]) > y_axis and lines[top - 1][y_axis] in "│┤":
        top -= 1
    return range(top, axis_row)


def drawn_axes(lines: list[str]) -> tuple[list[int], dict[float, int]]:
    """(the columns of the x ticks, in order; {y tick value: its row}) read off a figure."""
    axis_row = next(i for i, line in enumerate(lines) if "└" in line)
    x_cols = [i for i, ch in enumerate(lines[axis_row]) if ch == "┬"]
    units = {"k": 1e3, "M": 1e6}
    y_rows = {}
    for i, line in enumerate(lines[:axis_row]):
        if "┤" in line:
            label = line.split("┤")[0].strip()
            y_rows[float(label[:-1]) * units[label[-1]] if label[-1] in units else float(label)] = i
    return x_cols, y_rows


def expected_row(ms: float, y_rows: dict[float, int]) -> float:
    """Where `ms` belongs between the figure's own y ticks, on its log scale."""
    (v0, r0), (v1, r1) = sorted(y_rows.items())[:2]
    rows_per_decade = (r0 - r1) / math.log10(v1 / v0)
    return r0 - math.log10(ms / v0) * rows_per_decade


@pytest.mark.parametrize("size", [(40, 12), (60, 16), (80, 24), (120, 40), (160, 50)])
def test_key_figure_puts_each_point_in_its_cell(size):
    width, height = size
    contexts = (1024, 4096, 16384)
    stock = (10.0, 100.0, 1000.0)  # on the decade ticks
    patched = (2.0, 31.6, 5.0)  # between them
    fig = _fig(
        [FigurePoint(c, ms) for c, ms in zip(contexts, stock, strict=True)],
        [FigurePoint(c, ms) for c, ms in zip(contexts, patched, strict=True)],
    )
    lines = key_figure_text(fig, width, height).plain.split("\n")
    x_cols, y_rows = drawn_axes(lines)
    assert len(x_cols) == 3 and len(y_rows) >= 2, "\n".join(lines)
    gaps = [b - a for a, b in zip(x_cols, x_cols[1:], strict=False)]
    assert max(gaps) - min(gaps) <= 1  # contexts a constant ratio apart: even on the log x axis
    ys = sorted(y_rows.values())
    tick_gaps = {b - a for a, b in zip(ys, ys[1:], strict=False)}
    assert len(tick_gaps) == 1  # even y ticks
    for glyph, values in (("●", stock), ("▲", patched)):
        for col, ms in zip(x_cols, values, strict=True):
            rows = [i for i in plot_rows(lines) if col < len(lines[i]) and lines[i][col] == glyph]
            assert len(rows) == 1, (glyph, ms, size, "\n".join(lines))
            want = expected_row(ms, y_rows)
            assert abs(rows[0] - want) <= 0.5 + 1e-6, (glyph, ms, size, rows[0], want)
            if ms in y_rows:
                assert rows[0] == y_rows[ms]  # a point on a tick sits on the tick's row


H200 = DEMO.parent / "h200-real-patch.jsonl.gz"


@pytest.mark.parametrize("size", [(44, 10), (60, 12), (90, 20), (120, 30)])
@pytest.mark.parametrize("path", [DEMO, H200], ids=["cpu", "h200"])
def test_recorded_points_sit_where_their_ms_belongs(path, size):
    rec = read_recording(path)
    fig = key_figure(state_of([rec.header, *rec.events]))
    lines = key_figure_text(fig, *size).plain.split("\n")
    x_cols, y_rows = drawn_axes(lines)
    contexts = sorted({p.context for s in fig.series for p in s.points})
    assert len(x_cols) == len(contexts) and len(y_rows) >= 2
    col_of = dict(zip(contexts, x_cols, strict=True))
    for s, glyphs in zip(fig.series, ("●○•", "▲△▴"), strict=True):
        for p in s.points:
            col = col_of[p.context]  # or a column aside, where another series' marker is
            rows = [
                i
                for i in plot_rows(lines)
                for c in (col, col + 1, col - 1)
                if c < len(lines[i]) and lines[i][c] in glyphs
            ]
            assert rows, (s.name, p, "\n".join(lines))
            assert min(abs(r - expected_row(p.ms, y_rows)) for r in rows) <= 0.5 + 1e-6, (
                s.name,
                p,
                size,
                "\n".join(lines),
            )


def test_key_figure_marks_clipped_cis_and_draws_no_line_through_excluded_points():
    fig = _fig(
        [FigurePoint(512, 20.0), FigurePoint(2048, 80.0, 70.0, 90.0), FigurePoint(8192, 320.0)],
        [
            FigurePoint(512, 4.0, -1.0, 6.0),  # a CI that crosses zero
            FigurePoint(2048, 5.0, 4.0, 6.0, PointStatus.INVALID),
            FigurePoint(8192, 6.0, 5.0, 7.0),
        ],
    )
    lines = key_figure_text(fig, 70, 24).plain.split("\n")
    assert "↓ CI reaches ≤ 0" in "\n".join(lines[:3])
    data = [line for line in lines if "┤" in line or line.lstrip().startswith("│")]
    assert sum(line.count("↓") for line in data) == 1
    cross = next(i for i, line in enumerate(lines) if "✗" in line)
    col = lines[cross].index("✗")
    # stock's line passes 2K (both its neighbours valid); patched's has no line into 2K
    left = lines[cross][col - 12 : col]
    assert not any("\u2800" <= ch <= "\u28ff" for ch in left), lines[cross]


def test_key_figure_counts_points_off_the_log_axis_and_waits():
    fig = _fig([FigurePoint(512, 4.0)], [FigurePoint(512, 2.0)], not_positive=2)
    text = key_figure_text(fig, 50, 12).plain
    assert "2 point(s) ≤ 0 ms" in text
    assert "waiting" in key_figure_text(key_figure(DashboardState()), 50, 12).plain


def test_key_figure_fits_small_and_says_so_when_too_small(demo):
    for w, h in ((40, 8), (60, 12), (150, 30)):
        lines = key_figure_text(key_figure(demo), w, h).plain.split("\n")
        assert len(lines) <= h and max(map(len, lines)) <= w
    assert "too small" in key_figure_text(key_figure(demo), 30, 4).plain


# -- the arms' bars ------------------------------------------------------------------------


def test_step_series_keep_phases_widths_and_contexts_apart():
    s = StepSeries()
    s.add("sweep", "stock", 2, 512, 10.0)
    s.add("sweep", "stock", 2, 1024, 20.0)
    s.add("sweep", "patched", 2, 1024, 5.0)
    s.add("sweep", "stock", 1, 1024, 4.0)
    chart = step_chart(s, ("stock", "patched"), lambda c, p: c == 512)
    assert chart.phase == "sweep" and chart.contexts == (512, 1024) and chart.widths == (1, 2)
    assert chart.scale_ms == 20.0 and chart.latest_context == 1024
    assert chart.medians["stock"] == {1: 4.0, 2: 20.0} and chart.medians["patched"] == {2: 5.0}
    s.add("tune:verify", "stock", 3, 2000, 99.0)
    later = step_chart(s, ("stock", "patched"), lambda c, p: False)
    assert later.phase == "tune:verify" and later.contexts == (2000,) and later.scale_ms == 99.0
    assert priority_widths((1, 2, 3, 4), 2) == (1, 2) and priority_widths((1, 2, 3), 1) == (2,)


def test_bars_share_one_scale_from_zero_across_arms():
    s = StepSeries()
    for _ in range(4):
        s.add("sweep", "stock", 2, 4096, 132.0)
        s.add("sweep", "patched", 2, 4096, 36.6)
    chart = step_chart(s, ("stock", "patched"), lambda c, p: False)
    stock = chart_lines(chart, "stock", 20, 5, "red")
    patched = chart_lines(chart, "patched", 20, 5, "green")
    assert len(stock) == len(patched) == 5 and stock[-1].plain.strip() == "4K"

    def filled(lines):  # eighths of a column, summed over the panel's rows
        return sum(" ▁▂▃▄▅▆▇█".index(line.plain[4]) for line in lines[:-1])

    assert filled(stock) == round(132 / 140 * 32)  # 4 rows of 8 eighths, 0-140 ms
    assert round(filled(patched) / filled(stock), 1) == round(36.6 / 132, 1)


def test_bars_grey_failed_contexts_and_label_each_segment():
    s = StepSeries()
    for c in (512, 1024, 2048):
        for _ in range(3):
            s.add("sweep", "stock", 2, c, c / 100)
    chart = step_chart(s, ("stock",), lambda c, p: c == 1024)
    lines = chart_lines(chart, "stock", 30, 3, "red")
    assert lines[-1].plain.split() == ["512", "1K", "2K"]
    body = lines[-2]  # the bottom row: every segment has a bar there
    grey = [body.plain[sp.start : sp.end] for sp in body.spans if sp.style == "grey42"]
    red = [body.plain[sp.start : sp.end] for sp in body.spans if sp.style == "red"]
    assert len(grey) == 1 and len(red) == 2 and grey[0].strip()
    assert chart_lines(chart, "stock", 30, 1, "red") == []


# -- fitting -------------------------------------------------------------------------------


def test_pieces_shorten_then_drop_never_cut():
    pieces = [
        header.piece("L* formula 170 (T→∞) · 157 at T=2000", "L* 170 157@2000"),
        header.piece("AMD EPYC x86_64 · BLAS openblas", "AMD EPYC · BLAS openblas"),
        header.piece("scenario default"),
        header.piece("draft draft-model:embedded", priority=3),
    ]
    wide = header.join_pieces(header.fit_pieces(pieces, 200)).plain
    assert "draft" in wide and "x86_64" in wide
    narrow = header.join_pieces(header.fit_pieces(pieces, 78)).plain
    assert len(narrow) <= 78 and "BLAS openblas" in narrow and "scenario default" in narrow
    assert "draft" not in narrow


def test_parts_wrap_between_parts():
    from rich.text import Text

    lines = header.wrap_parts([Text("a" * 10), Text("b" * 10), Text("c" * 10)], 27, 4)
    assert [line.plain for line in lines] == ["a" * 10 + " · " + "b" * 10, "    " + "c" * 10]


def test_footer_hints_keep_help_and_quit():
    hints = [
        Hint(("p",), "pause", 1),
        Hint(("space",), "step", 2),
        Hint(("s",), "shot", 4),
        Hint(("t",), "theme", 4),
        Hint(("?",), "help", 0),
        Hint(("q",), "quit", 0),
    ]
    assert fit_hints(hints, 200) == [0, 1, 2, 3, 4, 5]
    assert fit_hints(hints, 33) == [0, 1, 4, 5]
    assert fit_hints(hints, 5) == [4, 5]


def test_demo_text_keeps_its_hide_hint_in_view():
    assert demo_text(156) == DEMO_TEXT
    for width in (60, 96, 116, 140):
        text = demo_text(width)
        import textwrap

        assert len(textwrap.wrap(text, width)) <= 4 and "x hide" in text
    assert demo_text(76, lines=2) == DEMO_TINY


def test_fake_stream_fills_the_figure_and_bars():
    s = state_of(ui_events.events())
    fig = key_figure(s)
    assert {p.context for p in fig.series[0].points} == set(ui_events.CONTEXTS)
    chart = step_chart(s.steps, tuple(s.arms), s.is_invalid)
    assert chart is not None and chart.widths
