"""A damaged recording says so, on screen (the replay's header, from the first frame) and in
`replay --dump`: one copy of the tiny run per kind of damage. A whole recording says nothing;
a recording of a failed run ends its dump with the `mlatui: error:` line; an export into a
folder that cannot be written is one line naming the folder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mlatui.cli import main
from mlatui.stream.sources import ReplaySource
from mlatui.widgets.app import MlatuiApp
from tests.ui_settled import settled

TINY = Path(__file__).parent / "fixtures" / "ui_tiny_run.jsonl"
LINES = TINY.read_text().splitlines(keepends=True)  # 226 lines, the run_end last


def _with(line: int, **fields) -> list[str]:
    """The recording with fields of line `line` (1-based) replaced."""
    out = list(LINES)
    event = json.loads(out[line - 1])
    assert event["type"] == "step", event  # the lines chosen below are timed steps
    out[line - 1] = json.dumps(event | fields) + "\n"
    return out


DAMAGED = {  # kind: (the file's lines, what the screen and the dump say)
    "cut-mid-line": (
        [*LINES[:150], LINES[150][:80]],
        ["recording ends here (truncated at line 151)", "no run_end: the run was cut off"],
    ),
    "cut-at-a-line": (LINES[:150], ["no run_end: the run was cut off (after line 150)"]),
    "no-run-end": (LINES[:-1], ["no run_end: the run was cut off (after line 225)"]),
    "negative-ms": (_with(5, ms=-7.1), ["negative step time at line 5"]),
    "reversed-times": (_with(101, t=0.01), ["timestamps go backwards at line 101"]),
    "run-end-twice": ([*LINES, LINES[-1]], ["run_end twice (again at line 227)"]),
}


def damaged(tmp_path: Path, kind: str) -> Path:
    path = tmp_path / f"{kind}.jsonl"
    path.write_text("".join(DAMAGED[kind][0]))
    return path


def header_lines(app) -> list[str]:
    strips = app.screen._compositor.render_strips()[: app.query_one("#header").region.height]
    return ["".join(seg.text for seg in strip) for strip in strips]


@pytest.mark.parametrize("kind", DAMAGED)
async def test_the_screen_says_what_is_wrong_with_the_recording(tmp_path, kind):
    app = MlatuiApp(ReplaySource(damaged(tmp_path, kind), speed=4096.0), ui_hz=20)
    async with app.run_test(size=(80, 24)) as pilot:
        await settled(pilot)
        header = " ".join(header_lines(app))
        for notice in DAMAGED[kind][1]:
            assert notice in header, (notice, header)
        if kind.startswith(("cut", "no-run")):  # nothing more comes: no ETA as if live
            assert "recording ends here" in header and "ETA" not in header


@pytest.mark.parametrize("kind", DAMAGED)
def test_the_dump_says_what_is_wrong_with_the_recording(tmp_path, kind, capsys):
    assert main(["replay", "--dump", str(damaged(tmp_path, kind))]) == 0
    out = capsys.readouterr().out
    said = [line for line in out.splitlines() if line.startswith("⚠ ")]
    for notice in DAMAGED[kind][1]:
        assert any(notice in line for line in said), (notice, said)


def test_a_whole_recording_says_nothing(capsys):
    assert ReplaySource(TINY).notices == ()
    assert main(["replay", "--dump", str(TINY)]) == 0
    assert "⚠" not in capsys.readouterr().out


def test_a_failed_runs_dump_ends_with_the_error_line(tmp_path, capsys):
    error = json.dumps({"type": "error", "t": 5.9, "message": "RuntimeError: boom in arm"})
    end = json.dumps({"type": "run_end", "t": 5.97, "status": "error"})
    path = tmp_path / "failed.jsonl"
    path.write_text("".join(LINES[:-1]) + error + "\n" + end + "\n")
    assert main(["replay", "--dump", str(path)]) == 1
    captured = capsys.readouterr()
    last = captured.err.strip().splitlines()[-1]
    assert last.startswith("mlatui: error: ") and "RuntimeError: boom in arm" in last, last
    assert "status error" in captured.out


async def test_an_export_into_an_unwritable_folder_is_one_line_naming_it(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    folder = blocker / "exports"  # under a file: it cannot be made
    app = MlatuiApp(ReplaySource(TINY, speed=4096.0), ui_hz=20, out_dir=folder)
    async with app.run_test(size=(120, 40)) as pilot:
        await settled(pilot)
        await pilot.press("e")
        await pilot.pause()
        (note,) = [n.message for n in app._notifications]
        assert note.startswith("export failed: cannot write to ") and str(folder) in note, note
        assert "\n" not in note and "Errno" not in note
