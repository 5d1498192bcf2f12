"""The header's height is its lines': computed in the same pass as the lines it draws,
at the width the layout gives it, and laid out again when a redraw changes the line count, so
the last lines (the phase line's "run completed") are never hidden by a height kept from an
earlier state. An app with the header alone: nothing else lays the screen out."""

from __future__ import annotations

from pathlib import Path

from textual.app import App, ComposeResult

from mlatui.stream.recorder import read_recording
from mlatui.views.dashboard_state import DashboardState
from mlatui.widgets.panes import HeaderPane
from mlatui.widgets.render import ViewInfo

DEMO = Path(__file__).parents[1] / "scenarios" / "demo.jsonl"


class HeaderOnly(App):
    CSS = "#header { height: auto; padding: 0 1; }"

    def __init__(self) -> None:
        super().__init__()
        self.dash = DashboardState()

    def view_info(self) -> ViewInfo:
        return ViewInfo(mode="replay", finished=True)

    def compose(self) -> ComposeResult:
        yield HeaderPane(id="header")


def screen_lines(app) -> list[str]:
    return ["".join(seg.text for seg in strip) for strip in app.screen._compositor.render_strips()]


async def test_a_redraw_that_adds_lines_makes_room_for_them():
    recording = read_recording(DEMO)
    app = HeaderOnly()
    async with app.run_test(size=(80, 24)) as pilot:
        header = app.query_one(HeaderPane)
        app.dash.apply(recording.header)
        header.redraw()
        await pilot.pause()
        before = header.region.height  # model, gate, "verdict  no result yet", phase
        assert "no result yet" in screen_lines(app)[before - 2]
        app.dash.apply_all(recording.events)  # the verdict strip takes two lines at 80 columns
        header.redraw()
        await pilot.pause()
        lines = screen_lines(app)[: header.region.height]
        assert header.region.height == before + 1, lines
        assert any("run completed" in line for line in lines), lines
        assert lines[2].startswith(" verdict ") and "Δ2 @ 4K" in lines[3], lines
