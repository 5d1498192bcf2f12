"""`replay` knows every record file mlatui writes: a bench's `--out` records (attention, indexer,
context-pair, decode-parity, observer) and calibrate's probes. `--dump` prints such a file's
table through the printer its command used (the same lines it printed); without --dump one line
says what the file is and how to see it; --skip-bad never gives its own advice back."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from mlatui.cli import main
from mlatui.stream.recorder import RecordKind, record_kind

ROOT = Path(__file__).resolve().parents[1]
KEPT = ROOT / "tests" / "fixtures" / "recordings"
PRINTED = ROOT / "tests" / "fixtures" / "dumps" / "bench"
# each bench's kept record file and what that bench printed on stdout when it wrote it
BENCHES = {
    RecordKind.ATTENTION: "cpu-attention-tiny",
    RecordKind.INDEXER: "cpu-indexer-tiny",
    RecordKind.CONTEXT_PAIR: "cpu-context-pair-tiny",
    RecordKind.DECODE_PARITY: "cpu-decode-parity-tiny",
    RecordKind.OBSERVER: "cpu-observer-tiny",
    RecordKind.CALIBRATE: "cpu-calibrate-tiny",
}


def _table_lines(text: str) -> list[str]:
    """The table rows and the per-context lines below a table (attention's crossovers)."""
    return [line for line in text.splitlines() if line.startswith(("|", "T=", "- T="))]


@pytest.mark.parametrize("kind", list(BENCHES), ids=lambda k: k.value)
def test_replay_dump_of_each_bench_record_file_prints_the_table_its_bench_printed(kind, capsys):
    path = KEPT / f"{BENCHES[kind]}.jsonl.gz"
    assert record_kind(path) is kind
    assert main(["replay", "--dump", str(path)]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith(f"{path}: a `{kind.command}` record file (")
    printed = gzip.decompress((PRINTED / f"{BENCHES[kind]}.txt.gz").read_bytes()).decode()
    assert _table_lines(printed) and _table_lines(out) == _table_lines(printed)


@pytest.mark.parametrize("kind", list(BENCHES), ids=lambda k: k.value)
def test_replay_without_dump_says_in_one_line_what_the_file_is(kind, capsys):
    path = KEPT / f"{BENCHES[kind]}.jsonl.gz"
    assert main(["replay", str(path)]) == 2
    err = capsys.readouterr().err
    (line,) = err.strip().splitlines()
    assert line.startswith(f"mlatui: error: {path}: a `{kind.command}` record file, not a run")
    assert f"`mlatui replay --dump {path}` prints its table as `{kind.command}` did" in line
    assert "not an mlatui event" not in line and "--skip-bad" not in line


def test_the_bench_files_kept_in_docs_are_recognised(capsys):
    pair = ROOT / "docs" / "data" / "h200-context-pair-stock.jsonl.gz"
    assert main(["replay", "--dump", str(pair)]) == 0
    rows = _table_lines(capsys.readouterr().out)  # the first records kept neither widths nor quads
    assert rows[2].startswith("| 1 | 35.67 [33.59, 37.09] | 35.19 [33.55, 36.82] | 0.992 [0.959")
    assert len(rows) == 6
    indexer = ROOT / "docs" / "data" / "h200-indexer.jsonl.gz"
    assert main(["replay", "--dump", str(indexer)]) == 0
    out = capsys.readouterr().out
    assert "a `mlatui bench indexer` record file (30 records at T=8192, 32768, 131072)" in out
    assert "no table: records of the first indexer bench" in out


def test_a_calibrate_file_says_its_crossovers_and_the_first_ones_print_without_a_formula(
    tmp_path, capsys
):
    path = KEPT / "cpu-calibrate-tiny.jsonl.gz"
    assert main(["replay", str(path)]) == 2
    line = capsys.readouterr().err
    assert "(deepseek_v3, float32: 2 probes; measured max absorbed L T=64: 4; T=128: 4)" in line
    first = tmp_path / "first.jsonl"  # before the crossover lines named the geometry
    first.write_text(
        "".join(
            x.replace(',"geometry":"r512-n128-v128","heads":2', "").replace(',"max_width":4', "")
            for x in gzip.open(path, "rt")
        )
    )
    assert main(["replay", "--dump", str(first)]) == 0
    assert "| 64 | 4 | – | 1 |" in capsys.readouterr().out


def test_skip_bad_never_repeats_its_own_advice(tmp_path, capsys):
    path = KEPT / f"{BENCHES[RecordKind.CONTEXT_PAIR]}.jsonl.gz"
    assert main(["replay", "--dump", "--skip-bad", str(path)]) == 0  # a record file: its table
    assert _table_lines(capsys.readouterr().out)
    odd = tmp_path / "odd.jsonl"
    odd.write_text('{"foo": 1}\n{"type": "run_end"}\n')
    for argv in (["--skip-bad"], []):
        assert main(["replay", "--dump", *argv, str(odd)]) == 2
        (line,) = capsys.readouterr().err.strip().splitlines()
        assert line.startswith(f"mlatui: error: {odd}:1: type: missing (not an mlatui event) — ")
        assert "replay with --skip-bad" not in line  # the header line is never skipped


def test_a_damaged_record_file_says_what_it_left_out(tmp_path, capsys):
    lines = gzip.open(KEPT / f"{BENCHES[RecordKind.CONTEXT_PAIR]}.jsonl.gz", "rt").readlines()
    cut = tmp_path / "cut.jsonl"  # a run killed mid-write: the last line has no newline
    cut.write_text("".join(lines) + lines[0][:40])
    assert main(["replay", "--dump", str(cut)]) == 0
    out = capsys.readouterr().out
    assert len(_table_lines(out)) == 4 and f"note: {cut}:5: last line is cut short" in out
    bad = tmp_path / "bad.jsonl"
    bad.write_text(lines[0] + "[1, 2]\n" + "".join(lines[1:]))
    assert main(["replay", "--dump", str(bad)]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"mlatui: error: {bad}:2: not a record (expected an object, got list)")
    assert line.endswith("or replay with --skip-bad to leave bad lines out")
    assert main(["replay", "--dump", "--skip-bad", str(bad)]) == 0
    out = capsys.readouterr().out
    assert len(_table_lines(out)) == 4 and "skipped 1 bad line (first: line 2)" in out


@pytest.mark.skipif(not hasattr(__import__("os"), "mkfifo"), reason="no FIFOs on this platform")
def test_a_fifo_is_refused_in_one_line_without_waiting_for_a_writer(tmp_path, capsys):
    import os
    import threading

    fifo = tmp_path / "run.jsonl"
    os.mkfifo(fifo)
    done: list[int] = []
    worker = threading.Thread(target=lambda: done.append(main(["replay", str(fifo), "--dump"])))
    worker.daemon = True  # a regression blocks in open(); the assertion below reports it
    worker.start()
    worker.join(timeout=20)
    assert done == [2], "replay of a FIFO waited for a writer instead of refusing it"
    assert "not a regular file" in capsys.readouterr().err
