"""Where recordings go by default, and the sink that tees events to several consumers."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from pathlib import Path

from mlatui.events import Event


def default_record_path(prefix: str = "run") -> Path:
    import platformdirs

    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    return Path(platformdirs.user_data_dir("mlatui")) / "runs" / f"{prefix}-{stamp}.jsonl"


def tee(*sinks: Callable[[Event], None]) -> Callable[[Event], None]:
    def emit(event: Event) -> None:
        for sink in sinks:
            sink(event)

    return emit
