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


def _luminance(rgb: tuple[int, int, int]) -> float:
    def channel(c: int) -> float:
        x = c / 255
        return x / 12.92 if x <= 0.03928 else ((x + 0.055) / 1.055) ** 2.4

    r, g, b = rgb
    return 0.2126 * channel(r) + 0.7152 * channel(g) + 0.0722 * channel(b)


def contrast(a: tuple[int, int, int], b: tuple[int, int, int]) -> float:
    """WCAG 2's contrast ratio of two colours."""
    hi, lo = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


async def test_every_status_colour_reads_on_every_theme():
    """4.5:1 on the screen's background (WCAG AA), 3:1 on the header's panel (its verdict is
    bold), in each theme the `t` key cycles through."""
    from textual.app import App
    from textual.color import Color

    from mlatui.widgets.app import THEMES
    from mlatui.widgets.palette import Status, status_colour

    app = App()
    async with app.run_test() as pilot:
        for theme in THEMES:
            app.theme = theme
            await pilot.pause()
            ground = app.get_css_variables()
            dark = app.current_theme.dark
            for status in Status:
                rgb = status_colour(status, dark)
                for where, least in (("background", 4.5), ("surface", 3.0), ("panel", 3.0)):
                    on = Color.parse(ground[where]).rgb
                    assert contrast(rgb, on) >= least, (theme, status, where)


def screen_colours(app, word: str, pane: str = "header") -> set[str]:
    """The colours the screen draws `word` in inside a pane (every segment holding it), as the
    text's colour: a reversed segment (the colour as its background) counts as `reverse`."""
    region = app.query_one(f"#{pane}").region
    found = set()
    for y, strip in enumerate(app.screen._compositor.render_strips()):
        x = 0
        for seg in strip:
            inside = region.contains(x, y)
            if inside and word in seg.text and seg.style is not None and seg.style.color:
                found.add("reverse" if seg.style.reverse else seg.style.color.triplet.hex)
            x += seg.cell_length
    return found


@pytest.mark.system
async def test_the_status_colours_on_screen_follow_the_theme(tmp_path):
    """What a person sees on the demo: the winning speedup and ★ blue, the rejected arm and the
    losing speedup vermillion, ✓p bluish green; never the red and green they replace."""
    from mlatui.widgets.palette import Status, status_colour

    demo = Path(__file__).parents[1] / "scenarios" / "demo.jsonl"
    app = MlatuiApp(ReplaySource(demo, speed=4096.0), mode="replay", ui_hz=20, out_dir=tmp_path)
    async with app.run_test(size=(160, 50)) as pilot:
        await settled(pilot)
        for theme in ("textual-dark", "textual-light"):
            app.theme = theme
            await pilot.pause()
            dark = app.current_theme.dark
            good, bad, pooled = (
                hex_colour(status_colour(s, dark)) for s in (Status.GOOD, Status.BAD, Status.POOLED)
            )
            assert screen_colours(app, "spec wins 1.124× [1.009, 1.157]") == {good}, theme
            assert screen_colours(app, "stock spec rejected") == {bad}, theme
            assert screen_colours(app, "1.124× [1.009, 1.157]", "arm-patched") == {good}, theme
            assert screen_colours(app, "★", "arm-patched") == {good}, theme
            assert screen_colours(app, "0.401× [0.361, 0.458]", "arm-stock") == {bad}, theme
            assert screen_colours(app, "bound ≤ 0.70×", "arm-stock") == {bad}, theme
            assert screen_colours(app, "✓p", "validity") == {pooled}, theme
