"""Which of mlatui's files a path holds, from its first line: a run recording (events, the run
header first) or one of the record files the benchmarks and `calibrate` write with `--out`
(JSON lines of another shape). `replay` and `compare` say what such a file is instead of calling
its first line a bad event."""

from __future__ import annotations

import gzip
import json
from enum import StrEnum
from pathlib import Path

FIRST_LINE_BYTES = 1 << 20  # a bench record carries its raw samples: a few KB


class RecordKind(StrEnum):
    """A record file by the command that writes it (value: how its records name themselves)."""

    ATTENTION = "attention-forced"
    INDEXER = "indexer"
    CONTEXT_PAIR = "context-pair"
    DECODE_PARITY = "decode-parity"
    OBSERVER = "observer"
    CALIBRATE = "calibrate"

    @property
    def command(self) -> str:
        """The command that writes it (and prints its table)."""
        return COMMANDS[self]

    @property
    def what(self) -> str:
        return f"a `{self.command}` record file"

    @property
    def dump_shows(self) -> str:
        """What `replay --dump` prints of it."""
        return f"prints its table as `{self.command}` did"


COMMANDS = {
    RecordKind.ATTENTION: "mlatui bench attention",
    RecordKind.INDEXER: "mlatui bench indexer",
    RecordKind.CONTEXT_PAIR: "mlatui bench context-pair",
    RecordKind.DECODE_PARITY: "mlatui bench decode-parity",
    RecordKind.OBSERVER: "mlatui bench observer",
    RecordKind.CALIBRATE: "mlatui calibrate",
}
# a BenchRecord's `bench` field -> its file's kind (the indexer bench names the part it timed)
BENCH_NAMES = {
    "attention-forced": RecordKind.ATTENTION,
    "indexer": RecordKind.INDEXER,
    "sparse-layer": RecordKind.INDEXER,
    "context-pair": RecordKind.CONTEXT_PAIR,
    "decode-parity": RecordKind.DECODE_PARITY,
}
# the `type` of the lines a typed record file starts with
TYPED = {
    "mode_run": RecordKind.OBSERVER,
    "summary": RecordKind.OBSERVER,
    "probe": RecordKind.CALIBRATE,
    "crossover": RecordKind.CALIBRATE,
}


def first_record(path: str | Path) -> object:
    """The first non-blank line of a `.jsonl` or `.jsonl.gz`, decoded (None where it is not
    JSON or cannot be read: the recording reader says why)."""
    path = Path(path)
    if not path.is_file():  # opening a FIFO waits for a writer; the recording reader refuses it
        return None
    try:
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rb") as f:
            for _ in range(64):
                line = f.readline(FIRST_LINE_BYTES)
                if not line:
                    return None
                if line.strip():
                    return json.loads(line)
    except (OSError, EOFError, ValueError):
        return None
    return None


def record_kind(path: str | Path) -> RecordKind | None:
    """The kind of record file at `path`; None for a run recording or anything else (which the
    recording reader checks, line by line)."""
    first = first_record(path)
    if not isinstance(first, dict):
        return None
    typed = first.get("type")
    if typed is None:
        return BENCH_NAMES.get(str(first.get("bench")))
    return TYPED.get(str(typed))
