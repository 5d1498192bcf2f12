"""Snapshots of the main screen after replaying a recording to its end: the test fixture at
120x40, the shipped demo recording at 80x24, 120x40 and 200x60.
Update the baselines with `pytest tests/test_ui_snapshot.py --snapshot-update` (and look at them)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from mlatui.sources import ReplaySource
from widgets.app import MlatuiApp

FIXTURE = Path(__file__).parent / "fixtures" / "ui_tiny_run.jsonl"
DEMO = Path(__file__).parents[1] / "scenarios" / "demo.jsonl"


async def run_before(pilot) -> None:
    end = time.monotonic() + 60
    while not pilot.app._done:
        assert time.monotonic() < end
        await pilot.pause(0.02)
    await pilot.pause()  # RunFinished is posted with _done: let its notification arrive first
    pilot.app.clear_notifications()
    await pilot.pause()


def test_main_screen_snapshot(snap_compare, tmp_path):
    app = MlatuiApp(ReplaySource(FIXTURE, speed=1024.0), ui_hz=20, out_dir=tmp_path)
    assert snap_compare(app, terminal_size=(120, 40), run_before=run_before)


@pytest.mark.parametrize(
    "size", [(80, 24), (120, 40), (200, 60)], ids=["80x24", "120x40", "200x60"]
)
def test_demo_screen_snapshot(snap_compare, tmp_path, size):
    app = MlatuiApp(ReplaySource(DEMO, speed=4096.0), mode="demo", ui_hz=20, out_dir=tmp_path)
    assert snap_compare(app, terminal_size=size, run_before=run_before)
