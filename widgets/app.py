"""The mlatui dashboard app: one screen fed by any event source, drained on a fixed tick."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

from textual.app import App

from mlatui.errors import shell_path
from mlatui.stream.events import ErrorEvent, Event, LogMessage
from mlatui.stream.sources import Source
from mlatui.views.dashboard_state import DashboardState
from mlatui.views.more_offer import more_offer
from mlatui.views.report import SUMMARY_EVENT_TYPES

from .controls import KEY_BINDINGS, ControlsMixin
from .messages import RunFailed, RunFinished
from .pages import PagesMixin
from .panes import HeaderPane
from .render import ViewInfo
from .zoom import ZoomMixin

TIMELINE_MIN_HEIGHT = 24


class MlatuiApp(ControlsMixin, PagesMixin, ZoomMixin, App):
    CSS_PATH = "app.tcss"
    AUTO_FOCUS = None  # no pane is focused until the user picks one (tab, click)
    TITLE = "mlatui"
    BINDINGS = KEY_BINDINGS

    def __init__(
        self,
        source: Source,
        *,
        mode: str | None = None,
        ui_hz: float = 4.0,
        out_dir: str | os.PathLike | None = None,
        exit_when_done: bool = False,
    ):
        super().__init__()
        self.source = source
        self.mode: str = mode if mode else str(getattr(source, "kind", "replay"))
        self.ui_hz = max(0.2, min(float(ui_hz), 30.0))
        self.out_dir = Path(out_dir) if out_dir else Path.cwd()
        self.exit_when_done = exit_when_done
        self.dash = DashboardState()
        self.events: list[Event] = []
        self.paused = False  # live: freeze the display (events keep being recorded)
        self._held: list[Event] = []
        self._epoch = getattr(source, "epoch", 0)
        self._done = False
        self._settling = False
        # set once the finished run's last fold is on screen, laid out and painted (the finish
        # notice posted, the header's height its lines'); cleared by a seek back
        self.settled = asyncio.Event()
        self.compact = False
        self.page = 0
        self.ticks = 0
        self._clock_offset: float | None = None  # live: monotonic - engine time, smallest seen
        self.unexpected: BaseException | None = None  # the command line reports it in one line

    def _handle_exception(self, error: Exception) -> None:
        # Textual would print a traceback at exit; the command line prints one line and writes
        # the traceback to a crash log instead (mlatui/errors.py).
        if self.unexpected is None:
            self.unexpected = error
        super()._handle_exception(error)

    def _print_error_renderables(self) -> None:
        if self.unexpected is not None:
            self._exit_renderables.clear()
            return
        super()._print_error_renderables()

    # -- layout -----------------------------------------------------------------------------

    # -- the tick: drain, fold, refresh what changed ----------------------------------------

    def view_info(self) -> ViewInfo:
        src = self.source.playback
        if src is not None:  # one clock: the recording's own, as the log's
            recorded = src.recorded_s
            duration = src.duration_s
            return ViewInfo(
                self.mode,
                src.speed,
                src.paused,
                recorded,
                src.recorded_end_s,
                None,
                src.finished,
                recorded,
                # the timeline row, where a short screen can spare it (its keys work without it)
                tuple((pos / duration, name) for pos, name in src.phases)
                if duration and self.size.height >= TIMELINE_MIN_HEIGHT
                else (),
                src.position_s / duration if duration else None,
                notices=tuple(n.text for n in src.notices),
            )
        clock = self._clock_offset
        return ViewInfo(
            self.mode,
            1.0,
            self.paused,
            None,
            None,
            str(getattr(self.source, "record_path", "") or ""),
            self.source.finished,
            None if clock is None else time.monotonic() - clock,
            offer=more_offer(self.dash) if getattr(self.source, "offer_more", False) else None,
        )

    def _tick(self) -> None:
        self.ticks += 1
        epoch = getattr(self.source, "epoch", 0)
        if epoch != self._epoch:  # a replay seeked backwards: rebuild from the header
            self._epoch = epoch
            self.dash = DashboardState()
            self.events = []
            self.settled.clear()
        events = self.source.drain()
        if self.paused:
            self._held.extend(events)
        else:
            if self._held:
                events, self._held = self._held + events, []
            self._apply(events)
        changed = self.dash.take_changed()
        if self.source.playback is not None or self.source.live:
            changed.add("header")
        if changed:
            for pane in self.panes():
                if pane.section in changed or (pane.section == "header" and "phase" in changed):
                    pane.redraw()
        if self.source.finished and not self._held and not self.settled.is_set():
            if not self._done:
                self._done = self._settling = True
                self.post_message(RunFinished(self.dash.status))  # its handler settles
            elif not self._settling:  # the end again after a seek back
                self._settle()

    def _apply(self, events: list[Event]) -> None:
        if not events:
            return
        if self.source.playback is not None:  # a recording of any size: keep what the
            # summary reads, not every step (live runs keep all; bench observer counts them)
            self.events.extend(e for e in events if e.type in SUMMARY_EVENT_TYPES)
        else:
            self.events.extend(events)
        self.dash.apply_all(events)
        received = time.monotonic()
        for e in events:
            t = getattr(e, "t", None)
            if t is not None and (self._clock_offset is None or received - t < self._clock_offset):
                self._clock_offset = received - t
        for e in events:
            if isinstance(e, ErrorEvent):
                self.post_message(RunFailed(e.message))
            elif isinstance(e, LogMessage) and e.level == "error":  # e.g. the recording failed
                self.notify(e.message, title="error", severity="error", timeout=30)

    def on_run_finished(self, message: RunFinished) -> None:
        if self.exit_when_done:
            self.exit(0)
            return
        if self.mode in ("replay", "demo"):
            self.notify("replay finished: ← to seek back, e to export, q to quit", title="done")
        else:
            where = getattr(self.source, "record_path", None)
            shown = shell_path(where) if where is not None else "nowhere"
            self.notify(f"run {message.status}; recording kept at {shown}", title="done")
        self._settle()

    def _settle(self) -> None:
        """After the next refresh, declare the screen settled if the header shows every line of
        the last fold (else lay it out once more and look again)."""
        self._settling = True

        def check() -> None:
            header = self.query_one(HeaderPane)
            if not self.source.finished or self._held:  # a seek back meanwhile
                self._settling = False
            elif header.shows_every_line():
                self._settling = False
                self.settled.set()
            else:
                header.refresh(layout=True)
                self.call_after_refresh(check)

        self.call_after_refresh(check)

    def on_run_failed(self, message: RunFailed) -> None:
        self.notify(
            message.message, title="engine error: arms stopped", severity="error", timeout=30
        )

    def watch_theme(self) -> None:
        """The status and series colours are the theme's (widgets.palette): every pane draws
        again in them."""
        for pane in self.panes():
            pane.redraw()

    # -- actions ----------------------------------------------------------------------------

    def on_unmount(self) -> None:
        self.source.stop()
