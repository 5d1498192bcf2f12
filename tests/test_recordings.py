"""Recordings are validated on read and streamed: every wrong shape is one line
`FILE:LINE: <field>: <problem>` with exit status 2 (or skipped and counted with --skip-bad), every
recording we ship still reads, times are bounded, and a large recording replays in bounded
memory."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from mlatui.cli import main
from mlatui.stream.events import SCHEMA_VERSION, RunHeader
from mlatui.stream.recorder import RecordingError, read_recording, record_kind
from mlatui.stream.sources import ReplaySource

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "ui_tiny_run.jsonl"
FIXTURE_LINES = FIXTURE.read_text().splitlines()
HEADER = json.loads(FIXTURE_LINES[0])
STEP_LINENO, STEP = next(
    (i, json.loads(line))
    for i, line in enumerate(FIXTURE_LINES, start=1)
    if json.loads(line)["type"] == "step"
)
VALIDITY_LINENO, VALIDITY = next(
    (i, json.loads(line))
    for i, line in enumerate(FIXTURE_LINES, start=1)
    if json.loads(line)["type"] == "validity"
)
SUMMARY_LINENO, SUMMARY = next(
    (i, json.loads(line))
    for i, line in enumerate(FIXTURE_LINES, start=1)
    if json.loads(line)["type"] == "phase_summary"
)


def _with(base: dict, **changes) -> str:
    return json.dumps({**base, **changes})


DEEP = "[" * 10_000 + "]" * 10_000
HUGE_INT = "9" * 5000

# (name, line number, the line's new text, the expected error after "FILE:LINE: ")
BAD_SHAPES = [
    ("header-device-null", 1, _with(HEADER, device=None), "header.device: expected an object, got null"),
    ("header-scenario-null", 1, _with(HEADER, scenario=None), "header.scenario: expected an object, got null"),
    ("header-scenario-list", 1, _with(HEADER, scenario=["x"]), 'header.scenario: expected an object, got ["x"]'),
    ("header-model-number", 1, _with(HEADER, model=7), "header.model: expected a string, got 7"),
    ("header-schema-null", 1, _with(HEADER, schema_version=None), "header.schema_version: expected an integer, got null"),
    ("header-schema-string", 1, _with(HEADER, schema_version="3"), 'header.schema_version: expected an integer, got "3"'),
    ("header-schema-zero", 1, _with(HEADER, schema_version=0), "header.schema_version: expected an integer >= 1, got 0"),
    ("step-ms-string", STEP_LINENO, _with(STEP, ms="fast"), 'step.ms: expected a number, got "fast"'),
    ("step-ms-missing", STEP_LINENO, json.dumps({k: v for k, v in STEP.items() if k != "ms"}), "step.ms: missing"),
    ("step-width-negative", STEP_LINENO, _with(STEP, width=-1), "step.width: expected an integer >= 1, got -1"),
    ("step-arm-unknown", STEP_LINENO, _with(STEP, arm="third"), "step.arm: unknown value 'third'"),
    ("step-t-negative", STEP_LINENO, _with(STEP, t=-5.0), "step.t: expected a number >= 0.0, got -5.0"),
    ("second-header", STEP_LINENO, json.dumps(HEADER), "header: a second run header (two recordings in one file?)"),
    ("step-context-float", STEP_LINENO, _with(STEP, context=1.5), "step.context: expected an integer, got 1.5"),
    ("validity-valid-string", VALIDITY_LINENO, _with(VALIDITY, valid="yes"), 'validity.valid: expected true or false, got "yes"'),
    ("rows-dict", SUMMARY_LINENO, _with(SUMMARY, rows={"a": 1}), 'phase_summary.rows: expected a list, got {"a": 1}'),
    ("rows-of-numbers", SUMMARY_LINENO, _with(SUMMARY, rows=[1]), "phase_summary.rows[0]: expected an object, got 1"),
    ("huge-int-field", STEP_LINENO, _with(STEP, context=0).replace('"context": 0', f'"context": {HUGE_INT}'), "step.context: integer out of range (at most 64 bits)"),
    ("huge-int-in-rows", SUMMARY_LINENO, _with(SUMMARY, rows=[{"n": 0}]).replace('"n": 0', f'"n": {HUGE_INT}'), "phase_summary.rows[0][key]: integer out of range (at most 64 bits)"),
    ("deep-nesting", SUMMARY_LINENO, _with(SUMMARY, rows=[{"n": 0}]).replace('"n": 0', f'"n": {DEEP}'), "line: nested too deeply"),
    ("inf-ms", STEP_LINENO, _with(STEP, ms=0).replace('"ms": 0', '"ms": 1e999'), "step.ms: number out of range (must be finite)"),
    ("nan-ms", STEP_LINENO, _with(STEP, ms=0).replace('"ms": 0', '"ms": NaN'), "not a JSON line (JSON is malformed: invalid character"),
    ("inf-t", STEP_LINENO, _with(STEP, t=0).replace('"t": 0', '"t": -Infinity'), "not a JSON line (JSON is malformed: invalid character"),
    ("unknown-type", STEP_LINENO, _with(STEP, type="bogus"), 'type: unknown event type "bogus"'),
    ("no-type", STEP_LINENO, json.dumps({"t": 1}), "type: missing (not an mlatui event)"),
    ("a-list", STEP_LINENO, "[1, 2]", "line: expected an object, got [1, 2]"),
    ("not-json", STEP_LINENO, "{not json}", "not a JSON line (JSON is malformed"),
    ("step-first", 1, json.dumps(STEP), "the first line must be the run header, found 'step'"),
]  # fmt: skip


def _write_with(tmp_path: Path, lineno: int, text: str) -> Path:
    lines = list(FIXTURE_LINES)
    lines[lineno - 1] = text
    path = tmp_path / "run.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize(
    ("lineno", "text", "expected"),
    [case[1:] for case in BAD_SHAPES],
    ids=[case[0] for case in BAD_SHAPES],
)
@pytest.mark.parametrize("dump", [True, False], ids=["dump", "tui"])
def test_a_bad_line_is_one_error_naming_file_line_and_field(
    tmp_path, capsys, monkeypatch, lineno, text, expected, dump
):
    monkeypatch.chdir(tmp_path)
    _write_with(tmp_path, lineno, text)
    code = main(["replay", "run.jsonl", *(["--dump"] if dump else [])])
    out, err = capsys.readouterr()
    assert code == 2
    assert out == ""
    assert "Traceback" not in err
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"mlatui: error: run.jsonl:{lineno}: {expected}"), lines[0]


def test_read_recording_stops_at_the_first_bad_line_or_skips_and_counts(tmp_path):
    lines = list(FIXTURE_LINES)
    lines[STEP_LINENO - 1] = _with(STEP, ms="fast")
    lines[VALIDITY_LINENO - 1] = _with(VALIDITY, valid="yes")
    path = tmp_path / "run.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(RecordingError, match=rf"run\.jsonl:{STEP_LINENO}: step\.ms"):
        read_recording(path)
    rec = read_recording(path, skip_bad=True)
    assert rec.skipped == 2
    assert len(rec.events) == len(FIXTURE_LINES) - 1 - 2


def test_replay_dump_skip_bad_reports_the_count_on_stderr_and_in_the_dump(
    tmp_path, capsys, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    lines = list(FIXTURE_LINES)
    lines[STEP_LINENO - 1] = _with(STEP, ms="fast")
    lines[STEP_LINENO] = "[1]"
    (tmp_path / "run.jsonl").write_text("\n".join(lines) + "\n")
    code = main(["replay", "run.jsonl", "--dump", "--skip-bad"])
    out, err = capsys.readouterr()
    note = f'run.jsonl: skipped 2 bad lines (first: run.jsonl:{STEP_LINENO}: step.ms: expected a number, got "fast")'
    assert code == 0
    assert note in out
    assert f"replayed {len(FIXTURE_LINES) - 2} events" in out
    assert err.splitlines() == [f"mlatui: warning: {note}"]


def test_the_header_is_never_skipped(tmp_path):
    path = _write_with(tmp_path, 1, _with(HEADER, device=None))
    with pytest.raises(RecordingError, match=r"run\.jsonl:1: header\.device"):
        ReplaySource(path, skip_bad=True)


def test_a_newer_schema_is_refused_with_an_upgrade_hint(tmp_path):
    path = _write_with(tmp_path, 1, _with(HEADER, schema_version=SCHEMA_VERSION + 1))
    with pytest.raises(RecordingError, match="header.schema_version: recorded with schema") as e:
        read_recording(path)
    assert "upgrade mlatui" in e.value.hint


@pytest.mark.parametrize("schema", [1, 5, SCHEMA_VERSION - 1])
@pytest.mark.parametrize("dump", [True, False], ids=["dump", "tui"])
def test_an_older_schema_is_refused_in_one_line_naming_it(
    tmp_path, capsys, monkeypatch, schema, dump
):
    """Its header may not even fit today's (a schema-1 header lacked fields): refused before any
    field is read, --skip-bad or not."""
    monkeypatch.chdir(tmp_path)
    old = {k: v for k, v in HEADER.items() if k not in ("settings", "distributed")}
    _write_with(tmp_path, 1, json.dumps(old | {"schema_version": schema}))
    code = main(["replay", "run.jsonl", "--skip-bad", *(["--dump"] if dump else [])])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert err.splitlines() == [
        f"mlatui: error: run.jsonl is a schema-{schema} recording; this mlatui reads schema "
        f"{SCHEMA_VERSION} — replay it with the mlatui that wrote it (mlatui "
        f"{HEADER['mlatui_version']}), or record the run again"
    ]


def _shipped_recordings() -> list[Path]:
    fixtures = ROOT / "tests" / "fixtures"
    found = [*fixtures.rglob("*.jsonl"), *fixtures.rglob("*.jsonl.gz")]
    return sorted([*found, *(ROOT / "scenarios").glob("*.jsonl")])


def test_a_gzipped_recording_reads_as_the_plain_one_and_a_broken_one_is_refused(tmp_path):
    packed = tmp_path / "run.jsonl.gz"
    packed.write_bytes(gzip.compress(FIXTURE.read_bytes()))
    assert read_recording(packed).events == read_recording(FIXTURE).events
    broken = tmp_path / "broken.jsonl.gz"
    broken.write_bytes(packed.read_bytes()[:100])
    with pytest.raises(RecordingError, match=r"broken\.jsonl\.gz: cannot read it"):
        read_recording(broken)


def test_every_shipped_event_recording_validates_and_bench_records_are_told_apart():
    versions = set()
    bench_records = []
    for path in _shipped_recordings():
        if record_kind(path) is not None:  # a bench's or calibrate's record file
            bench_records.append(path)
            continue
        rec = read_recording(path)
        assert isinstance(rec.header, RunHeader) and rec.events and not rec.skipped, path
        versions.add(rec.header.schema_version)
    assert versions == {SCHEMA_VERSION}  # every shipped recording is of the current schema
    assert len(bench_records) < len(_shipped_recordings()) / 2


def test_a_huge_recorded_time_never_makes_the_replay_wait(tmp_path):
    lines = list(FIXTURE_LINES)
    lines[STEP_LINENO - 1] = _with(STEP, t=1e308)
    path = tmp_path / "run.jsonl"
    path.write_text("\n".join(lines) + "\n")
    tick = 0.05
    speed = 20.0  # uncapped, the gap would be 1e308 s at any speed
    src = ReplaySource(path, speed=speed, max_gap_s=tick)
    assert src.duration_s <= tick * len(lines)
    gaps = [b - a for a, b in zip(src._times, src._times[1:], strict=False)]
    assert max(gaps) <= tick + 1e-12
    src.start()
    seen = src.drain()
    deadline = time.monotonic() + tick * len(lines) / speed + 5.0
    while not src.finished:
        assert time.monotonic() < deadline, "the replay waited on a recorded time"
        time.sleep(tick / 2)
        seen += src.drain()
    assert len(seen) == len(lines)


def test_replay_hands_out_a_bounded_batch_per_drain():
    src = ReplaySource(FIXTURE, speed=1e6, batch=50)
    src.start()
    time.sleep(0.01)
    sizes = []
    while not src.finished:
        sizes.append(len(src.drain()))
    assert max(sizes) == 50 and sum(sizes) == len(FIXTURE_LINES)


RSS_PROBE = textwrap.dedent(
    """
    import contextlib, io, resource, sys
    from mlatui.cli import main
    from mlatui.widgets.app import MlatuiApp  # imported before the baseline: only the replay counts
    import mlatui.stream.recorder, mlatui.views.export
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["replay", sys.argv[1], "--dump"])
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(code, (after - before) // 1024, out.getvalue().splitlines()[-1])
    """
)


def build_big_recording(path: Path, megabytes: int) -> int:
    """The fixture with its step events repeated (times moving on) to about `megabytes`."""
    steps = [json.loads(line) for line in FIXTURE_LINES if '"type":"step"' in line]
    head = [line for line in FIXTURE_LINES if '"type":"run_end"' not in line]
    end = json.loads(FIXTURE_LINES[-1])
    n = len(FIXTURE_LINES)
    t = json.loads(head[-1]).get("t", 0.0)
    with path.open("w") as f:
        f.write("\n".join(head) + "\n")
        while f.tell() < megabytes * 2**20:
            for step in steps:
                t += 0.001
                f.write(json.dumps({**step, "t": t}, separators=(",", ":")) + "\n")
                n += 1
        f.write(json.dumps({**end, "t": t + 1}, separators=(",", ":")) + "\n")
    return n


def _peak_rss_growth_mb(path: Path) -> tuple[int, int, str]:
    done = subprocess.run(
        [sys.executable, "-c", RSS_PROBE, str(path)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    code, growth, last = done.stdout.strip().splitlines()[-1].split(" ", 2)
    return int(code), int(growth), last


def test_a_20mb_recording_replays_with_dump_in_bounded_memory(tmp_path):
    path = tmp_path / "big.jsonl"
    n = build_big_recording(path, 20)
    code, growth_mb, last = _peak_rss_growth_mb(path)
    assert code == 0 and last == f"replayed {n} events through the dashboard; status completed"
    # Loading the whole file as events took ~5x its size; streamed, the index and the
    # dashboard's own per-step series stay far below the file's 20 MB.
    assert growth_mb < 40, f"peak RSS grew {growth_mb} MB for a 20 MB recording"


@pytest.mark.slow
def test_a_200mb_recording_replays_with_dump_in_bounded_memory(tmp_path):
    path = tmp_path / "big.jsonl"
    n = build_big_recording(path, 200)
    code, growth_mb, last = _peak_rss_growth_mb(path)
    assert code == 0 and last == f"replayed {n} events through the dashboard; status completed"
    assert growth_mb < 200, f"peak RSS grew {growth_mb} MB for a 200 MB recording"
