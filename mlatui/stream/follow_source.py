"""`replay --follow`: a recording that is still being written (a headless `bench`, rank 0 of a
distributed run), shown as it grows. Each drain reads the lines completed since the last one (a
line the writer has not finished yet waits for its newline); the source is finished once
`run_end` has been read. Nothing here imports mlx or textual."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import BinaryIO

from mlatui.stream.events import Event, LogMessage, RunEnd, RunHeader
from mlatui.stream.recorder import MAX_LINE_BYTES, RecordingError, check_header, parse_line

READ_BYTES = 4 * 2**20  # per drain at most: a long backlog is shown over a few ticks


class FollowSource:
    """Tails a JSONL recording. The writer flushes every event as one line, so a line without
    its newline is simply not complete yet."""

    kind = "follow"
    live = True  # a recording still being written: no seeking in what has not happened
    playback = None

    def __init__(self, path: str | os.PathLike[str], poll_s: float = 0.25):
        self.path = Path(path)
        self.record_path = self.path
        self.poll_s = poll_s
        if self.path.exists() and not self.path.is_file():
            raise RecordingError(f"{self.path}: not a regular file (a FIFO or a device?)")
        self._file: BinaryIO | None = None
        self._partial = b""
        self._lineno = 0
        self._ended = False
        self._started = False
        self._waiting_since = time.monotonic()
        self._said_waiting = False
        self._last_t = 0.0
        self.header: RunHeader | None = None
        self.warnings: list[str] = []

    def start(self) -> None:
        self._started = True

    def _open(self) -> BinaryIO | None:
        if self._file is None:
            try:
                self._file = open(self.path, "rb")
            except FileNotFoundError:
                return None
            except OSError as e:
                raise RecordingError(f"{self.path}: cannot read it ({e.strerror})") from e
        return self._file

    def drain(self) -> list[Event]:
        if not self._started or self._ended:
            return []
        file = self._open()
        if file is None:
            return self._waiting()
        chunk = file.read(READ_BYTES)
        if not chunk:
            return self._waiting()
        self._waiting_since = time.monotonic()
        data = self._partial + chunk
        *lines, self._partial = data.split(b"\n")
        if len(self._partial) > MAX_LINE_BYTES:
            raise RecordingError(f"{self.path}:{self._lineno + 1}: a line over 16 MB")
        out: list[Event] = []
        for line in lines:  # complete lines only
            if not line.strip():
                continue
            self._lineno += 1
            event = parse_line(self.path, self._lineno, line)
            if self.header is None:
                self.header = check_header(self.path, event)
            out.append(event)
            self._last_t = getattr(event, "t", self._last_t)
            if isinstance(event, RunEnd):
                self._ended = True
                break
        return out

    def _waiting(self) -> list[Event]:
        """Nothing new: after a while, say once that the run is still being waited for."""
        if self.header is not None and not self._said_waiting:
            if time.monotonic() - self._waiting_since > 30:
                self._said_waiting = True
                return [
                    LogMessage(
                        self._last_t,
                        "info",
                        f"follow: nothing new in {self.path.name} for 30 s; still waiting for "
                        "the run's end (q quits)",
                    )
                ]
        return []

    def stop(self) -> None:
        if self._file is not None:
            self._file.close()

    @property
    def finished(self) -> bool:
        return self._ended
