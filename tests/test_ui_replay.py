"""Moving through a replay: space steps one event that shows in every phase, Home and End jump
to the ends, and the header, the phase line's elapsed time and the log read one clock."""

from __future__ import annotations

import re
import time
from pathlib import Path

from mlatui.stream.replay_source import UNSEEN, ReplaySource
from mlatui.widgets.app import MlatuiApp

DEMO = Path(__file__).parents[1] / "scenarios" / "demo.jsonl"


def test_space_steps_one_shown_event_in_every_phase():
    """The demo's tune phase has decode blocks and no timed steps: a step there used to run to
    the end of the recording."""
    src = ReplaySource(DEMO, speed=1.0)
    src.start()
    assert [name for _, name in src.phases] == ["sweep", "tune"]
    for start, name in src.phases:
        src.seek_to(start)
        src.pause()
        src.drain()
        for _ in range(5):
            before = src.position_s
            src.step()
            shown = [e for e in src.drain() if e.type not in UNSEEN]
            assert shown, name
            assert before <= src.position_s < src.duration_s, name
    src.stop()


def _seconds(text: str) -> float:
    m = re.fullmatch(r"(?:(\d+)m)?(\d+)s", text)
    assert m, text
    return int(m.group(1) or 0) * 60 + int(m.group(2))


async def test_home_and_end_and_one_clock(tmp_path):
    app = MlatuiApp(ReplaySource(DEMO, speed=1.0), mode="replay", ui_hz=20, out_dir=tmp_path)
    async with app.run_test(size=(160, 50)) as pilot:
        await pilot.pause(0.1)
        await pilot.press("end")
        end = time.monotonic() + 60
        while not app._done:
            assert time.monotonic() < end
            await pilot.pause(0.05)
        await pilot.pause(0.1)
        header = app.query_one("#header").content().plain
        at, total = map(float, re.search(r"REPLAY ×1 ([\d.]+)/([\d.]+)s", header).groups())
        assert at == total
        elapsed = _seconds(re.search(r"elapsed (\S+)", header).group(1))
        log_t = app.dash.log[-1][0]
        assert f"{log_t:.1f}s" in app.query_one("#log").content().plain
        # header, elapsed and log on one clock: the recording's own
        assert abs(at - log_t) <= 1.0 and abs(elapsed - at) <= 1.0, (at, elapsed, log_t)
        assert "┃sweep" in header and "┃tune" in header
        epoch = app.source.epoch
        pressed = time.monotonic()
        await pilot.press("home")
        await pilot.pause(0.1)
        # back at the start, then on at ×1: as far as the wall clock went since the key (a busy
        # host stretches the 0.1 s pause)
        since_s = time.monotonic() - pressed
        assert app.source.epoch == epoch + 1 and app.source.position_s < 1.0 + since_s
        assert app.dash.status != "completed"
        header = app.query_one("#header").content().plain
        at = float(re.search(r"REPLAY ×1 ([\d.]+)/", header).group(1))
        assert at < 5.0 + since_s


async def test_a_paused_replay_holds_one_clock_for_header_elapsed_eta_and_log(tmp_path):
    """Mid-run and paused: the header's position and the elapsed time agree within a second, the
    log has nothing past that position, and none of them, nor the ETA, moves with the wall
    clock."""
    app = MlatuiApp(ReplaySource(DEMO, speed=1.0), mode="replay", ui_hz=20, out_dir=tmp_path)
    async with app.run_test(size=(160, 50)) as pilot:
        await pilot.pause(0.1)
        app.source.seek_to(app.source.duration_s / 2)
        await pilot.press("p")
        await pilot.pause(0.3)

        def clocks() -> tuple[float, float, str]:
            header = app.query_one("#header").content().plain
            at = float(re.search(r"REPLAY ×1 ([\d.]+)/", header).group(1))
            elapsed = _seconds(re.search(r"elapsed (\S+)", header).group(1))
            eta = re.search(r"ETA [^·\n]+", header)
            return at, elapsed, eta.group(0) if eta else ""

        at, elapsed, eta = clocks()
        assert app.dash.status == "running" and eta, eta  # mid-run: an ETA is shown
        log_t = app.dash.log[-1][0]  # the log shows nothing the replay has not reached
        assert abs(elapsed - at) <= 1.0 and log_t <= at + 1e-6, (at, elapsed, log_t)
        await pilot.pause(1.5)
        assert clocks() == (at, elapsed, eta)  # the wall clock moved; the replay's did not
