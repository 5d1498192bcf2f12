"""An engine for the `+` pipe test: it ends at once, then answers each request in its log."""

from __future__ import annotations

import threading

from ui_events import header

from mlatui.stream.events import LogMessage, RunEnd
from mlatui.stream.sources import RunControl


def engine(config, emit, stop: threading.Event) -> str:
    emit(header())
    emit(RunEnd(0.1, "completed", (2048,)))
    while isinstance(stop, RunControl) and stop.offer_more and not stop.is_set():
        rounds = stop.next_ask()
        if rounds is not None:
            emit(LogMessage(0.2, "info", f"asked for {rounds} more rounds"))
            emit(RunEnd(0.3, "completed"))
    return "completed"
