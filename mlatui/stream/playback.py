"""What a source can do besides handing out events: `playback` (a recording's own clock, with
pause, single step, speed and seek) or nothing, and `live` (events come from a run as it goes).
The app asks these, never which class a source is. Nothing here imports mlx or textual.
"""

from __future__ import annotations

from typing import Protocol

from mlatui.stream.recording_state import RecordingNotice


class Playback(Protocol):
    """A replay's controls and its clock (mlatui.stream.replay_source.ReplaySource)."""

    speed: float
    paused: bool
    duration_s: float
    phases: list[tuple[float, str]]  # (replay position, name) of each phase start
    notices: tuple[RecordingNotice, ...]  # what is wrong with the recording (nothing: whole)

    @property
    def position_s(self) -> float: ...

    @property
    def recorded_s(self) -> float: ...

    @property
    def recorded_end_s(self) -> float: ...

    @property
    def finished(self) -> bool: ...

    def toggle_pause(self) -> bool: ...

    def step(self) -> None: ...

    def set_speed(self, speed: float) -> None: ...

    def seek(self, delta_s: float) -> None: ...

    def seek_to(self, position_s: float) -> None: ...
