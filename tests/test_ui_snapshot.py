"""Snapshot of the main screen at 120x40 after replaying the recorded fixture to its end.
Update the baseline with `pytest tests/test_ui_snapshot.py --snapshot-update` (and look at it)."""

from __future__ import annotations

import time
from pathlib import Path

from mlatui.sources import ReplaySource
from widgets.app import MlatuiApp

FIXTURE = Path(__file__).parent / "fixtures" / "ui_tiny_run.jsonl"


def test_main_screen_snapshot(snap_compare, tmp_path):
    async def run_before(pilot) -> None:
        end = time.monotonic() + 60
        while not pilot.app._done:
            assert time.monotonic() < end
            await pilot.pause(0.02)
        await pilot.pause()  # RunFinished is posted with _done: let its notification arrive first
        pilot.app.clear_notifications()
        await pilot.pause()

    app = MlatuiApp(ReplaySource(FIXTURE, speed=1024.0), ui_hz=20, out_dir=tmp_path)
    assert snap_compare(app, terminal_size=(120, 40), run_before=run_before)
