"""The replay sources: a recording played back on its own clock, streamed from the file, and one
followed as it is written.

Opening a recording validates every line once (stopping at the first bad one, or skipping bad
lines with `skip_bad`) and keeps only an index: each event's byte offset, replay time and
whether it is a timed step, about 17 bytes an event. Events are decoded again from the file as
they are handed out, at most `batch` per drain, so a recording of any size replays in bounded
memory. Gaps between events are capped at `max_gap_s` recording seconds (the UI tick), so a
recorded `t` of 1e308 never makes a replay wait. Nothing here imports mlx or textual.
"""

from __future__ import annotations

import bisect
import os
import threading
import time
from array import array
from pathlib import Path
from typing import BinaryIO

from mlatui.stream.events import Event, LogMessage, RunEnd, RunHeader
from mlatui.stream.recorder import (
    MAX_LINE_BYTES,
    RecordingError,
    RecordingScan,
    check_header,
    iter_recording,
    open_recording,
    parse_line,
)

DEFAULT_MAX_GAP_S = 0.25  # the default UI tick (4 Hz)
DEFAULT_BATCH = 20_000  # events handed out per drain at most
# what a single step skips: samples that move no figure a person reads (a step of those would
# look like a key that does nothing)
UNSEEN = ("memory", "progress", "load_progress")


class ReplaySource:
    """Plays a recording back on the recording's own clock (`t / speed`, gaps capped), with
    pause, single step, seek and speed changes. Seeking backwards bumps `epoch`: the consumer
    must rebuild its state from the events drained next (they start again at the header)."""

    kind = "replay"
    record_path: Path | None = None
    live = False
    turns = None  # no engine runs here

    @property
    def playback(self) -> ReplaySource:
        return self

    def __init__(
        self,
        path: str | os.PathLike[str],
        speed: float = 1.0,
        *,
        skip_bad: bool = False,
        max_gap_s: float = DEFAULT_MAX_GAP_S,
        batch: int = DEFAULT_BATCH,
    ):
        if not speed > 0:
            raise ValueError("speed must be > 0")
        self.path = Path(path)
        self.scan = RecordingScan(self.path)
        self._offsets = array("q")
        self._times = array("d")
        self._seen = bytearray()  # 1 where the event changes what the screen shows
        self._recorded = array("d")  # each event's recorded t (the run's own clock)
        self.phases: list[tuple[float, str]] = []  # (replay position, name) of each phase start
        self.header: RunHeader | None = None
        clock = 0.0
        last_t: float | None = None
        for offset, event in iter_recording(self.path, skip_bad, self.scan):
            if self.header is None:
                self.header = check_header(self.path, event)
            t = getattr(event, "t", None)
            if t is not None:
                if last_t is not None:  # monotonic (for bisect), no gap past max_gap_s
                    clock += min(max(t - last_t, 0.0), max_gap_s)
                last_t = t
            self._offsets.append(offset)
            self._times.append(clock)
            self._seen.append(event.type not in UNSEEN)
            self._recorded.append(last_t if last_t is not None else 0.0)
            if event.type == "phase_start":
                self.phases.append((clock, str(getattr(event, "phase", ""))))
        self.duration_s = self._times[-1]
        self.notices = self.scan.notices()  # said on screen and by --dump, never only in a log
        self.batch = max(1, int(batch))
        self.speed = speed
        self.paused = False
        self.epoch = 0
        self._file: BinaryIO | None = None
        self._next = 0  # index of the next event to hand out
        self._pos = 0.0  # recording seconds at the anchor
        self._anchor = 0.0  # wall clock at the anchor
        self._started = False
        self._lock = threading.Lock()

    @property
    def warnings(self) -> list[str]:
        return self.scan.warnings

    def __len__(self) -> int:
        return len(self._offsets)

    def _event(self, index: int) -> Event:
        if index == 0 and self.header is not None:
            return self.header
        if self._file is None or self._file.closed:
            self._file = open_recording(self.path)
        self._file.seek(self._offsets[index])
        return parse_line(self.path, index, self._file.readline())

    def _now(self) -> float:
        return (
            self._pos
            if self.paused or not self._started
            else self._pos + (time.monotonic() - self._anchor) * self.speed
        )

    @property
    def position_s(self) -> float:
        with self._lock:
            return min(self._now(), self.duration_s)

    @property
    def recorded_s(self) -> float:
        """The run's own clock (the events' `t`) at the last event handed out: the time the
        log lines, elapsed and the ETA are in."""
        with self._lock:
            return self._recorded[max(0, self._next - 1)]

    @property
    def recorded_end_s(self) -> float:
        return self._recorded[-1]

    def start(self) -> None:
        with self._lock:
            self._started = True
            self._anchor = time.monotonic()

    def _reanchor(self, pos: float) -> None:
        self._pos = max(0.0, min(pos, self.duration_s))
        self._anchor = time.monotonic()

    def drain(self) -> list[Event]:
        with self._lock:
            if not self._started:
                return []
            end = bisect.bisect_right(self._times, self._now())
            end = min(max(end, 1), self._next + self.batch)  # the header is always out first
            out = [self._event(i) for i in range(self._next, end)]
            self._next = max(self._next, end)
            return out

    def set_speed(self, speed: float) -> None:
        with self._lock:
            self._reanchor(self._now())
            self.speed = max(0.0625, min(float(speed), 1024.0))

    def pause(self) -> None:
        with self._lock:
            self._reanchor(self._now())
            self.paused = True

    def resume(self) -> None:
        with self._lock:
            self._reanchor(self._pos)  # no catching up after a pause
            self.paused = False

    def toggle_pause(self) -> bool:
        (self.resume if self.paused else self.pause)()
        return self.paused

    def step(self) -> None:
        """Pause, then move the clock to the next event that changes the screen (a timed step,
        a decode block, a check, a result, a log line: not a memory or progress sample)."""
        with self._lock:
            self._reanchor(self._now())
            self.paused = True
            index = self._seen.find(1, self._next)
            self._pos = self.duration_s if index < 0 else max(self._pos, self._times[index])

    def seek_to(self, position_s: float) -> None:
        """Jump to a replay position (Home: 0, End: duration_s)."""
        with self._lock:
            delta = position_s - self._now()
        self.seek(delta)

    def seek(self, delta_s: float) -> None:
        with self._lock:
            target = self._now() + delta_s
            self._reanchor(target)
            first_after = bisect.bisect_right(self._times, self._pos)
            if first_after < self._next:  # went back: hand everything out again from the header
                self._next = 0
                self.epoch += 1

    def stop(self) -> None:
        with self._lock:
            self._reanchor(self._now())
            self.paused = True
            if self._file is not None:
                self._file.close()

    @property
    def finished(self) -> bool:
        return self._next >= len(self._offsets)


# ---- `replay --follow`: a recording that is still being written ------------------------------

READ_BYTES = 4 * 2**20  # per drain at most: a long backlog is shown over a few ticks


class FollowSource:
    """Tails a JSONL recording that is still being written (a headless `bench`, rank 0 of a
    distributed run), shown as it grows. The writer flushes every event as one line, so a line
    without its newline is simply not complete yet: each drain reads the lines completed since
    the last one; the source is finished once `run_end` has been read."""

    kind = "follow"
    live = True  # a recording still being written: no seeking in what has not happened
    playback = None
    turns = None

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
