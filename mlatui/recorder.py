"""JSONL recordings: one event per line, flushed as written, read back with clear errors."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from mlatui.events import SCHEMA_VERSION, Event, RunHeader, event_from_dict


class RecordingError(ValueError):
    """A recording that cannot be read; the message names the file and line."""


class Recorder:
    """A sink that appends each event as one JSON line and flushes it, so a crash loses nothing
    already completed. A failed write (disk full, a device that refuses) never raises into the
    run: the first failure is kept in `error`, reported once through `on_error`, and later events
    are not written (the run goes on; its caller reports the failure and exits non-zero)."""

    def __init__(self, path: str | os.PathLike, on_error: Callable[[str], None] | None = None):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = open(self.path, "w", encoding="utf-8", buffering=1)
        self._lock = threading.Lock()
        self.on_error = on_error
        self.error: str | None = None
        self.lines = 0

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
            try:
                self._file.write(line + "\n")
                self._file.flush()
            except OSError as e:
                self._failed(e)
                return
            self.lines += 1

    def close(self) -> None:
        with self._lock:
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

    def __exit__(self, *exc) -> None:
        self.close()


@dataclass
class Recording:
    path: Path
    header: RunHeader
    events: list[Event]
    truncated: bool = False
    warnings: list[str] = field(default_factory=list)


def parse_line(path: Path, lineno: int, line: str) -> Event:
    try:
        data = json.loads(line)
    except json.JSONDecodeError as e:
        raise RecordingError(f"{path}:{lineno}: not a JSON line ({e.msg})") from e
    if not isinstance(data, dict) or "type" not in data:
        raise RecordingError(f"{path}:{lineno}: not an mlatui event (no 'type' field)")
    try:
        return event_from_dict(data)
    except (TypeError, ValueError) as e:
        raise RecordingError(f"{path}:{lineno}: {e}") from e


def check_header(path: Path, event: Event) -> RunHeader:
    if not isinstance(event, RunHeader):
        raise RecordingError(
            f"{path}:1: the first line must be the run header, found '{event.type}'"
        )
    if event.schema_version > SCHEMA_VERSION:
        raise RecordingError(
            f"{path}:1: recorded with schema {event.schema_version}, newer than this mlatui "
            f"reads ({SCHEMA_VERSION}); upgrade mlatui to replay it"
        )
    return event


def read_recording(path: str | os.PathLike) -> Recording:
    """Read a whole recording. A truncated last line (a run killed mid-write) is dropped with a
    warning; any other bad line is an error naming the file and line."""
    path = Path(path)
    if not path.exists():
        raise RecordingError(f"{path}: no such recording")
    if path.is_dir():
        raise RecordingError(f"{path}: is a directory, not a JSONL recording")
    if not path.is_file():  # a FIFO or a device would block or never end
        raise RecordingError(f"{path}: not a regular file (a FIFO or a device?)")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise RecordingError(f"{path}: not a text JSONL recording ({e.reason})") from e
    except OSError as e:
        raise RecordingError(f"{path}: cannot read it ({e.strerror})") from e
    lines = text.split("\n")
    ends_cleanly = text.endswith("\n")
    if ends_cleanly:
        lines = lines[:-1]
    if not lines or not lines[0].strip():
        raise RecordingError(f"{path}:1: empty recording")
    events: list[Event] = []
    truncated = False
    warnings: list[str] = []
    for i, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        last = i == len(lines)
        try:
            event = parse_line(path, i, line)
        except RecordingError:
            if last and not ends_cleanly and i > 1:
                truncated = True
                warnings.append(
                    f"{path}:{i}: last line is truncated (run stopped mid-write); ignored"
                )
                break
            raise
        if i == 1:
            event = check_header(path, event)
        events.append(event)
    header = events[0]
    return Recording(path, header, events[1:], truncated, warnings)
