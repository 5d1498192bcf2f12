"""The mlatui dashboard app: one screen fed by any event source, drained on a fixed tick; its
panes on three pages (side by side, or one at a time on a compact screen), `z` zooming the
focused one, and what each key does (the same actions in the command palette)."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from textual.app import App, ComposeResult, SystemCommand
from textual.containers import Horizontal
from textual.message import Message
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Tab, Tabs

from mlatui.errors import shell_path
from mlatui.stream.events import ErrorEvent, Event, LogMessage
from mlatui.stream.sources import DrawTurns, Source
from mlatui.views.dashboard_state import DashboardState
from mlatui.views.key_figure import FigureView
from mlatui.views.keys import KEYS, Key, Only, keys_for
from mlatui.views.keys import works as key_works
from mlatui.views.progress_view import more_offer
from mlatui.views.summary import SUMMARY_EVENT_TYPES

from .arm import ARM_TITLES
from .figure import VIEW_TITLES
from .help import HelpScreen, bindings, output_name, palette_commands, save_screenshot, unwritable
from .keybar import KeyFooter
from .panes import (
    ArmPane,
    ExplainPane,
    HeaderPane,
    LogPane,
    MarginalPane,
    MemoryPane,
    Pane,
    ScrollPane,
    ValidityPane,
)
from .render import ViewInfo
from .symbols import symbols

TIMELINE_MIN_HEIGHT = 24

# on a compact screen the first page is the one that answers the question: the key figure and the
# L = 1 checks (the verdict is in the header on every page)
# (the tab labels carry their keys: the page keys' hints on a compact screen)
PAGES = (
    ("page-cost", "1 cost · validity"),
    ("page-arms", "2 arms"),
    ("page-sys", "3 memory · log"),
)
# below 120 columns the key figure beside the L = 1 table would get 40 columns: one page at a time
COMPACT_WIDTH, COMPACT_HEIGHT = 120, 34
TEXTUAL_TWINS = {"Theme", "Keys", "Screenshot", "Maximize", "Minimize"}
THEMES = ("textual-dark", "nord", "gruvbox", "tokyo-night", "textual-light")
KEY_BINDINGS = bindings(KEYS)
WHERE = {k.action.split("(")[0]: k.only for k in KEYS}  # where each action works


@dataclass
class RunFinished(Message):
    """The source has handed out its last event."""

    status: str


@dataclass
class TurnHeld(Message):
    """A drawing turn has come (`held`: the arms wait for the frame; False: the wait ran out)."""

    turns: DrawTurns
    held: bool
    asked_at: float  # the turn's (monotonic): a turn given up on meanwhile ends nothing


TURN_LOST_S = 10.0  # a drawing turn takes at most DrawTurns' 1 s wait and a frame


class MlatuiApp(App):
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
        self._turn_asked: float | None = None  # when the turn in flight asked (None: none)
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
        """The UI's fixed tick. With an engine in this process (running, or waiting for `+` and
        running the rounds it asks for), the drawing waits for its turn between the arms' calls
        (mlatui.stream.sources.DrawTurns), asked for on a thread of its own: the wait may last
        one arm call, which the event loop must not."""
        turns = self.source.turns
        if turns is None:
            self._draw()
            return
        now = time.monotonic()
        if self._turn_asked is not None and now - self._turn_asked > TURN_LOST_S:
            self._turn_asked = None  # its frame's callback never came (its screen closed first)
            turns.end_draw()
        if self._turn_asked is None:
            self._turn_asked = now
            threading.Thread(
                target=self._ask_turn, args=(turns, now), name="mlatui-draw-turn", daemon=True
            ).start()

    def _ask_turn(self, turns: DrawTurns, asked_at: float) -> None:
        held = turns.begin_draw()
        try:
            posted = self.post_message(TurnHeld(turns, held, asked_at))
        except RuntimeError:  # the app's event loop has closed
            posted = False
        if not posted:  # the app has closed meanwhile
            turns.end_draw()

    def on_turn_held(self, message: TurnHeld) -> None:
        def drawn() -> None:  # the frame is on the screen: the arms go on
            if self._turn_asked != message.asked_at:
                return  # given up on (TURN_LOST_S): the arms went on long ago
            if message.held:
                message.turns.end_draw()
            self._turn_asked = None

        try:
            self._draw()
        finally:  # after the refresh that the callbacks of the draw's own refresh ask for
            # (a log pane's scroll to its end): the second pass is drawn in the turn too
            self.call_after_refresh(self.call_after_refresh, drawn)

    def _draw(self) -> None:
        """Drain the source, fold what came, redraw the panes whose sections changed."""
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
            if isinstance(e, ErrorEvent):  # the arms have stopped
                self.notify(
                    e.message, title="engine error: arms stopped", severity="error", timeout=30
                )
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

    def watch_theme(self) -> None:
        """The status and series colours are the theme's (widgets.palette): every pane draws
        again in them."""
        for pane in self.panes():
            pane.redraw()

    def on_unmount(self) -> None:
        if self.source.turns is not None:  # a turn held at exit must not hold the arms
            self.source.turns.end_draw()
        self.source.stop()

    # -- layout: the pages ----------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield HeaderPane(id="header")
        if self.mode == "demo":
            yield ExplainPane(id="explain", title="what you are looking at")
        tabs = Tabs(*(Tab(label, id=f"tab-{pid}") for pid, label in PAGES), id="pages")
        tabs.can_focus = False  # 1/2/3 or a click switch pages; ←/→ stay replay seeks
        yield tabs
        with Horizontal(id="page-arms", classes="page"):
            yield ArmPane("stock", id="arm-stock", title=ARM_TITLES["stock"])
            yield ArmPane("patched", id="arm-patched", title=ARM_TITLES["patched"])
        with Horizontal(id="page-cost", classes="page"):
            yield MarginalPane(id="marginal", title=VIEW_TITLES[FigureView.MARGINAL])
            yield ValidityPane(id="validity", title="L=1 check per context")
        with Horizontal(id="page-sys", classes="page"):
            yield MemoryPane(id="memory", title="memory")
            yield LogPane(id="log", title="events")
        yield KeyFooter(compact=True)

    def on_mount(self) -> None:
        self._layout(self.size.width, self.size.height)
        self.source.start()
        self._tick()
        self.set_interval(1.0 / self.ui_hz, self._tick, name="drain")

    def on_resize(self, event) -> None:
        self._layout(event.size.width, event.size.height)

    def _layout(self, width: int, height: int) -> None:
        compact = width < COMPACT_WIDTH or height < COMPACT_HEIGHT
        self.compact = compact
        self.screen.set_class(compact, "compact")
        self._show_page(self.page)

    def _show_page(self, index: int) -> None:
        self.page = index % len(PAGES)
        for i, (pid, _) in enumerate(PAGES):
            self.query_one(f"#{pid}").set_class(self.compact and i != self.page, "hidden")
        tabs = self.query_one("#pages", Tabs)
        tab_id = f"tab-{PAGES[self.page][0]}"
        if tabs.active != tab_id:
            tabs.active = tab_id

    def on_tabs_tab_activated(self, event: Tabs.TabActivated) -> None:
        if event.tab is None:
            return
        ids = [f"tab-{pid}" for pid, _ in PAGES]
        if event.tab.id in ids:
            self.page = ids.index(event.tab.id)
            for i, (pid, _) in enumerate(PAGES):
                self.query_one(f"#{pid}").set_class(self.compact and i != self.page, "hidden")

    # -- zoom ----------------------------------------------------------------------------

    def panes(self) -> list[Pane | ScrollPane]:
        return [*self.query(Pane), *self.query(ScrollPane)]

    def zoom_target(self) -> Pane | ScrollPane | None:
        """The focused pane, else the key figure when it is on screen, else the first pane of
        the page shown."""
        focused = self.focused
        while focused is not None and not isinstance(focused, Pane | ScrollPane):
            focused = focused.parent if isinstance(focused.parent, Widget) else None
        if focused is not None:
            return focused
        shown = [
            p
            for p in self.panes()
            if p.can_focus and p.display and p.parent is not None and p.parent.display and p.region
        ]
        marginal = [p for p in shown if p.id == "marginal"]
        first = marginal or shown
        return first[0] if first else None

    def action_zoom(self) -> None:
        """Zoom the focused pane to the whole screen (the footer stays), or back."""
        if self.screen.maximized is not None:
            self.screen.minimize()
            return
        target = self.zoom_target()
        if target is not None:
            target.focus()
            self.screen.maximize(target, container=False)

    # -- keys ----------------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return self.works(WHERE.get(action, Only.ALWAYS))

    def works(self, only: Only) -> bool:
        return key_works(only, self.source.playback is not None, self.compact, self.mode == "demo")

    def keys_here(self) -> list[Key]:
        """The listed keys that work in this app now (the help's rows)."""
        return keys_for(self.source.playback is not None, self.compact, self.mode == "demo")

    def action_more_rounds(self) -> None:
        """`+` in a live run: once it has ended with undecided L = 1 checks, more rounds of them
        on the arms still loaded; otherwise a short notice of why nothing happens."""
        ask = getattr(self.source, "request_more", None)
        offer = more_offer(self.dash)
        if offer is None:
            why = (
                "+ measures more rounds once the run has ended"
                if self.dash.status in ("waiting", "running")
                else "+: nothing undecided (every L = 1 check is decided)"
            )
            self.notify(why, timeout=3)
        elif ask is None or not ask(offer.rounds):
            self.notify("+: this run's arms are no longer loaded", timeout=3)
        else:
            where = ", ".join(map(str, offer.contexts))
            self.notify(f"measuring {offer.rounds} more rounds at {where}", timeout=3)

    def action_toggle_pause(self) -> None:
        if (playback := self.source.playback) is not None:
            playback.toggle_pause()
        else:
            self.paused = not self.paused
            if not self.paused:
                self._tick()
        self.query_one(HeaderPane).redraw()

    def action_step(self) -> None:
        if (playback := self.source.playback) is not None:
            playback.step()
            self._tick()

    def _set_speed(self, factor: float) -> None:
        if (playback := self.source.playback) is not None:
            playback.set_speed(playback.speed * factor)
            self.query_one(HeaderPane).redraw()

    def action_faster(self) -> None:
        self._set_speed(2.0)

    def action_slower(self) -> None:
        self._set_speed(0.5)

    def _seek(self, sign: int) -> None:
        if (playback := self.source.playback) is not None:
            playback.seek(sign * max(5.0, 0.05 * playback.duration_s))
            self._tick()

    def action_seek_back(self) -> None:
        self._seek(-1)

    def action_seek_forward(self) -> None:
        self._seek(+1)

    def action_seek_home(self) -> None:
        if (playback := self.source.playback) is not None:
            playback.seek_to(0.0)
            self._tick()

    def action_seek_end(self) -> None:
        if (playback := self.source.playback) is not None:
            playback.seek_to(playback.duration_s)
            self._tick()

    def action_page(self, index: int) -> None:
        self._show_page(int(index))

    def action_hide_explain(self) -> None:
        for w in self.query(ExplainPane):
            w.display = not w.display

    def export_summary(self) -> list[str]:
        """The run's summary as markdown, CSV and JSON (mlatui.views.export), one summary."""
        from mlatui.views import export
        from mlatui.views.summary import summarize

        self.out_dir.mkdir(parents=True, exist_ok=True)
        summary = summarize(self.dash)
        printers = {"md": export.summary_markdown, "csv": export.summary_csv}
        printers["json"] = export.summary_json
        paths = []
        for ext, printer in printers.items():
            path = self.out_dir / output_name("summary", ext)
            path.write_text(printer(summary), encoding="utf-8")
            paths.append(str(path))
        return paths

    def action_export(self) -> None:
        try:
            paths = self.export_summary()
        except OSError as e:
            self.notify(unwritable("export", self.out_dir, e), severity="error")
            return
        names = ", ".join(Path(p).name for p in paths)
        self.notify(f"{names}\nin {self.out_dir.resolve()}", title="summary exported")

    def action_screenshot(self, filename: str | None = None, path: str | None = None) -> None:
        save_screenshot(self, Path(path) if path else self.out_dir, filename)

    def action_next_theme(self) -> None:
        themes = [t for t in THEMES if t in self.available_themes]
        i = themes.index(self.theme) if self.theme in themes else -1
        self.theme = themes[(i + 1) % len(themes)]
        self.notify(f"theme: {self.theme}", timeout=2)

    def action_figure_view(self) -> None:
        """`m`: the key figure's other view (the marginal cost of a 2nd query, or MBU)."""
        for pane in self.query(MarginalPane):
            pane.show_view(pane.view.other)

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(self.keys_here(), symbols(self.current_theme.dark)))

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        # Textual's own theme, keys, screenshot and maximize commands do what ours below do
        # (ours name their key): list each action once
        yield from (c for c in super().get_system_commands(screen) if c.title not in TEXTUAL_TWINS)
        yield from palette_commands(KEYS, self.run_action, lambda k: self.works(k.only))
