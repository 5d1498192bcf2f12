"""Finished recordings as a reader checks them: the L = 1 table in phase then context order, an
A/A's Δ2 looked up per pass and its key figure's legend in A/B, a tune-only run that says it has
no sweep to plot (not "waiting"), the palette listing each action once, and the L = 1 pane
growing with the terminal."""

from __future__ import annotations

import time
from pathlib import Path

from mlatui.stream.recorder import read_recording
from mlatui.stream.sources import ReplaySource
from mlatui.views.dashboard_state import DashboardState
from mlatui.views.units import ms_text
from mlatui.widgets.app import MlatuiApp
from mlatui.widgets.render import marginal_plot
from mlatui.widgets.validity_pane import phase_marginal, validity_text

ROOT = Path(__file__).parent
DEMO = ROOT.parent / "scenarios" / "demo.jsonl"
AA = ROOT / "fixtures" / "ui_aa_finished.jsonl.gz"
TUNE = ROOT / "fixtures" / "ui_tune_only.jsonl.gz"


def _state(path: Path) -> DashboardState:
    rec = read_recording(path)
    state = DashboardState()
    state.apply_all([rec.header, *rec.events])
    return state


def _rows(state: DashboardState) -> list[list[str]]:
    lines = validity_text(state, 120).plain.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("phase"))
    return [line.split() for line in lines[head + 1 :] if line and not line.startswith("L=1 ms")]


def test_the_l1_table_is_in_phase_then_context_order():
    state = _state(DEMO)
    rows = _rows(state)
    order = {p[:5]: i for i, p in enumerate(state.phase_kinds)}
    keys = [(order[r[0].rstrip("*")], state_context(r[1])) for r in rows]
    assert len(keys) >= 3 and keys == sorted(keys), rows


def state_context(text: str) -> int:
    return int(text[:-1]) * 1024 if text.endswith("K") else int(text)


def test_an_aa_table_reads_each_pass_own_d2_and_its_legend_says_a_b():
    state = _state(AA)
    rows = {r[0]: r for r in _rows(state)}
    assert {"sw·st", "sw·pa"} <= set(rows), rows
    for short, phase in (("sw·st", "sweep/aa-stock"), ("sw·pa", "sweep/aa-patched")):
        context = state_context(rows[short][1])
        shown = rows[short][-2:]  # Δ2 A, B
        want = [ms_text(phase_marginal(state, phase, arm, context)) for arm in ("stock", "patched")]
        assert shown == want, (short, rows[short], want)
    assert rows["sw·st"][-2:] != rows["sw·pa"][-2:]  # two passes, two sets of figures
    figure = marginal_plot(state, 120, 30).plain
    assert "● A stock" in figure and "◆ B patched" in figure  # slots A and B, then the pass
    assert "stock/patched" not in figure and "stock / patched" not in figure


def test_a_finished_tune_only_run_says_it_has_no_sweep_to_plot():
    state = _state(TUNE)
    assert state.status == "completed"
    figure = marginal_plot(state, 120, 30).plain
    assert "no sweep steps to plot" in figure and "waiting" not in figure


async def test_the_palette_lists_each_action_once_and_the_l1_pane_grows(tmp_path):
    widths = {}
    for size in ((120, 40), (220, 60)):
        app = MlatuiApp(ReplaySource(DEMO, speed=4096.0), mode="replay", ui_hz=20, out_dir=tmp_path)
        async with app.run_test(size=size) as pilot:
            end = time.monotonic() + 60
            while not app._done:
                assert time.monotonic() < end
                await pilot.pause(0.02)
            await pilot.pause()
            titles = [c.title for c in app.get_system_commands(app.screen)]
            assert len(titles) == len(set(titles)), titles
            widths[size[0]] = app.query_one("#validity").region.width
    assert widths[220] > 54 and widths[220] > widths[120], widths
