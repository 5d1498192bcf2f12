"""Model loading as a phase of its own: what loads and how far (pure)."""

from __future__ import annotations

from dataclasses import dataclass

from mlatui.stream.events import LoadProgress, LoadStart


@dataclass
class LoadView:
    """The latest load; bytes read are an estimate when `measure` is not "exact"."""

    what: str = ""
    source: str = ""
    random_build: bool = False
    files: int = 0
    total_bytes: int = 0
    params: int = 0
    bytes_read: int = 0
    files_read: int = 0
    measure: str = ""
    started_t: float = 0.0
    last_t: float = 0.0  # the last time bytes moved
    done: bool = False

    @classmethod
    def start(cls, e: LoadStart) -> LoadView:
        return cls(
            e.what,
            e.source,
            e.random_build,
            e.files,
            e.total_bytes,
            e.params,
            started_t=e.t,
            last_t=e.t,
        )

    def progress(self, e: LoadProgress) -> None:
        if e.bytes_read != self.bytes_read or e.files_read != self.files_read or e.done:
            self.last_t = e.t
        self.bytes_read, self.files_read, self.measure, self.done = (
            e.bytes_read,
            e.files_read,
            e.measure,
            e.done,
        )

    @property
    def seconds(self) -> float:
        return self.last_t - self.started_t
