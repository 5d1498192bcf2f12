"""Every kept recording prints exactly what it printed when its dump was written
(tests/replay_dumps.py says what is compared and how to write the dumps again)."""

from __future__ import annotations

import difflib
import subprocess
import sys

import pytest

from tests import replay_dumps

RECORDINGS = replay_dumps.recordings()


def _diff(name: str, expected: str, actual: str) -> str:
    lines = difflib.unified_diff(
        expected.splitlines(), actual.splitlines(), "expected", "now", n=1, lineterm=""
    )
    return f"{name} differs:\n" + "\n".join(list(lines)[:40])


def test_every_recording_has_a_dump_and_every_dump_a_recording():
    assert len(RECORDINGS) >= 20
    expected = {replay_dumps.dump_path(p) for p in RECORDINGS}
    kept = set(replay_dumps.DUMPS.glob("*.txt.gz"))
    assert expected - kept == set(), (
        "a recording without a dump: python -m tests.replay_dumps --write"
    )
    assert kept - expected == set(), "a dump whose recording is gone"


@pytest.mark.parametrize("recording", RECORDINGS, ids=lambda p: p.name)
def test_recording_prints_what_it_printed(recording):
    expected = replay_dumps.read_expected(recording)
    assert list(expected) == list(replay_dumps.SECTIONS)
    actual = replay_dumps.sections(recording)
    for name in replay_dumps.SECTIONS:
        assert actual[name] == expected[name], _diff(name, expected[name], actual[name])


@pytest.mark.parametrize("recording", RECORDINGS, ids=lambda p: p.name)
def test_bench_the_export_and_the_dump_print_the_same_summary_byte_for_byte(recording):
    """One summary_markdown: bench's stdout is the dump's text up to the dump's own last line."""
    dump = replay_dumps.read_expected(recording)[replay_dumps.CLI_SECTION]
    summary = dump.rsplit("\nreplayed ", 1)[0] + "\n"  # without "replayed N events …" on
    assert replay_dumps.bench_markdown(recording) == summary + "\n"


def test_the_command_prints_what_the_fold_prints():
    """The dumps above come from the dashboard's fold in this process; the command line runs the
    Textual app headless over a replay source. One recording both ways keeps them the same."""
    recording = replay_dumps.ROOT / "scenarios" / "demo.jsonl"
    p = subprocess.run(
        [sys.executable, "-m", "mlatui", "replay", "--dump", str(recording)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout == replay_dumps.read_expected(recording)[replay_dumps.CLI_SECTION]
