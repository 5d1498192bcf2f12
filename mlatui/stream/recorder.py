"""JSONL recordings: one event per line, flushed as written, read back with clear errors, and
what a read found wrong with one, said in one phrase each (the replay's header, `replay --dump`
and the warnings print these, so a damaged recording never looks like a whole run)."""

from __future__ import annotations

import enum
import gzip
import io
import json
import os
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import BinaryIO

import msgspec

from mlatui.errors import UserError
from mlatui.stream.events import SCHEMA_VERSION, Event, MemorySample, RunEnd, RunHeader, Step
from mlatui.stream.recording_schema import LineError, decode_event

MAX_LINE_BYTES = 16 * 2**20  # one event; a longer line is refused before it is decoded
SKIP_HINT = "fix or delete that line, or replay with --skip-bad to leave bad lines out"
HEADER_HINT = (
    "a recording starts with its run header (never left out, even with --skip-bad): fix that "
    "line, or replay a file that `mlatui launch` or `mlatui bench SCENARIO` wrote"
)

# how far an event's `t` may fall behind an earlier event's before the clock counts as going
# backwards: events are written in order but stamped on the threads that made them (the shipped
# recordings' worst is 22 ms, a memory sample; memory samples are left out of the check)
BACKWARDS_TOLERANCE_S = 0.5


class Damage(enum.Enum):
    TRUNCATED = "truncated"  # the last line stops mid-line
    NO_RUN_END = "no run_end"  # cut at a line boundary (or the end never written)
    SKIPPED = "skipped"  # damaged lines left out (--skip-bad)
    NEGATIVE_MS = "negative ms"
    REVERSED_TIME = "reversed time"
    RUN_END_TWICE = "run_end twice"


@dataclass(frozen=True)
class RecordingNotice:
    damage: Damage
    line: int  # the first line it concerns
    count: int = 1  # how many lines it concerns

    @property
    def text(self) -> str:
        more = f" (and {self.count - 1} more)" if self.count > 1 else ""
        return {
            Damage.TRUNCATED: f"recording ends here (truncated at line {self.line})",
            Damage.NO_RUN_END: f"no run_end: the run was cut off (after line {self.line})",
            Damage.SKIPPED: f"{self.count} damaged line{'s' if self.count > 1 else ''} skipped "
            f"(first at line {self.line})",
            Damage.NEGATIVE_MS: f"negative step time at line {self.line}{more}",
            Damage.REVERSED_TIME: f"timestamps go backwards at line {self.line}{more}",
            Damage.RUN_END_TWICE: f"run_end twice (again at line {self.line})",
        }[self.damage]


class RecordingCheck:
    """Fed every event of a recording in order with its line number; `notices` says what is
    wrong with the whole (nothing, for a whole run)."""

    def __init__(self) -> None:
        self.last_line = 0
        self._last_t: float | None = None
        self._firsts: dict[Damage, int] = {}
        self._counts: dict[Damage, int] = {}
        self._run_ends = 0

    def _found(self, damage: Damage, line: int) -> None:
        self._firsts.setdefault(damage, line)
        self._counts[damage] = self._counts.get(damage, 0) + 1

    def see(self, line: int, event: Event) -> None:
        self.last_line = line
        t = getattr(event, "t", None)
        if t is not None and not isinstance(event, MemorySample):
            if self._last_t is not None and t < self._last_t - BACKWARDS_TOLERANCE_S:
                self._found(Damage.REVERSED_TIME, line)
            self._last_t = t if self._last_t is None else max(t, self._last_t)
        if isinstance(event, Step) and event.ms < 0:
            self._found(Damage.NEGATIVE_MS, line)
        if isinstance(event, RunEnd):
            self._run_ends += 1
            if self._run_ends == 2:
                self._found(Damage.RUN_END_TWICE, line)

    def notices(
        self, truncated_line: int | None = None, skipped: int = 0, first_skipped: int = 0
    ) -> tuple[RecordingNotice, ...]:
        found = [RecordingNotice(d, line, self._counts[d]) for d, line in self._firsts.items()]
        head = []
        if truncated_line is not None:
            head.append(RecordingNotice(Damage.TRUNCATED, truncated_line))
        if not self._run_ends:
            head.append(RecordingNotice(Damage.NO_RUN_END, self.last_line))
        if skipped:
            head.append(RecordingNotice(Damage.SKIPPED, first_skipped, skipped))
        return (*head, *found)


class RecordingError(UserError, ValueError):
    """A recording that cannot be read; the message names the file and line
    (`FILE:LINE: <field>: <problem>`), the hint what to do."""

    def __init__(self, what: str, hint: str = ""):
        super().__init__(what, hint)


class Recorder:
    """A sink that appends each event as one JSON line and flushes it, so a crash loses nothing
    already completed. A failed write (disk full, a device that refuses) never raises into the
    run: the first failure is kept in `error`, reported once through `on_error`, and later events
    are not written (the run goes on; its caller reports the failure and exits non-zero)."""

    def __init__(self, path: str | os.PathLike[str], on_error: Callable[[str], None] | None = None):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = open(self.path, "w", encoding="utf-8", buffering=1)
        self._lock = threading.Lock()
        self.on_error = on_error
        self.error: str | None = None
        self.lines = 0
        self._header_seen = False
        self._early: list[str] = []

    def _failed(self, e: OSError) -> None:
        self.error = (
            f"recording {self.path}: write failed after {self.lines} lines "
            f"({e.strerror or e}) — free some space or record elsewhere; the run went on, "
            "later events were not saved"
        )
        try:
            self._file.close()
        except OSError:
            pass
        if self.on_error is not None:
            self.on_error(self.error)

    def __call__(self, event: Event) -> None:
        line = event.to_json()
        with self._lock:
            if self._file.closed:
                return
            lines = [line]
            if not self._header_seen:  # loading events come before the header: held until it
                if event.type != "header":
                    self._early.append(line)
                    return
                self._header_seen = True
                lines, self._early = [line, *self._early], []
            for one in lines:
                try:
                    self._file.write(one + "\n")
                    self._file.flush()
                except OSError as e:
                    self._failed(e)
                    return
                self.lines += 1

    def close(self) -> None:
        with self._lock:
            if self._early and not self._file.closed:  # no header came: keep what did
                try:
                    self._file.write("\n".join(self._early) + "\n")
                except OSError as e:
                    self._failed(e)
                    return
                self._early = []
            if not self._file.closed:
                try:
                    self._file.flush()
                    os.fsync(self._file.fileno())
                except OSError as e:
                    self._failed(e)
                    return
                self._file.close()

    def __enter__(self) -> Recorder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def tee(*sinks: Callable[[Event], None]) -> Callable[[Event], None]:
    """One sink that hands each event to every one of `sinks`, in order."""

    def emit(event: Event) -> None:
        for sink in sinks:
            sink(event)

    return emit


@dataclass
class Recording:
    path: Path
    header: RunHeader
    events: list[Event]
    truncated: bool = False
    warnings: list[str] = field(default_factory=list)
    skipped: int = 0  # bad lines left out (skip_bad)


def parse_line(path: Path, lineno: int, line: str | bytes) -> Event:
    """One line as its event; RecordingError naming `path:lineno` and the field otherwise (or
    the recording's schema, for the header of an older one)."""
    if lineno == 1 and (old := older_schema(path, line)) is not None:
        raise old
    try:
        return decode_event(line)
    except LineError as e:
        raise RecordingError(f"{path}:{lineno}: {e}", SKIP_HINT) from None
    except ValueError as e:  # msgspec.DecodeError: not JSON, or not UTF-8
        raise RecordingError(f"{path}:{lineno}: not a JSON line ({e})", SKIP_HINT) from None


class _Version(msgspec.Struct):
    """What an older header surely holds, read before its fields are checked."""

    type: str
    schema_version: int
    mlatui_version: str = ""


def older_schema(path: Path, line: bytes | str) -> RecordingError | None:
    """The refusal of a recording whose header is of an older schema (None for any other line):
    its fields may not fit today's events, so it is refused before any of them is read."""
    try:
        head = msgspec.json.decode(line, type=_Version)
    except (msgspec.DecodeError, RecursionError):
        return None
    if head.type != "header" or not 1 <= head.schema_version < SCHEMA_VERSION:
        return None
    return _refused(path, head.schema_version, head.mlatui_version)


def _refused(path: Path, schema: int, mlatui_version: str) -> RecordingError:
    wrote = f" (mlatui {mlatui_version})" if mlatui_version else ""
    return RecordingError(
        f"{path} is a schema-{schema} recording; this mlatui reads schema {SCHEMA_VERSION}",
        f"replay it with the mlatui that wrote it{wrote}, or record the run again",
    )


def check_header(path: Path, event: Event) -> RunHeader:
    if not isinstance(event, RunHeader):
        raise RecordingError(
            f"{path}:1: the first line must be the run header, found '{event.type}'"
        )
    if event.schema_version < SCHEMA_VERSION:
        raise _refused(path, event.schema_version, event.mlatui_version)
    if event.schema_version > SCHEMA_VERSION:
        raise RecordingError(
            f"{path}:1: header.schema_version: recorded with schema {event.schema_version}, "
            f"newer than this mlatui reads ({SCHEMA_VERSION})",
            "upgrade mlatui to replay it",
        )
    return event


def open_recording(path: Path) -> BinaryIO:
    """The file opened for binary reading (a `.gz` one decompressed), after refusing what is not a
    regular file."""
    if not path.exists():
        raise RecordingError(f"{path}: no such recording")
    if path.is_dir():
        raise RecordingError(f"{path}: is a directory, not a JSONL recording")
    if not path.is_file():  # a FIFO or a device would block or never end
        raise RecordingError(f"{path}: not a regular file (a FIFO or a device?)")
    try:
        if path.suffix == ".gz":  # kept recordings are gzipped; held in memory so seeks are cheap
            with gzip.open(path, "rb") as packed:
                return io.BytesIO(packed.read())
        return open(path, "rb")
    except (OSError, EOFError) as e:  # EOFError: a truncated .gz
        raise RecordingError(f"{path}: cannot read it ({getattr(e, 'strerror', None) or e})") from e


def read_lines(path: Path, file: BinaryIO) -> Iterator[tuple[int, int, bytes]]:
    """(line number, byte offset, line) for each non-blank line, one at a time."""
    offset = 0
    lineno = 0
    while True:
        try:
            line = file.readline(MAX_LINE_BYTES + 1)
        except OSError as e:
            raise RecordingError(f"{path}:{lineno + 1}: cannot read it ({e.strerror})") from e
        if not line:
            return
        lineno += 1
        if len(line) > MAX_LINE_BYTES and not line.endswith(b"\n"):
            raise RecordingError(
                f"{path}:{lineno}: line: longer than {MAX_LINE_BYTES >> 20} MiB "
                "(not an mlatui event)"
            )
        if line.strip():
            yield lineno, offset, line
        elif lineno == 1:
            raise RecordingError(f"{path}:1: empty recording")
        offset += len(line)


@dataclass
class RecordingScan:
    """What a streamed read found besides the events: filled in as the events are read."""

    path: Path
    truncated: bool = False
    warnings: list[str] = field(default_factory=list)
    skipped: int = 0
    first_bad: str = ""
    first_bad_line: int = 0
    truncated_line: int | None = None
    check: RecordingCheck = field(default_factory=RecordingCheck)  # sees every event read

    def notices(self) -> tuple[RecordingNotice, ...]:
        """What is wrong with the recording as read so far (nothing, for a whole run)."""
        return self.check.notices(self.truncated_line, self.skipped, self.first_bad_line)

    def skipped_note(self) -> str:
        """The one line that reports skipped lines ("" when none were)."""
        if not self.skipped:
            return ""
        lines = "line" if self.skipped == 1 else "lines"
        return f"{self.path}: skipped {self.skipped} bad {lines} (first: {self.first_bad})"


def iter_recording(
    path: str | os.PathLike[str], skip_bad: bool = False, scan: RecordingScan | None = None
) -> Iterator[tuple[int, Event]]:
    """(byte offset, event) for each line, streamed: the header first (checked), then the
    events. A bad line raises RecordingError naming the file, line and field, or with
    `skip_bad` is counted in `scan` and left out. A truncated last line (a run killed
    mid-write) is dropped with a warning. The header itself is never skipped."""
    path = Path(path)
    scan = scan if scan is not None else RecordingScan(path)
    with open_recording(path) as file:
        seen_any = False
        for lineno, offset, line in read_lines(path, file):
            seen_any = True
            if lineno == 1 and (old := older_schema(path, line)) is not None:
                raise old  # before its fields are read: --skip-bad or a header hint won't help
            try:
                event = parse_line(path, lineno, line)
                if lineno > 1 and isinstance(event, RunHeader):
                    raise RecordingError(
                        f"{path}:{lineno}: header: a second run header (two recordings in one "
                        "file?)",
                        "split the file at that line, or --skip-bad to leave it out",
                    )
            except RecordingError as e:
                if lineno > 1 and not line.endswith(b"\n"):
                    scan.truncated = True
                    scan.truncated_line = lineno
                    scan.warnings.append(
                        f"{path}:{lineno}: last line is truncated (run stopped mid-write); ignored"
                    )
                    return
                if lineno == 1:  # never skipped: --skip-bad would not help
                    raise RecordingError(e.what, HEADER_HINT) from None
                if not skip_bad:
                    raise
                scan.skipped += 1
                scan.first_bad = scan.first_bad or e.what
                scan.first_bad_line = scan.first_bad_line or lineno
                continue
            if lineno == 1:
                event = check_header(path, event)
            scan.check.see(lineno, event)
            yield offset, event
        if not seen_any:
            raise RecordingError(f"{path}:1: empty recording")


def read_recording(path: str | os.PathLike[str], skip_bad: bool = False) -> Recording:
    """Read a whole recording into memory (for small ones: the replay streams instead)."""
    path = Path(path)
    scan = RecordingScan(path)
    events = [event for _, event in iter_recording(path, skip_bad, scan)]
    return Recording(
        path, check_header(path, events[0]), events[1:], scan.truncated, scan.warnings, scan.skipped
    )


# ---- which of mlatui's files a path holds ---------------------------------------------------
# From its first line: a run recording (events, the run header first) or one of the record files
# the benchmarks and `calibrate` write with `--out` (JSON lines of another shape). `replay` and
# `compare` say what such a file is instead of calling its first line a bad event.

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
