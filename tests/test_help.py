"""Help that says where to start: `mlatui`, `--help`, `launch --help`, and the `?` screen
(every active binding with its id, only the keys that work in this mode, the symbol legend)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import ui_events

from mlatui.cli import main
from mlatui.config.outputs import runs_dir
from mlatui.config.runconfig import RunConfig
from mlatui.stream.sources import LiveSource, ReplaySource
from mlatui.views.keys import KEYS
from widgets.app import MlatuiApp
from widgets.controls import REPLAY_ONLY
from widgets.help import HelpScreen

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
    assert f"{runs_dir()}/run-<date>-<time>-<pid>.jsonl" in out
    keys = out[out.index("keys in the dashboard:") :]
    for k in KEYS:  # replay-only keys are not listed (`+` is a key of both, for two things)
        assert (f"  {k.key} " in keys and k.description in keys) != k.replay_only, k
    with pytest.raises(SystemExit):
        main(["replay", "--help"])
    keys = capsys.readouterr().out
    assert "seek back" in keys
    assert all(k.description not in keys for k in KEYS if k.live_only)


def test_the_key_table_agrees_with_the_app_bindings():
    bindings = {b.id: b for b in MlatuiApp.BINDINGS}
    for k in KEYS:
        b = bindings[k.id]
        shown = b.key_display or b.key
        assert k.key.split()[0] == shown, k
        assert k.replay_only == (b.action in REPLAY_ONLY), k
    listed = {k.id for k in KEYS}
    hidden = {"quit-ctrl-c", "page-arms", "page-sys", "hide-explain"}  # aliases, demo only
    assert set(bindings) - listed == hidden


async def _help_text(app, size=(120, 40)) -> tuple[str, list]:
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        box = app.screen.query_one("#help-box").region
        assert box.width > 0 and box.height > 0
        return app.screen.query_one("#help-text").render().plain, app.screen.rows


async def test_live_help_lists_live_keys_only_with_the_symbol_legend(tmp_path):
    src = LiveSource(
        RunConfig(overrides={"delay_s": 0.05}),
        engine=ui_events.fake_engine,
        record=tmp_path / "live.jsonl",
    )
    app = MlatuiApp(src, ui_hz=20, out_dir=tmp_path)
    text, rows = await _help_text(app)
    ids = {bid for _, _, bid in rows}
    assert {"pause", "export", "screenshot", "theme", "help", "quit"} <= ids
    assert not ids & REPLAY_IDS  # no seek, speed or step keys in a live run
    assert "[seek-back]" not in text and "[export]" in text
    legend = " ".join(text[text.index("Symbols") :].split())
    for symbol in ("Δ2", "d1", "~ live estimate", "✓ valid", "✗ invalid", "? inconclusive", "ā"):
        assert symbol in legend, symbol
    end = time.monotonic() + 30
    while src.alive and time.monotonic() < end:
        time.sleep(0.05)


async def test_replay_help_lists_each_binding_once_with_its_id(tmp_path):
    app = MlatuiApp(ReplaySource(FIXTURE, speed=1.0), ui_hz=20, out_dir=tmp_path)
    text, rows = await _help_text(app, size=(80, 24))
    ids = [bid for _, _, bid in rows if bid]
    assert len(ids) == len(set(ids))  # `+` and `=` are one binding, listed once
    assert REPLAY_IDS <= set(ids)
    assert "  +  replay faster" not in text and "+  faster  [faster]" in text
