"""The dashboard under Pilot: replay of a real engine recording, controls, export, layouts,
errors, and a short live run."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import msgspec
import pytest
import ui_events

from mlatui.config.run_plan import RunConfig, resolve_plan
from mlatui.stream.recorder import read_recording
from mlatui.stream.run_settings import RunSettings
from mlatui.stream.sources import DASHBOARD_IN_TURNS, LiveSource, ReplaySource
from mlatui.widgets.app import MlatuiApp
from mlatui.widgets.help import HelpScreen
from tests.ui_settled import until

FIXTURE = Path(__file__).parent / "fixtures" / "ui_tiny_run.jsonl"
TINY = str(Path(__file__).parent / "fixtures" / "tiny.toml")
PANES = ("header", "arm-stock", "arm-patched", "marginal", "validity", "memory", "log")


def replay_app(tmp_path, speed=1024.0, ui_hz=20, **kw) -> MlatuiApp:
    return MlatuiApp(ReplaySource(FIXTURE, speed=speed), ui_hz=ui_hz, out_dir=tmp_path, **kw)


def pane_text(app, pane_id) -> str:
    return app.query_one(f"#{pane_id}").content().plain


async def test_replay_fills_every_pane(tmp_path):
    app = replay_app(tmp_path)
    async with app.run_test(size=(160, 50)) as pilot:
        await until(pilot, lambda: app._done)
        assert app.dash.status == "completed"
        assert "r/n/v 512/128/128" in pane_text(app, "header")
        # the verdict strip: on screen (a line of the header that is not cut off), as --dump has it
        from mlatui.views.verdict_strip import verdict_line

        header = app.query_one("#header")
        lines = pane_text(app, "header").splitlines()
        assert header.content_size.height >= len(lines) == 5  # the last: the replay timeline
        assert "┃sweep" in lines[4] and "┃tune" in lines[4] and "Home/End" in lines[4]
        assert lines[2].startswith("verdict") and verdict_line(app.dash, 150) in lines[2]
        for arm in ("stock", "patched"):
            text = pane_text(app, f"arm-{arm}")
            assert "median" in text and "(synthetic)" in text and "absorbed" in text
            # a speedup only with its CI (this recording's results kept none: no ratio shown)
            assert all(after.startswith(" [") for after in text.split("×")[1:]), text
        assert "context (tokens)" in pane_text(app, "marginal")
        assert "✓" in pane_text(app, "validity") and "✗" in pane_text(app, "validity")
        memory = pane_text(app, "memory")  # the recording's last sample, as a person reads it
        assert "process RSS 133.7 MB" in memory and "active 12.2 MB · cache 31.4 MB" in memory
        assert "run completed" in pane_text(app, "log")
        for pid in PANES:  # wide layout: every pane on screen with room to draw
            region = app.query_one(f"#{pid}").region
            assert region.width >= 20 and region.height >= 3, pid


async def test_two_draft_kinds_are_named_on_screen(tmp_path):
    """A recorded tune of both draft kinds on the embedded model: the header names both, each
    arm shows one tok/s line per kind and the acceptance line says which kind it counts."""
    fixture = FIXTURE.parent / "two_kinds_tune.jsonl"
    app = MlatuiApp(ReplaySource(fixture, speed=1024.0), ui_hz=20, out_dir=tmp_path)
    async with app.run_test(size=(160, 50)) as pilot:
        await until(pilot, lambda: app._done)
        assert "draft mtp + draft-model:embedded" in pane_text(app, "header")
        for arm in ("stock", "patched"):
            lines = pane_text(app, f"arm-{arm}").splitlines()
            at = {k: next(i for i, x in enumerate(lines) if x.strip().startswith(f"{k} d1"))
                  for k in ("mtp", "draft-model")}  # fmt: skip
            for k, i in at.items():  # a kind's settings wrap to the pane: one line, or two
                block = " ".join(lines[i : i + 2]).split("draft-model")[0 if k == "mtp" else 1]
                assert " d2 " in block and " d3 " in block and re.search(r"[\d.]+× \[", block)
            assert any(line.startswith("acceptance draft-model d3") for line in lines)
        assert "patched: mtp d2 at 256:" in pane_text(app, "log")


def no_overlap(app) -> list[str]:
    visible = [p for p in app.panes() if p.display and p.region.area and p.parent.display]
    screen = app.screen.region
    problems = [p.id for p in visible if not screen.contains_region(p.region)]
    for i, a in enumerate(visible):
        for b in visible[i + 1 :]:
            if a.region.overlaps(b.region):
                problems.append(f"{a.id}/{b.id}")
    return problems


@pytest.mark.parametrize("size", [(80, 24), (160, 50), (120, 40)])
async def test_layout_readable_without_overlap(tmp_path, size):
    app = replay_app(tmp_path)
    async with app.run_test(size=size) as pilot:
        await until(pilot, lambda: app._done)
        compact = size == (80, 24)
        assert app.compact == compact
        for page in range(3 if compact else 1):
            await pilot.press(str(page + 1)) if compact else None
            await pilot.pause()
            assert no_overlap(app) == []
            shown = [p.id for p in app.panes() if p.region.area and p.parent.display]
            assert shown, page
            for pid in shown:
                assert app.query_one(f"#{pid}").region.height >= 3, pid
        if compact:  # every pane reachable from some page
            seen = set()
            for key in "123":
                await pilot.press(key)
                await pilot.pause()
                seen |= {p.id for p in app.panes() if p.region.area and p.parent.display}
            assert set(PANES) <= seen


async def test_pause_single_step_speed_and_seek(tmp_path):
    app = replay_app(tmp_path, speed=1.0)
    async with app.run_test(size=(120, 40)) as pilot:
        src = app.source
        await pilot.press("p")
        assert src.paused
        n = app.dash.events
        await pilot.pause(0.2)
        assert app.dash.events == n  # frozen
        await pilot.press("space")
        await pilot.pause()
        assert app.dash.events > n and src.paused
        await pilot.press("plus")
        assert src.speed == 2.0
        await pilot.press("minus", "minus")
        assert src.speed == 0.5
        await pilot.press("right", "right")
        await pilot.pause()
        ahead = app.dash.events
        assert src.position_s >= 5.0 and ahead > n
        await pilot.press("left", "left", "left")
        await pilot.pause(0.1)
        assert src.position_s < 1.0 and app.dash.events < ahead  # rebuilt from the header
        assert app.dash.header is not None
        await pilot.press("p")
        assert not src.paused


async def test_export_and_screenshot_write_files(tmp_path):
    app = replay_app(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: app._done)
        await pilot.press("e")
        await pilot.pause()
        md = list(tmp_path.glob("mlatui-summary-*.md"))
        csv = list(tmp_path.glob("mlatui-summary-*.csv"))
        (exported_json,) = tmp_path.glob("mlatui-summary-*.json")
        assert md and csv
        # the document `bench --format json` and `replay --dump --format json` print
        import msgspec

        from mlatui.views.summary_doc import RunDocument

        doc = msgspec.json.decode(exported_json.read_text(), type=RunDocument)
        text = md[0].read_text()
        assert doc.verdict in text and doc.sweep
        assert all(r.ratio.text in text for r in doc.sweep if r.ratio is not None)
        assert "INVALID" in text or "invalid" in text
        assert "128" in csv[0].read_text()
        await pilot.press("s")
        await pilot.pause()
        (svg,) = tmp_path.glob("mlatui-screenshot-*.svg")  # named as the exports are
        text = svg.read_text()
        assert 'url("http' not in text and "DejaVu Sans Mono" in text  # no network font


async def test_help_lists_every_binding_and_theme_cycles(tmp_path):
    app = replay_app(tmp_path, ui_hz=2)  # the help box is the test; a refresh tints the screen
    async with app.run_test(size=(120, 40)) as pilot:
        theme = app.theme
        await pilot.press("t")
        assert app.theme != theme
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        text = app.screen.text
        # what a person sees: the box is big enough to show every line of the list, not 4 x 2
        box = app.screen.query_one("#help-box").region
        lines = text.splitlines()
        assert box.height >= min(len(lines) + 2, 34) and box.width >= max(map(len, lines)) + 2
        flat = " ".join(text.split())
        assert {"seek-back", "step", "faster", "export", "quit"} <= {k.id for k in app.keys_here()}
        for key in app.keys_here():  # a replay's keys (not the live-only `+`, demo's x)
            assert key.description in flat, key
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)


async def test_every_action_is_in_the_command_palette(tmp_path):
    # 2 Hz: each refresh under the open palette re-renders the tinted screen behind it
    app = replay_app(tmp_path, speed=256.0, ui_hz=2)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("p")  # paused: the palette is what this test drives, not the replay
        titles = [c.title for c in app.get_system_commands(app.screen)]
        for title in (
            "Pause / resume",
            "Single step",
            "Faster replay",
            "Slower replay",
            "Seek back",
            "Seek forward",
            "Export summary",
            "Save screenshot",
            "Next theme",
            "Help: keys and symbols",
        ):
            assert title in titles
        assert len(titles) == len(set(titles))
        assert not {"Theme", "Keys", "Screenshot"} & set(titles)  # Textual's twins of ours
        await pilot.press("ctrl+p")
        await pilot.pause()
        await pilot.press(*"export")
        await pilot.pause(0.3)
        # the key hint is on screen (its square brackets are not read as markup)
        from textual.command import CommandList

        assert app.screen.query_one(CommandList).option_count >= 1
        import html

        svg = html.unescape(app.export_screenshot()).replace("\xa0", " ")
        assert "export the summary (markdown + CSV + JSON) to --out-dir · key e" in svg
        await pilot.press("escape")
        await pilot.pause()
        await pilot.press("ctrl+p")
        await pilot.pause()
        await pilot.press(*"faster")
        await pilot.pause(0.3)
        await pilot.press("down", "enter")
        await pilot.pause()
        assert app.source.speed == 512.0


async def test_engine_error_is_shown_and_recording_kept(tmp_path):
    rec = tmp_path / "err.jsonl"
    src = LiveSource(RunConfig(overrides={"error": True}), engine=ui_events.fake_engine, record=rec)
    app = MlatuiApp(src, ui_hz=20, out_dir=tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: app._done)
        assert app.dash.status == "error"
        assert "ERROR: RuntimeError: boom in arm" in pane_text(app, "header")
        assert any("boom" in n.message for n in app._notifications)
    assert not src.alive
    assert rec.exists() and "boom in arm" in rec.read_text()


async def test_live_pause_freezes_display_but_keeps_recording(tmp_path):
    rec = tmp_path / "live.jsonl"
    src = LiveSource(
        RunConfig(overrides={"delay_s": 0.01}), engine=ui_events.fake_engine, record=rec
    )
    app = MlatuiApp(src, ui_hz=20, out_dir=tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("p")
        n = app.dash.events
        await until(pilot, lambda: not src.alive)
        assert app.dash.events == n and app.paused
        await pilot.press("p")
        await until(pilot, lambda: app._done)
        assert app.dash.status == "completed"
    assert len(rec.read_text().splitlines()) == len(ui_events.events())


async def test_quitting_mid_run_stops_the_engine(tmp_path):
    src = LiveSource(
        RunConfig(overrides={"delay_s": 0.05}),
        engine=ui_events.fake_engine,
        record=tmp_path / "q.jsonl",
    )
    app = MlatuiApp(src, ui_hz=20, out_dir=tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: app.dash.events > 3)
        await pilot.press("q")
        await asyncio.sleep(0)
    assert not src.alive
    assert (tmp_path / "q.jsonl").read_text().splitlines()[-1].startswith('{"type":"run_end"')


async def test_short_live_run_on_a_tiny_model(tmp_path):
    config = RunConfig(
        scenario=TINY, random_weights=True, overrides={"reps": 1, "contexts": [64], "tokens": 4}
    )
    src = LiveSource(resolve_plan(config), record=tmp_path / "live.jsonl")
    app = MlatuiApp(src, ui_hz=4, out_dir=tmp_path)
    draws: list[tuple[bool, bool]] = []  # at each draw while the run goes: (busy, held)
    draw = app._draw

    def watched_draw() -> None:
        if not src.finished:
            busy = src.turns.busy  # read first: no turn can be held after it while this draws
            draws.append((busy, src.turns.drawing))
        draw()

    app._draw = watched_draw
    turns_taken: list[int] = []  # arm calls that went through the turns (the engine's Baton)
    enter_call = src.turns._enter_call

    def counted_enter_call() -> None:
        turns_taken.append(1)
        enter_call()

    src.turns._enter_call = counted_enter_call
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: app._done, 240)
        assert app.dash.status == "completed"
        # the dashboard drew in its turns: never while an arm call (a timed step) ran, but
        # where a call outlasted the draw's bounded wait (a loaded host's first compile)
        assert any(held for _, held in draws)
        assert not any(busy and held for busy, held in draws)
        assert len(turns_taken) > 10  # the arms' calls took them (an unwired Baton: none)
        header = read_recording(tmp_path / "live.jsonl").header
        assert header.settings.dashboard == DASHBOARD_IN_TURNS
        assert app.dash.marginal("stock") and any(
            k[1] == "patched" and k[2] >= 2 for k in app.dash.steps.samples
        )
        assert "random weights: acceptance synthetic" in pane_text(app, "header")
        assert "LIVE" not in pane_text(app, "header") and " DONE " in pane_text(app, "header")


async def test_demo_explains_and_x_hides_it(tmp_path):
    app = MlatuiApp(ReplaySource(FIXTURE, speed=1024.0), mode="demo", ui_hz=20, out_dir=tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: app._done)
        explain = app.query_one("#explain")
        assert explain.region.height >= 3 and "x hide" in explain.render().plain
        assert "DEMO" in pane_text(app, "header")
        await pilot.press("x")
        await pilot.pause()
        assert not explain.display
        assert no_overlap(app) == []


def test_demo_command_replays_the_shipped_recording():
    import subprocess
    import sys

    from mlatui.commands.demo import demo_recording

    path = demo_recording()
    if not path.is_file():
        pytest.skip(f"{path} not shipped yet")
    out = subprocess.run(
        [sys.executable, "-m", "mlatui", "demo", "--dump"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert "replayed" in out.stdout and "status completed" in out.stdout


def null_run_events() -> list:
    """The test stream as one pass of an A/A run: both slots stock, phases named NAME/aa-stock."""

    out = []
    for e in ui_events.events():
        if e.type == "header":
            e = msgspec.structs.replace(
                e, settings=RunSettings(null=True, passes=("aa-stock", "aa-patched"))
            )
        elif getattr(e, "phase", None):
            e = msgspec.structs.replace(e, phase=f"{e.phase}/aa-stock")
        out.append(e)
    return out


async def test_an_aa_run_names_its_arms_by_what_ran(tmp_path):
    """Both slots of an A/A pass run one variant: the panes must not say 'patched · gate L ≤ L*'
    over an arm that ran stock mlx-lm, nor head the L = 1 table 'stock / patch'."""
    fixture = ui_events.write_recording(tmp_path / "aa.jsonl", null_run_events())
    app = MlatuiApp(ReplaySource(fixture, speed=1024.0), ui_hz=20, out_dir=tmp_path)
    async with app.run_test(size=(160, 50)) as pilot:
        await until(pilot, lambda: app._done)
        titles = [app.query_one(f"#arm-{arm}").border_title for arm in ("stock", "patched")]
        assert titles == ["A · A/A: both arms stock", "B · A/A: both arms stock"]
        head = pane_text(app, "validity").splitlines()
        row = next(line for line in head if line.startswith("phase"))
        assert "paired A/B" in row and "stock" not in row and "patch" not in row
        assert any(line.startswith("sw·st") for line in head)
        log = pane_text(app, "log")
        assert "B (stock): " in log and "A (stock): " in log and "patched: " not in log
    plain = MlatuiApp(ReplaySource(FIXTURE, speed=1024.0), ui_hz=20, out_dir=tmp_path)
    async with plain.run_test(size=(160, 50)) as pilot:
        await until(pilot, lambda: plain._done)
        assert plain.query_one("#arm-patched").border_title == "patched · gate L ≤ L*"


async def test_a_drawing_turn_whose_frame_never_came_back_is_given_up(tmp_path):
    import time

    from mlatui.widgets.app import TURN_LOST_S

    src = LiveSource(
        RunConfig(overrides={"delay_s": 0.05}),
        engine=ui_events.fake_engine,
        record=tmp_path / "lost.jsonl",
    )
    app = MlatuiApp(src, ui_hz=20, out_dir=tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: app.dash.events > 3)
        # a turn held whose frame's callback never comes (as when its screen closed first)
        assert src.turns.begin_draw()
        app._turn_asked = time.monotonic() - TURN_LOST_S - 1
        ticks = app.ticks
        await until(pilot, lambda: app.ticks > ticks + 2)  # the dashboard draws again
        await pilot.press("q")
