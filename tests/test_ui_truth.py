"""The finished demo as a person reads it at four terminal sizes: the verdict keeps the
speedup's CI and both Δ2 figures at every size, a compact screen opens on the key figure and
the L = 1 checks, and the arm panes' medians are the exported table's (one estimator)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from mlatui.stream.sources import ReplaySource
from mlatui.views.units import ms_text
from mlatui.widgets.app import MlatuiApp
from mlatui.widgets.panes import HeaderPane
from tests.summaries import csv_rows
from tests.ui_settled import settled

DEMO = Path(__file__).parents[1] / "scenarios" / "demo.jsonl"
SIZES = [(80, 24), (120, 40), (160, 50), (220, 60)]


def screen_lines(app) -> list[str]:
    return ["".join(seg.text for seg in strip) for strip in app.screen._compositor.render_strips()]


async def finished(pilot) -> None:
    await settled(pilot)


@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
async def test_the_verdict_keeps_its_ci_and_both_d2_figures_on_the_first_page(tmp_path, size):
    app = MlatuiApp(ReplaySource(DEMO, speed=4096.0), mode="replay", ui_hz=20, out_dir=tmp_path)
    async with app.run_test(size=size) as pilot:
        await finished(pilot)
        lines = screen_lines(app)
        header_pane = app.query_one("#header", HeaderPane)
        header = "\n".join(lines[: header_pane.region.height])
        assert header_pane.shows_every_line(), header  # settled: the height is its lines'
        assert "1.124× [1.009, 1.157]" in header, header  # patched's speedup and its CI
        assert re.search(r"252 vs 14\.0 ms", header), header  # stock's and patched's Δ2 at 4K
        text = "\n".join(lines)
        assert "ms, lower is better" in text and "252" in text  # the key figure, its points
        assert "✓ every checked context valid" in text  # the L = 1 summary
        assert "run completed" in header  # the progress line is not wrapped over


async def test_the_arm_panes_medians_are_the_exported_tables(tmp_path):
    app = MlatuiApp(ReplaySource(DEMO, speed=4096.0), mode="replay", ui_hz=20, out_dir=tmp_path)
    async with app.run_test(size=(160, 50)) as pilot:
        await finished(pilot)
        exported = {
            (r["arm"], r["width"]): r["median"]
            for r in csv_rows(app.dash)
            if r["table"] == "sweep" and r["quantity"] == "step_ms" and r["context"] == 4096
        }
        for arm in ("stock", "patched"):
            pane = app.query_one(f"#arm-{arm}").content().plain
            line = next(x for x in pane.splitlines() if x.startswith("@ 4K median over rounds"))
            shown = dict(re.findall(r"L=(\d) ([\d.]+)", line))
            assert shown and {int(w) for w in shown} == {1, 2, 3}, line
            for w, ms in shown.items():
                assert ms == ms_text(float(exported[(arm, int(w))])), (arm, w, line, exported)


def test_a_long_error_wraps_whole_and_each_bound_rejection_is_logged_once():
    from mlatui.stream.recorder import read_recording
    from mlatui.views.dashboard_state import DashboardState
    from mlatui.widgets.render import phase_text

    s = DashboardState()
    s.error = (
        "ModelError: scenario model 'glm' cannot be loaded: mlx-lm's conversion drops the "
        "model's MTP layers. What to do: pass --mtp-from with the original checkpoint."
    )
    lines = phase_text(s, 80).plain.splitlines()
    assert len(lines) > 1 and all(len(x) <= 80 for x in lines)
    assert " ".join(lines).endswith("the original checkpoint.")  # the remedy is on screen
    rec = read_recording(DEMO)
    s = DashboardState()
    s.apply_all([rec.header, *rec.events])
    said = [m for _, _, m in s.log if "mtp d1" in m and "runtime allowance" in m]
    assert len(said) == 1, said
