"""Where recordings go by default, and the sink that tees events to several consumers."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from mlatui.stream.events import Event


def default_record_path(prefix: str = "run") -> Path:
    """A new, empty recording under the user's data dir, unique (sub-second stamp + pid, created
    with O_EXCL); a one-line UserError when that folder is unusable."""
    from mlatui.config.outputs import new_record_path

    return new_record_path(prefix)


def tee(*sinks: Callable[[Event], None]) -> Callable[[Event], None]:
    def emit(event: Event) -> None:
        for sink in sinks:
            sink(event)

    return emit
