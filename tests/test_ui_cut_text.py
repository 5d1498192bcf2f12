"""No text cut without an ellipsis, read off the screen as a person sees it: every shipped
recording replayed to its end at the five sizes; each pane's lines compared with the rows it
shows. The default run takes a diagonal (each size once); `-m slow` the whole matrix."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from ui_screen import cut_lines
from ui_settled import settled

from mlatui.stream.sources import ReplaySource
from mlatui.widgets.app import MlatuiApp
from mlatui.widgets.help import fold_path
from mlatui.widgets.panes import HeaderPane

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"


def replayable(path: Path) -> bool:
    """An event recording (it starts with an event), not a bench record file."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        return "type" in json.loads(f.readline())


SHIPPED = [FIXTURES / "ui_aa_finished.jsonl.gz", FIXTURES / "ui_tune_only.jsonl.gz"] + sorted(
    p
    for p in [*(ROOT / "scenarios").glob("*.jsonl"), *(ROOT / "docs" / "data").glob("*.jsonl.gz")]
    if replayable(p)
)
SIZES = [(80, 24), (100, 34), (120, 40), (160, 50), (220, 60)]
DIAGONAL = {
    ("demo.jsonl", (80, 24)),
    ("demo-gpu.jsonl", (100, 34)),
    ("h200-aa.jsonl.gz", (120, 40)),
    ("h200-long-context.jsonl.gz", (160, 50)),
    ("cpu-bench-budget.jsonl.gz", (220, 60)),
}


@pytest.mark.parametrize(
    ("path", "size"),
    [
        pytest.param(
            path,
            size,
            id=f"{path.name.split('.')[0]}-{size[0]}x{size[1]}",
            marks=() if (path.name, size) in DIAGONAL else pytest.mark.slow,
        )
        for path in SHIPPED
        for size in SIZES
    ],
)
async def test_no_line_is_cut_without_an_ellipsis(tmp_path, path, size):
    app = MlatuiApp(ReplaySource(path, speed=4096.0), mode="replay", ui_hz=20, out_dir=tmp_path)
    async with app.run_test(size=size) as pilot:
        await settled(pilot)
        pages = 3 if app.compact else 1
        for page in range(pages):
            if app.compact:
                await pilot.press(str(page + 1))
                await pilot.pause()
            assert cut_lines(app) == [], f"page {page + 1}"
        assert app.query_one(HeaderPane).shows_every_line()


def test_a_toasts_path_breaks_between_names():
    path = "in /tmp/pytest-of-someone/pytest-12/test_screenshot_folder0/out/more"
    lines = fold_path(path, 24).split("\n")
    assert "".join(lines) == path and all(len(line) <= 24 for line in lines)
    assert all(line.endswith("/") for line in lines[:-1])
    assert fold_path("in /a/" + "x" * 40, 20).split("\n")[-1] == "x" * 40  # whole, alone


def test_the_timeline_keeps_every_phase_start_and_cuts_a_name_with_an_ellipsis():
    from mlatui.widgets.render import ViewInfo, timeline_text

    view = ViewInfo(timeline=((0.0, "sweep"), (0.1, "sweep/tune"), (0.5, "done")), fraction=1.0)
    bar = timeline_text(view, 80).plain
    assert bar.count("┃") == 3, bar
    assert bar.startswith("┃swe…┃tune") and "┃done" in bar, bar
