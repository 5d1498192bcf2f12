"""Waiting for the dashboard's own "settled" state: the finished run's last fold on screen, laid
out and painted (MlatuiApp.settled), rather than for a guessed number of pauses."""

from __future__ import annotations

import asyncio
import time

from mlatui.widgets.panes import HeaderPane


async def settled(pilot, timeout_s: float = 60.0) -> None:
    """Wait until the app declares the finished run settled, then take the finish notice away
    (it would cover the panes) and check the screen is still settled."""
    app = pilot.app
    await asyncio.wait_for(app.settled.wait(), timeout_s)
    app.clear_notifications()
    await pilot.pause()
    assert app.settled.is_set()
    assert app.query_one(HeaderPane).shows_every_line()


async def until(pilot, cond, timeout_s: float = 60.0) -> None:
    """Wait until `cond()` holds (the app handles messages in its own time: a loaded host takes
    more than one pause), then one more pause."""
    end = time.monotonic() + timeout_s
    while not cond():
        assert time.monotonic() < end, "timed out"
        await pilot.pause(0.02)
    await pilot.pause()
