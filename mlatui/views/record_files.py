"""A benchmark's record file, shown the way its command showed it: `replay --dump` prints its
table through the same printer the bench uses (mlatui.views.bench_report), read from the
records alone; `replay` without --dump says in one line what the file is."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mlatui.measure.indexer_records import IndexerRecord
from mlatui.measure.records import BenchRecord
from mlatui.stream.record_kinds import RecordKind
from mlatui.stream.recorder import SKIP_HINT, RecordingError, open_recording, read_lines
from mlatui.views import bench_report
from mlatui.views.mdtable import env_line


@dataclass
class RecordFile:
    """A record file's lines as dicts, and what reading it left out (a last line cut short by a
    killed run; with `skip_bad`, lines that are not JSON objects)."""

    lines: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def read_record_file(path: Path, skip_bad: bool = False) -> RecordFile:
    """Every line of a record file as a dict; a bad line is a RecordingError naming it, or with
    `skip_bad` left out and counted; a last line without its newline is left out and said."""
    read = RecordFile()
    skipped: list[int] = []
    with open_recording(path) as f:
        for lineno, _, line in read_lines(path, f):
            try:
                value = json.loads(line)
                if not isinstance(value, dict):
                    raise ValueError(f"expected an object, got {type(value).__name__}")
            except ValueError as e:
                if not line.endswith(b"\n"):
                    read.notes.append(f"{path}:{lineno}: last line is cut short; left out")
                    break
                if not skip_bad:
                    raise RecordingError(
                        f"{path}:{lineno}: not a record ({e})", SKIP_HINT
                    ) from None
                skipped.append(lineno)
                continue
            read.lines.append(value)
    if skipped:
        lines = "line" if len(skipped) == 1 else "lines"
        read.notes.append(f"{path}: skipped {len(skipped)} bad {lines} (first: line {skipped[0]})")
    return read


def _records(lines: Sequence[dict[str, Any]], cls: type[BenchRecord]) -> list[Any]:
    names = {f.name for f in dataclasses.fields(cls)}
    return [cls(**{k: v for k, v in line.items() if k in names}) for line in lines]


def record_file_line(path: Path, kind: RecordKind, skip_bad: bool = False) -> str:
    """What the file is, in one line: its kind, the command that wrote it, what it holds."""
    lines = read_record_file(path, skip_bad).lines
    return f"{path}: {kind.what}, not a run recording ({_holds(kind, lines)})"


def _holds(kind: RecordKind, lines: Sequence[dict[str, Any]]) -> str:
    if kind is RecordKind.OBSERVER:
        runs = sum(1 for line in lines if line.get("type") == "mode_run")
        return f"{runs} mode runs{'' if _summary_rows(lines) else ', no summary: stopped early'}"
    if kind is RecordKind.CALIBRATE:
        first = lines[0]
        probes = sum(1 for line in lines if line.get("type") == "probe")
        found = [
            f"T={x['context']}: {x['max_absorbed']}" for x in lines if x.get("type") == "crossover"
        ]
        measured = "; ".join(found) if found else "none completed"
        return (
            f"{first.get('family')}, {first.get('dtype')}: {probes} probes; measured max absorbed "
            f"L {measured}"
        )
    contexts = ", ".join(str(c) for c in dict.fromkeys(line.get("context") for line in lines))
    return f"{len(lines)} records at T={contexts}"


def _summary_rows(lines: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    return [line for line in lines if line.get("type") == "summary"]


def record_file_dump(path: Path, kind: RecordKind, skip_bad: bool = False) -> str:
    """What `replay --dump` prints for a record file: the line that says what it is, then its
    command's table (or, where it has none, why), then what reading it left out."""
    read = read_record_file(path, skip_bad)
    said = f"{path}: {kind.what} ({_holds(kind, read.lines)})\n\n"
    return said + DUMPS[kind](read.lines) + "".join(f"note: {n}\n" for n in read.notes)


def _attention(lines: Sequence[dict[str, Any]]) -> str:
    records: list[BenchRecord] = _records(lines, BenchRecord)
    summary = bench_report.forced_summary(records)
    if not summary:
        return (
            "no table: these records keep raw samples only (written before part (a) kept its "
            "estimates in them); run `mlatui bench attention --part a` again for one\n"
        )
    first = records[0]
    s = first.settings
    bits = f"{s['bits']}-bit" if s.get("bits") else "unquantised"
    title = (
        f"# mlatui bench attention: {first.family} ({s.get('size')} geometry {s.get('geometry')}, "
        f"{s.get('dtype', 'float32')}, {bits})\n{env_line(first.env)}\n\n"
    )
    widths = sorted({r.width for r in records})
    return title + bench_report.attention_report(summary, widths)


def _indexer(lines: Sequence[dict[str, Any]]) -> str:
    records: list[IndexerRecord] = _records(lines, IndexerRecord)
    if "min_rounds" not in records[0].settings:
        return (
            "no table: records of the first indexer bench (each cell's raw samples and their "
            "median, S = 1 checked by the difference of medians; no paired estimates); "
            "`mlatui bench indexer` measures with paired CIs\n"
        )
    return bench_report.indexer_report(records)


def _context_pair(lines: Sequence[dict[str, Any]]) -> str:
    records: list[BenchRecord] = _records(lines, BenchRecord)
    first = records[0]
    widths = list(dict.fromkeys(r.width for r in records))
    first.settings.setdefault("widths", widths)  # the first records did not keep them
    return bench_report.context_pair_header(
        first.env, first.settings
    ) + bench_report.context_pair_report(records)


def _decode_parity(lines: Sequence[dict[str, Any]]) -> str:
    records: list[BenchRecord] = _records(lines, BenchRecord)
    first = records[0]
    return bench_report.parity_header(
        first.env, first.settings, first.context
    ) + bench_report.parity_report(records)


def _observer(lines: Sequence[dict[str, Any]]) -> str:
    rows = _summary_rows(lines)
    if not rows:
        return (
            "no table: the run stopped before its summary; each completed mode run's samples "
            "are in the file's mode_run lines\n"
        )
    return f"# mlatui bench observer (ui {rows[0].get('ui_hz')} Hz)\n\n" + (
        bench_report.observer_table(rows) + "\n"
    )


def _calibrate(lines: Sequence[dict[str, Any]]) -> str:
    return bench_report.calibrate_report(lines)


DUMPS: dict[RecordKind, Callable[[Sequence[dict[str, Any]]], str]] = {
    RecordKind.ATTENTION: _attention,
    RecordKind.INDEXER: _indexer,
    RecordKind.CONTEXT_PAIR: _context_pair,
    RecordKind.DECODE_PARITY: _decode_parity,
    RecordKind.OBSERVER: _observer,
    RecordKind.CALIBRATE: _calibrate,
}
