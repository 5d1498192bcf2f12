"""The plots' colours follow the theme: Okabe-Ito orange and sky blue on a dark theme, vermillion
and blue on a light one (widgets.palette), in the key figure and the arms' bars alike."""

from __future__ import annotations

from pathlib import Path

import pytest
from rich.style import Style
from ui_settled import settled

from mlatui.stream.sources import ReplaySource
from mlatui.widgets.app import MlatuiApp
from mlatui.widgets.palette import BLUE, ORANGE, SKY_BLUE, VERMILLION, hex_colour
from mlatui.widgets.panes import ArmPane, MarginalPane

DEMO = Path(__file__).parent / "fixtures" / "recordings" / "cpu-default-full.jsonl.gz"


def colours(text) -> set[str]:
    """The hex colours a rich Text's spans set."""
    styles = [Style.parse(s.style) if isinstance(s.style, str) else s.style for s in text.spans]
    return {s.color.triplet.hex for s in styles if s.color is not None and s.color.triplet}


@pytest.mark.system
async def test_the_plots_take_the_light_palette_with_the_light_theme(tmp_path):
    app = MlatuiApp(ReplaySource(DEMO, speed=4096.0), mode="replay", ui_hz=20, out_dir=tmp_path)
    async with app.run_test(size=(160, 50)) as pilot:
        await settled(pilot)
        figure, stock = app.query_one(MarginalPane), app.query_one("#arm-stock", ArmPane)
        dark = colours(figure.render())
        assert {hex_colour(ORANGE), hex_colour(SKY_BLUE)} <= dark, dark
        assert hex_colour(ORANGE) in colours(stock.render())
        app.theme = "textual-light"
        await pilot.pause()
        light = colours(figure.render())
        assert {hex_colour(VERMILLION), hex_colour(BLUE)} <= light, light
        assert not {hex_colour(ORANGE), hex_colour(SKY_BLUE)} & light
        assert hex_colour(VERMILLION) in colours(stock.render())


def border_rgb(pane) -> tuple[int, int, int]:
    colour = pane.styles.border_top[1]
    return (colour.r, colour.g, colour.b)


async def test_the_arm_borders_take_the_series_colours_by_theme(tmp_path):
    """The arm panes' borders are their series' colours (not red against green), by theme."""
    app = MlatuiApp(ReplaySource(DEMO, speed=4096.0), mode="replay", ui_hz=20, out_dir=tmp_path)
    async with app.run_test(size=(160, 50)) as pilot:
        stock, patched = app.query_one("#arm-stock"), app.query_one("#arm-patched")
        assert (border_rgb(stock), border_rgb(patched)) == (ORANGE, SKY_BLUE)
        app.theme = "textual-light"
        await pilot.pause()
        assert (border_rgb(stock), border_rgb(patched)) == (VERMILLION, BLUE)
