"""The screen at five terminal sizes, read as a person reads it (the rendered text): the key
strings are there and whole; `z` zooms a pane to the screen and back; the log scrolls."""

from __future__ import annotations

from pathlib import Path

import pytest

from mlatui.stream.sources import ReplaySource
from mlatui.views.verdict_strip import verdict_parts
from mlatui.widgets.app import MlatuiApp
from mlatui.widgets.validity_pane import validity_summary
from tests.ui_settled import settled

# a fixed recording (a full default run, schema 3): the strings below are read from it
DEMO = Path(__file__).parents[1] / "tests" / "fixtures" / "recordings" / "cpu-default-full.jsonl.gz"
SIZES = [(80, 24), (100, 30), (120, 40), (160, 50), (200, 60)]


def screen_lines(app) -> list[str]:
    return ["".join(seg.text for seg in strip) for strip in app.screen._compositor.render_strips()]


async def replayed(pilot) -> None:
    await settled(pilot)


def demo_app(tmp_path, mode="demo") -> MlatuiApp:
    return MlatuiApp(ReplaySource(DEMO, speed=4096.0), mode=mode, ui_hz=20, out_dir=tmp_path)


@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
async def test_key_strings_whole_at_every_size(tmp_path, size):
    app = demo_app(tmp_path)
    async with app.run_test(size=size) as pilot:
        await replayed(pilot)
        lines = screen_lines(app)
        text = "\n".join(lines)
        footer = lines[-1]
        assert "? help" in footer and "q quit" in footer, footer
        assert "BLAS openblas" in text
        assert "x hide" in app.query_one("#explain").render().plain
        assert "x hide" in text  # the demo's own hint is on screen, not wrapped away
        header = lines[: app.query_one("#header").region.height]
        assert not any("…" in line for line in header), header
        assert any(line.startswith(" verdict ") for line in header)
        for part in verdict_parts(app.dash):  # every part of the strip, long or short, whole
            assert any(form in text for form in part.forms), part
        # the first page (all of a wide screen) has the key figure and the L = 1 summary
        summary = validity_summary(app.dash).plain
        assert summary[:40] in text
        figure = app.query_one("#marginal").content().plain.split("\n")
        assert figure[0].startswith("ms, lower is better") and figure[0] in text
        axis = "".join(figure[-3:])
        assert "512" in axis and "4K" in axis
        if app.compact:
            await pilot.press("2")
            await pilot.pause()
            text = "\n".join(screen_lines(app))
        assert "absorbed 4,872 · materialised 0" in text  # the arm's last line (gate calls)


async def test_z_zooms_the_focused_pane_and_back(tmp_path):
    app = demo_app(tmp_path, mode="replay")
    async with app.run_test(size=(120, 40)) as pilot:
        await replayed(pilot)
        await pilot.press("z")  # nothing focused: the key figure
        await pilot.pause()
        marginal = app.query_one("#marginal")
        assert app.screen.maximized is marginal
        assert (marginal.region.x, marginal.region.y) == (0, 0)
        assert (marginal.region.width, marginal.region.height) == (120, 39)  # all but the footer
        text = "\n".join(screen_lines(app))
        assert "ms, lower is better" in text and "L=1 check per context" not in text
        assert "stock · mlx-lm" not in text and "verdict" not in text
        lines = marginal.content().plain.split("\n")
        assert len(lines) >= 30 and sum("┤" in line for line in lines) >= 3  # more ticks
        await pilot.press("z")
        await pilot.pause()
        assert app.screen.maximized is None
        assert "L=1 check per context" in "\n".join(screen_lines(app))
        app.query_one("#validity").focus()
        await pilot.pause()
        await pilot.press("z")
        await pilot.pause()
        validity = app.query_one("#validity")
        assert app.screen.maximized is validity and validity.region.height == 39
        assert "marginal cost" not in "\n".join(screen_lines(app))
        await pilot.press("z")


async def test_zoom_is_in_the_palette_and_the_help(tmp_path):
    app = demo_app(tmp_path, mode="replay")
    async with app.run_test(size=(120, 40)):
        assert "Zoom pane" in [c.title for c in app.get_system_commands(app.screen)]
        assert any(k.id == "zoom" for k in app.keys_here())


async def test_events_log_scrolls_and_follows_the_end(tmp_path):
    app = demo_app(tmp_path, mode="replay")
    async with app.run_test(size=(120, 40)) as pilot:
        await replayed(pilot)
        log = app.query_one("#log")
        assert log.max_scroll_y > 0 and log.scroll_y == log.max_scroll_y
        last = "run completed; left out of verdicts"
        assert last in "\n".join(screen_lines(app))
        log.scroll_home(animate=False)
        await pilot.pause()
        text = "\n".join(screen_lines(app))
        assert "run started" in text and last not in text


FIVE = [(80, 24), (100, 34), (120, 40), (160, 50), (220, 60)]
RECORDINGS = {
    "demo": Path(__file__).parents[1] / "scenarios" / "demo.jsonl",
    "demo-gpu": Path(__file__).parents[1] / "scenarios" / "demo-gpu.jsonl",
    "aa": Path(__file__).parent / "fixtures" / "ui_aa_finished.jsonl.gz",
    "tune": Path(__file__).parent / "fixtures" / "ui_tune_only.jsonl.gz",
}


def pane_rows(app, selector: str) -> list[str]:
    region = app.query_one(selector).content_region
    rows = screen_lines(app)[region.y : region.bottom]
    return [row[region.x : region.right].rstrip() for row in rows]


@pytest.mark.parametrize(
    ("name", "size"),
    [
        pytest.param(
            name,
            size,
            id=f"{name}-{size[0]}x{size[1]}",
            marks=()
            if (name, size) in {("demo", (120, 40)), ("demo-gpu", (100, 34))}
            else pytest.mark.slow,
        )
        for name in RECORDINGS
        for size in FIVE
    ],
)
async def test_the_arm_panes_keep_their_head_and_face_each_other(tmp_path, name, size):
    """Both arm panes start at their first line (never scrolled to their last), list the same
    rows side by side (tok/s, each setting, the gate calls on the same row in both), and a pane
    too short for all says how many lines `z` shows; a compact screen names its page keys;
    the key figure is never narrower than the L = 1 table beside it."""
    app = MlatuiApp(
        ReplaySource(RECORDINGS[name], speed=4096.0), mode="replay", ui_hz=20, out_dir=tmp_path
    )
    async with app.run_test(size=size) as pilot:
        await replayed(pilot)
        if app.compact:
            assert "1 cost · validity" in "\n".join(screen_lines(app))
            await pilot.press("2")
            await pilot.pause()
        else:
            marginal, validity = app.query_one("#marginal"), app.query_one("#validity")
            assert marginal.region.width >= validity.region.width
        stock, patched = pane_rows(app, "#arm-stock"), pane_rows(app, "#arm-patched")
        for rows, arm in ((stock, "stock"), (patched, "patched")):
            pane = app.query_one(f"#arm-{arm}")
            first = pane.render().plain.split("\n")[0].rstrip()
            assert first.startswith(rows[0].removesuffix("…")), (rows[0], first)
            assert not rows[0].startswith(("absorbed", "gate calls")), rows
        for word in ("tok/s", "gate calls", "absorbed", "acceptance", "accept "):
            at = [
                next((i for i, r in enumerate(rows) if r.lstrip().startswith(word)), None)
                for rows in (stock, patched)
            ]
            assert at[0] == at[1], (word, stock, patched)

        def settings(rows: list[str]) -> list[str]:
            start = next(i for i, r in enumerate(rows) if r.startswith("tok/s"))
            ends = ("gate", "absorbed", "…")
            end = next((i for i, r in enumerate(rows) if r.startswith(ends)), len(rows))
            return [r.split()[0] for r in rows[start + 1 : end] if r.strip()]

        if any(r.startswith("tok/s") for r in stock):
            assert settings(stock) == settings(patched), (stock, patched)
