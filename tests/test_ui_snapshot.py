"""Snapshots of the main screen after replaying a recording to its end: the test fixture at
three sizes; the shipped demo and demo-gpu, a finished A/A run and a tune-only run at 80x24,
100x34, 120x40, 160x50 and 220x60 (the default run: each recording once and each size once;
`-m slow`: all twenty).
Update the baselines with `pytest tests/test_ui_snapshot.py --snapshot-update` (and look at them)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mlatui.stream.sources import ReplaySource
from mlatui.widgets.app import MlatuiApp
from tests.ui_settled import settled

FIXTURE = Path(__file__).parent / "fixtures" / "ui_tiny_run.jsonl"
TWO_KINDS = Path(__file__).parent / "fixtures" / "two_kinds_tune.jsonl"
FINISHED = {
    "demo": Path(__file__).parents[1] / "scenarios" / "demo.jsonl",
    "demo-gpu": Path(__file__).parents[1] / "scenarios" / "demo-gpu.jsonl",  # H200, 4K-24K
    "aa": Path(__file__).parent / "fixtures" / "ui_aa_finished.jsonl.gz",  # H200, A/A at 8K
    "tune": Path(__file__).parent / "fixtures" / "ui_tune_only.jsonl.gz",  # CPU, no sweep
}
SIZES = [(80, 24), (100, 34), (120, 40), (160, 50), (220, 60)]


async def run_before(pilot) -> None:
    await settled(pilot)


@pytest.mark.parametrize(
    "size", [(80, 24), (120, 40), (200, 60)], ids=["80x24", "120x40", "200x60"]
)
def test_main_screen_snapshot(snap_compare, tmp_path, size):
    """The recorded fixture run at three sizes. (The shipped demo's end screen was not stable from
    run to run at 80x24 and 120x40 — the arm pane showed the phase line or one more chart — so it
    is checked by the Pilot layout tests, which read its text at five sizes, not by a snapshot.)"""
    app = MlatuiApp(ReplaySource(FIXTURE, speed=1024.0), ui_hz=20, out_dir=tmp_path)
    assert snap_compare(app, terminal_size=size, run_before=run_before)


def test_two_draft_kinds_snapshot(snap_compare, tmp_path):
    """A tune of both draft kinds: one tok/s line per kind in each arm, the kinds in the header."""
    app = MlatuiApp(ReplaySource(TWO_KINDS, speed=1024.0), ui_hz=20, out_dir=tmp_path)
    assert snap_compare(app, terminal_size=(160, 50), run_before=run_before)


# The default run takes each recording at one size and each size once (a diagonal); the whole
# matrix runs under `pytest -m slow`.
DIAGONAL = {
    ("demo", (80, 24)),
    ("demo-gpu", (100, 34)),
    ("aa", (120, 40)),
    ("tune", (160, 50)),
    ("demo", (220, 60)),
}


@pytest.mark.parametrize(
    ("name", "size"),
    [
        pytest.param(
            name,
            size,
            id=f"{name}-{size[0]}x{size[1]}",
            marks=() if (name, size) in DIAGONAL else pytest.mark.slow,
        )
        for name in FINISHED
        for size in SIZES
    ],
)
def test_finished_run_snapshot(snap_compare, tmp_path, name, size):
    """The end screen of each finished recording: the verdict with its CIs, the key figure (or
    why there is none) and the L = 1 checks on the first page, the timeline under the header."""
    app = MlatuiApp(ReplaySource(FINISHED[name], speed=4096.0), ui_hz=20, out_dir=tmp_path)
    assert snap_compare(app, terminal_size=size, run_before=run_before)
