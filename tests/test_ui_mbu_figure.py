"""The key figure's MBU view (`m`): each arm's L = 2 step's MBU against context from the
RunSummary's sweep rows, drawn at the cells its values belong to, the stock arm's re-expansion
share from the recorded byte census, the one-line notice on a recording without step bytes, and
the key switching the pane's view and title in a replay."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from test_ui_plots import drawn_axes, expected_row, plot_rows

from mlatui.measure.bandwidth import StepBytes
from mlatui.stream.recorder import read_recording
from mlatui.stream.sources import ReplaySource
from mlatui.views.dashboard_state import DashboardState
from mlatui.views.key_figure import (
    ARM_COLOURS,
    NO_BYTES,
    FigureSeries,
    FigureView,
    KeyFigure,
    PointStatus,
    mbu_figure,
    mbu_points,
    sweep_rows,
)
from mlatui.views.summary import Check, SweepRow, summarize
from mlatui.views.units import Ci
from mlatui.widgets.app import MlatuiApp
from mlatui.widgets.figure import VIEW_TITLES, key_figure_text, value_text
from mlatui.widgets.render import marginal_plot

ROOT = Path(__file__).parents[1]
H100 = ROOT / "docs" / "data" / "h100-mbu-long-context.jsonl.gz"  # carries step bytes and MBU
NO_BYTES_RUN = ROOT / "tests" / "fixtures" / "recordings" / "cpu-default-full.jsonl.gz"


def _state(path: Path) -> DashboardState:
    rec = read_recording(path)
    state = DashboardState()
    state.apply_all([rec.header, *rec.events])
    return state


@pytest.fixture(scope="module")
def h100() -> DashboardState:
    return _state(H100)


def _row(context: int, width: int, mbu: dict[str, Ci], check: Check = Check.VALID) -> SweepRow:
    return SweepRow(context, width, None, None, None, None, 8, 0, check, mbu)


def test_mbu_points_take_each_arms_l2_row_in_percent_with_its_ci_and_check():
    rows = [
        _row(1024, 1, {"stock": Ci(0.5, 0.4, 0.6)}),  # L = 1: not the figure's width
        _row(1024, 2, {"stock": Ci(0.021, 0.020, 0.024), "patched": Ci(0.02)}),
        _row(32768, 2, {"stock": Ci(0.0076, 0.0075, 0.0077)}, Check.INCONCLUSIVE),
        _row(131072, 2, {"patched": Ci(0.079, 0.070, 0.089)}, Check.INVALID),
    ]
    stock = mbu_points(rows, "stock")
    assert [(p.context, round(p.ms, 6)) for p in stock] == [(1024, 2.1), (32768, 0.76)]
    assert (stock[0].low_ms, stock[0].high_ms) == pytest.approx((2.0, 2.4))
    assert stock[1].status is PointStatus.INCONCLUSIVE
    patched = mbu_points(rows, "patched")
    assert [p.context for p in patched] == [1024, 131072]
    assert patched[0].low_ms is None  # a recording without the CI: the median alone
    assert patched[1].status is PointStatus.INVALID


@pytest.mark.parametrize("size", [(44, 14), (80, 24), (120, 40)])
def test_the_mbu_view_puts_each_point_in_its_cell(size):
    contexts = (1024, 32768, 131072)
    stock_mbu, patched_mbu = (0.1, 0.01, 0.001), (0.02, 0.0316, 0.05)  # on ticks, between
    rows = [
        _row(c, 2, {"stock": Ci(s), "patched": Ci(p)})
        for c, s, p in zip(contexts, stock_mbu, patched_mbu, strict=True)
    ]
    series = tuple(FigureSeries(a, ARM_COLOURS[a], mbu_points(rows, a)) for a in ARM_COLOURS)
    fig = KeyFigure(series, y_label="MBU of the L=2 step, %", unit="%")
    lines = key_figure_text(fig, *size).plain.split("\n")
    x_cols, y_rows = drawn_axes(lines)
    assert len(x_cols) == 3 and len(y_rows) >= 2, "\n".join(lines)
    for glyph, values in (("●", stock_mbu), ("▲", patched_mbu)):
        for col, mbu in zip(x_cols, values, strict=True):
            rows_at = [
                i for i in plot_rows(lines) if col < len(lines[i]) and lines[i][col] == glyph
            ]
            assert len(rows_at) == 1, (glyph, mbu, "\n".join(lines))
            assert abs(rows_at[0] - expected_row(mbu * 100, y_rows)) <= 0.5 + 1e-6
    assert "10%" in "\n".join(lines)  # the stock point at 1K, labelled in percent


def test_the_h100_mbu_figure_is_the_summarys_and_says_the_stock_re_expansion(h100):
    fig = mbu_figure(h100)
    rows = sweep_rows(summarize(h100))
    for s in fig.series:
        want = {r.context: r.mbu[s.name].median * 100 for r in rows if r.width == 2}
        assert {p.context: p.ms for p in s.points} == pytest.approx(want)
    assert "% of 2447 GB/s measured" in fig.y_label
    final = h100.estimates[("sweep", 131072)]
    step = StepBytes.from_dict(final.step_bytes["2"])
    share = step.materialised_extra / (step.total.low + step.materialised_extra)
    assert fig.legend_note == f"stock L=2 @128K: {share:.0%} of bytes re-expansion"
    for size in ((60, 14), (100, 24)):
        lines = marginal_plot(h100, *size, view=FigureView.MBU).plain.split("\n")
        assert any(fig.legend_note in line for line in lines), lines
        assert max(map(len, lines)) <= size[0]  # the title and legend wrap inside the pane


def test_a_recording_without_step_bytes_says_so_in_one_line():
    state = _state(NO_BYTES_RUN)
    assert state.estimates and not any(e.step_bytes for e in state.estimates.values())
    shown = marginal_plot(state, 100, 24, view=FigureView.MBU).plain
    assert shown == NO_BYTES and "\n" not in shown
    assert "marginal cost" not in shown  # the other view's data is not passed off as MBU


async def test_m_switches_the_key_figure_to_mbu_and_back(tmp_path, h100):
    app = MlatuiApp(ReplaySource(H100, speed=4096.0), mode="replay", ui_hz=20, out_dir=tmp_path)
    async with app.run_test(size=(160, 50)) as pilot:
        end = time.monotonic() + 60
        while not app._done:
            assert time.monotonic() < end
            await pilot.pause(0.02)
        await pilot.pause()
        pane = app.query_one("#marginal")
        assert pane.border_title == VIEW_TITLES[FigureView.MARGINAL]
        await pilot.press("m")
        await pilot.pause()
        assert pane.border_title == VIEW_TITLES[FigureView.MBU]
        seen = pane.render().plain
        assert seen.startswith("MBU of L=2, % of 2447 GB/s measured")
        row = next(r for r in sweep_rows(summarize(h100)) if (r.context, r.width) == (131072, 2))
        assert value_text(row.mbu["patched"].median * 100, "%") in seen  # 7.9%
        await pilot.press("m")
        await pilot.pause()
        assert pane.border_title == VIEW_TITLES[FigureView.MARGINAL]
        assert "MBU" not in pane.render().plain
