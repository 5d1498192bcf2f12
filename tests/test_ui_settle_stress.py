"""The finished demo's end screen is the same with a busy `python -c` worker on
every core, run after run, at every size: the snapshot and the first page's header (the verdict
with its CI, both Δ2 figures, "run completed"). Slow (30 runs a case; MLATUI_STRESS_RUNS sets
how many): `pytest -m slow tests/test_ui_settle_stress.py -p no:xdist -s`."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
from pytest_textual_snapshot import normalize_svg
from textual._doc import take_svg_screenshot

import tests.test_ui_truth as truth
from mlatui.stream.sources import ReplaySource
from mlatui.widgets.app import MlatuiApp
from tests.cpu_hog import cpu_hog
from tests.test_ui_snapshot import FINISHED, run_before

RUNS = int(os.environ.get("MLATUI_STRESS_RUNS", "30"))
SNAPSHOTS = Path(__file__).parent / "__snapshots__" / "test_ui_snapshot"
SIZES = truth.SIZES
IDS = [f"{w}x{h}" for w, h in SIZES]


def demo_svg(tmp_path: Path, size: tuple[int, int]) -> str:
    app = MlatuiApp(ReplaySource(FINISHED["demo"], speed=4096.0), ui_hz=20, out_dir=tmp_path)
    return normalize_svg(take_svg_screenshot(app=app, terminal_size=size, run_before=run_before))


@pytest.mark.slow
@pytest.mark.parametrize("size", SIZES, ids=IDS)
def test_the_finished_demo_snapshot_holds_under_a_cpu_hog(tmp_path, size):
    """Every loaded run draws the screen an unloaded run draws (at 80x24 the default suite's
    snapshot too; the other sizes' snapshots are checked by `pytest -m slow`)."""
    quiet = demo_svg(tmp_path, size)
    if size == (80, 24):
        stored = SNAPSHOTS / f"test_finished_run_snapshot[demo-{size[0]}x{size[1]}].svg"
        assert quiet == normalize_svg(stored.read_text())
    with cpu_hog():
        differing = [run for run in range(RUNS) if demo_svg(tmp_path, size) != quiet]
    print(
        f"\nsnapshot demo {size[0]}x{size[1]}: {RUNS - len(differing)}/{RUNS} equal under the hog"
    )
    assert not differing, f"runs {differing} of {RUNS} differ from the unloaded screen"


@pytest.mark.slow
@pytest.mark.parametrize("size", SIZES, ids=IDS)
def test_the_first_page_holds_under_a_cpu_hog(tmp_path, size):
    failed = []
    with cpu_hog():
        for run in range(RUNS):
            try:
                asyncio.run(
                    truth.test_the_verdict_keeps_its_ci_and_both_d2_figures_on_the_first_page(
                        tmp_path, size
                    )
                )
            except AssertionError as error:
                failed.append((run, str(error)[:400]))
    print(f"\nfirst page {size[0]}x{size[1]}: {RUNS - len(failed)}/{RUNS} passed under the hog")
    assert not failed, failed
