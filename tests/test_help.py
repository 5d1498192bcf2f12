"""Help that says where to start: `mlatui`, `--help`, `launch --help`, and the `?` screen
(the keys that work in this mode, grouped, from the one key table that also makes the bindings
and the palette; a Symbols page for every glyph and colour on screen)."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
import ui_events

from mlatui.cli import main
from mlatui.config.outputs import new_record_path, runs_dir
from mlatui.config.run_plan import RunConfig
from mlatui.stream.sources import LiveSource, ReplaySource
from mlatui.views.keys import KEYS, KeyGroup, Only, keys_for
from mlatui.widgets.app import MlatuiApp
from mlatui.widgets.help import HelpScreen
from mlatui.widgets.palette import Status, status_style

FIXTURE = Path(__file__).parent / "fixtures" / "ui_tiny_run.jsonl"
REPLAY_IDS = {"step", "faster", "slower", "seek-back", "seek-forward"}


def _start_here(text: str) -> None:
    assert "start here:" in text
    assert text.index("mlatui demo") < text.index("mlatui launch") < text.index("mlatui bench")


def test_bare_mlatui_and_help_say_where_to_start(capsys):
    assert main([]) == 2  # no command is still a usage error, with the way in above it
    err = capsys.readouterr().err
    _start_here(err)
    assert err.splitlines()[-1].startswith(
        "mlatui: error: no command given — start with `mlatui demo`"
    )
    with pytest.raises(SystemExit) as e:
        main(["--help"])
    assert e.value.code == 0
    _start_here(capsys.readouterr().out)


def test_launch_help_names_the_recording_path_and_the_live_keys(capsys):
    with pytest.raises(SystemExit):
        main(["launch", "--help"])
    out = capsys.readouterr().out
    shown = f"{runs_dir()}/run-<date>-<time>-<microseconds>-<pid>.jsonl"
    assert shown in out
    written = new_record_path("run", runs_dir())  # the name the code gives a run's recording
    written.unlink()
    assert re.fullmatch(re.sub(r"<[a-z]+>", r"\\d+", re.escape(shown)), str(written))
    with pytest.raises(SystemExit):
        main(["bench", "observer", "--help"])
    said = " ".join(capsys.readouterr().out.split())  # argparse folds the line
    assert "a new observer-<date>-<time>-<microseconds>-<pid>.jsonl here" in said
    keys = out[out.index("keys in the dashboard:") :]
    for k in keys_for(replay=False):
        assert f"  {k.key} " in keys and k.description in keys, k
    assert all(k.description not in keys for k in KEYS if k.only is Only.REPLAY)
    with pytest.raises(SystemExit):
        main(["replay", "--help"])
    keys = capsys.readouterr().out
    assert "seek back" in keys
    assert all(k.description not in keys for k in KEYS if k.only is Only.LIVE)


async def test_bindings_palette_and_help_come_from_the_one_key_table():
    table = {k.id: k for k in KEYS}
    for b in MlatuiApp.BINDINGS:  # every binding is a row of the table, with its action
        assert b.id in table and table[b.id].action == b.action, b
    assert {b.id for b in MlatuiApp.BINDINGS} == {k.id for k in KEYS if not k.builtin}
    ours = {k.title for k in keys_for(replay=True, compact=True) if k.title}
    app = MlatuiApp(ReplaySource(FIXTURE, speed=1.0))
    async with app.run_test(size=(80, 24)):  # compact: the page keys work
        titles = [c.title for c in app.get_system_commands(app.screen)]
        assert ours <= set(titles) and len(titles) == len(set(titles))
        assert "Keys" not in titles  # Textual's own keys panel is not offered
        assert app.keys_here() == keys_for(replay=True, compact=True)


async def _help(app, size=(120, 40)) -> HelpScreen:
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        box = app.screen.query_one("#help-box").region
        assert box.width > 0 and box.height > 0
        return app.screen


async def test_live_help_lists_live_keys_only(tmp_path):
    src = LiveSource(
        RunConfig(overrides={"delay_s": 0.05}),
        engine=ui_events.fake_engine,
        record=tmp_path / "live.jsonl",
    )
    app = MlatuiApp(src, ui_hz=20, out_dir=tmp_path)
    screen = await _help(app)
    ids = {k.id for k in screen.keys}
    assert {"pause", "export", "screenshot", "theme", "help", "quit", "more-rounds"} <= ids
    assert not ids & REPLAY_IDS  # no seek, speed or step keys in a live run
    assert "seek back" not in screen.text and "export the summary" in screen.text
    end = time.monotonic() + 30
    while src.alive and time.monotonic() < end:
        time.sleep(0.05)


def screen_lines(app) -> list[str]:
    return ["".join(seg.text for seg in strip) for strip in app.screen._compositor.render_strips()]


async def test_help_is_ours_grouped_and_scrolls_at_80x24_with_a_symbols_page(tmp_path):
    app = MlatuiApp(ReplaySource(FIXTURE, speed=1.0), ui_hz=20, out_dir=tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await pilot.press("question_mark")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, HelpScreen)
        text = screen.text
        headings = [g.value.upper() for g in KeyGroup]
        assert [text.index(h) for h in headings] == sorted(text.index(h) for h in headings)
        for internal in ("quit-ctrl-c", "ctrl+c", "super+c", "set_keymap", "Binding ids", "["):
            assert internal not in text, internal
        assert REPLAY_IDS <= {k.id for k in screen.keys}  # a replay's keys, each once
        assert len({k.id for k in screen.keys}) == len(screen.keys)
        box = screen.query_one("#help-box")
        assert box.has_focus and box.max_scroll_y > 0  # taller than 24 lines: it scrolls
        await pilot.press("pagedown")  # at once, no tab first
        await pilot.pause()
        assert box.scroll_y > 0
        assert "FILES" in "\n".join(screen_lines(app))
        await pilot.press("tab")
        await pilot.pause()
        symbols = screen.text
        for glyph in ("★", "s/p", "157@2K", "budget 90 s ↓", "✓p", "✗", "?", "1.124× [1.009"):
            assert glyph in symbols, glyph
        for colour in ("blue:", "vermillion:", "yellow (dark orange on a light theme):"):
            assert colour in symbols, colour
        shown = "\n".join(screen_lines(app))
        assert "HEADER" in shown and "★" not in text
        inner = box.content_region.width
        assert all(len(line) <= inner for line in symbols.splitlines())  # nothing cut
        drawn = {symbols[sp.start : sp.end]: str(sp.style) for sp in screen.pages[1].spans}
        good, pooled = status_style(Status.GOOD, bold=True), status_style(Status.POOLED)
        assert drawn["★"] == good and drawn["✓p"] == pooled  # as the panes draw them
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)
