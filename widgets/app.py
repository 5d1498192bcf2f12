"""The mlatui dashboard: one screen fed by any event source, drained on a fixed tick."""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path

from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding
from textual.containers import Horizontal
from textual.screen import Screen
from textual.widgets import Tab, Tabs

from mlatui.stream.events import ErrorEvent, Event, LogMessage
from mlatui.stream.sources import ReplaySource, Source
from mlatui.views.dashboard_state import DashboardState
from mlatui.views.report import SUMMARY_EVENT_TYPES
from widgets.help import HelpScreen, binding_rows, save_screenshot
from widgets.keybar import KeyFooter
from widgets.messages import Exported, RunFailed, RunFinished
from widgets.panes import (
    ArmPane,
    ExplainPane,
    HeaderPane,
    LogPane,
    MarginalPane,
    MemoryPane,
    ValidityPane,
)
from widgets.render import ViewInfo
from widgets.zoom import ZoomMixin

PAGES = (("page-arms", "Arms"), ("page-cost", "Cost · validity"), ("page-sys", "Memory · log"))
REPLAY_ONLY = {"step", "faster", "slower", "seek_back", "seek_forward"}
THEMES = ("textual-dark", "nord", "gruvbox", "tokyo-night", "textual-light")
COMPACT_WIDTH, COMPACT_HEIGHT = 100, 34
SPEED = Binding.Group("speed", compact=True)
SEEK = Binding.Group("seek", compact=True)


class MlatuiApp(ZoomMixin, App):
    CSS_PATH = "app.tcss"
    AUTO_FOCUS = None  # no pane is focused until the user picks one (tab, click)
    TITLE = "mlatui"
    BINDINGS = [
        Binding("p", "toggle_pause", "pause", id="pause"),
        Binding("space", "step", "step", id="step"),
        Binding("plus,equals_sign", "faster", "faster", key_display="+", id="faster", group=SPEED),
        Binding("minus", "slower", "slower", key_display="-", id="slower", group=SPEED),
        Binding(
            "left",
            "seek_back",
            "seek −",
            key_display="←",
            priority=True,
            id="seek-back",
            group=SEEK,
        ),
        Binding(
            "right",
            "seek_forward",
            "seek +",
            key_display="→",
            priority=True,
            id="seek-forward",
            group=SEEK,
        ),
        Binding("e", "export", "export", id="export"),
        Binding("s", "screenshot", "shot", id="screenshot"),
        Binding("t", "next_theme", "theme", id="theme"),
        Binding("z", "zoom", "zoom", id="zoom"),
        Binding("1", "page(0)", "arms", show=False, id="page-arms"),
        Binding("2", "page(1)", "cost", show=False, id="page-cost"),
        Binding("3", "page(2)", "memory/log", show=False, id="page-sys"),
        Binding("x", "hide_explain", "hide explanation", show=False, id="hide-explain"),
        Binding("question_mark", "help", "help", key_display="?", id="help"),
        Binding("q", "quit", "quit", id="quit"),
        Binding("ctrl+c", "quit", "quit", show=False, priority=True, id="quit-ctrl-c"),
    ]

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

    def compose(self) -> ComposeResult:
        yield HeaderPane(id="header")
        if self.mode == "demo":
            yield ExplainPane(id="explain", title="what you are looking at")
        tabs = Tabs(*(Tab(label, id=f"tab-{pid}") for pid, label in PAGES), id="pages")
        tabs.can_focus = False  # 1/2/3 or a click switch pages; ←/→ stay replay seeks
        yield tabs
        with Horizontal(id="page-arms", classes="page"):
            yield ArmPane("stock", id="arm-stock", title="stock · mlx-lm as installed")
            yield ArmPane("patched", id="arm-patched", title="patched · gate L ≤ L*")
        with Horizontal(id="page-cost", classes="page"):
            yield MarginalPane(
                id="marginal", title="marginal cost of a 2nd query (L=2 − L=1) vs context"
            )
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

    # -- the tick: drain, fold, refresh what changed ----------------------------------------

    def view_info(self) -> ViewInfo:
        src = self.source
        if isinstance(src, ReplaySource):
            return ViewInfo(
                self.mode,
                src.speed,
                src.paused,
                src.position_s,
                src.duration_s,
                None,
                src.finished,
                src.position_s,
            )
        clock = self._clock_offset
        return ViewInfo(
            self.mode,
            1.0,
            self.paused,
            None,
            None,
            str(getattr(src, "record_path", "") or ""),
            src.finished,
            None if clock is None else time.monotonic() - clock,
        )

    def _tick(self) -> None:
        self.ticks += 1
        epoch = getattr(self.source, "epoch", 0)
        if epoch != self._epoch:  # a replay seeked backwards: rebuild from the header
            self._epoch = epoch
            self.dash = DashboardState()
            self.events = []
        events = self.source.drain()
        if self.paused:
            self._held.extend(events)
        else:
            if self._held:
                events, self._held = self._held + events, []
            self._apply(events)
        changed = self.dash.take_changed()
        if isinstance(self.source, ReplaySource) or self.mode in ("live", "isolated", "follow"):
            changed.add("header")
        if changed:
            for pane in self.panes():
                if pane.section in changed or (pane.section == "header" and "phase" in changed):
                    pane.redraw()
        if not self._done and self.source.finished and not self._held:
            self._done = True
            self.post_message(RunFinished(self.dash.status))

    def _apply(self, events: list[Event]) -> None:
        if not events:
            return
        if isinstance(self.source, ReplaySource):  # a recording of any size: keep what the
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
            self.notify(f"run {message.status}; recording kept at {where}", title="done")

    def on_run_failed(self, message: RunFailed) -> None:
        self.notify(
            message.message, title="engine error: arms stopped", severity="error", timeout=30
        )

    def on_exported(self, message: Exported) -> None:
        self.notify("\n".join(message.paths), title="summary exported")

    # -- actions ----------------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in REPLAY_ONLY and not isinstance(self.source, ReplaySource):
            return False
        if action == "page":
            return self.compact
        if action == "hide_explain":
            return self.mode == "demo"
        return True

    def action_toggle_pause(self) -> None:
        if isinstance(self.source, ReplaySource):
            self.source.toggle_pause()
        else:
            self.paused = not self.paused
            if not self.paused:
                self._tick()
        self.query_one(HeaderPane).refresh()

    def action_step(self) -> None:
        if isinstance(self.source, ReplaySource):
            self.source.step()
            self._tick()

    def _set_speed(self, factor: float) -> None:
        if isinstance(self.source, ReplaySource):
            self.source.set_speed(self.source.speed * factor)
            self.query_one(HeaderPane).refresh()

    def action_faster(self) -> None:
        self._set_speed(2.0)

    def action_slower(self) -> None:
        self._set_speed(0.5)

    def _seek(self, sign: int) -> None:
        if isinstance(self.source, ReplaySource):
            self.source.seek(sign * max(5.0, 0.05 * self.source.duration_s))
            self._tick()

    def action_seek_back(self) -> None:
        self._seek(-1)

    def action_seek_forward(self) -> None:
        self._seek(+1)

    def action_page(self, index: int) -> None:
        self._show_page(int(index))

    def action_hide_explain(self) -> None:
        for w in self.query(ExplainPane):
            w.display = not w.display

    def summary(self) -> tuple[str, str]:
        """(markdown, csv) of what the dashboard knows now (mlatui.views.export)."""
        from mlatui.views import export

        return export.summary_markdown(self.dash), export.summary_csv(self.dash)

    def export_summary(self) -> list[str]:
        self.out_dir.mkdir(parents=True, exist_ok=True)
        stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
        md, csv_text = self.summary()
        paths = []
        for ext, text in (("md", md), ("csv", csv_text)):
            path = self.out_dir / f"mlatui-summary-{stamp}.{ext}"
            path.write_text(text, encoding="utf-8")
            paths.append(str(path))
        return paths

    def action_export(self) -> None:
        try:
            self.post_message(Exported(self.export_summary()))
        except OSError as e:
            self.notify(f"export failed: {e}", severity="error")

    def action_screenshot(self, filename: str | None = None, path: str | None = None) -> None:
        save_screenshot(self, Path(path) if path else self.out_dir, filename)

    def action_next_theme(self) -> None:
        themes = [t for t in THEMES if t in self.available_themes]
        i = themes.index(self.theme) if self.theme in themes else -1
        self.theme = themes[(i + 1) % len(themes)]
        self.notify(f"theme: {self.theme}", timeout=2)

    def binding_rows(self) -> list[tuple[str, str, str]]:
        return binding_rows(self)

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(self.binding_rows()))

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        replay = isinstance(self.source, ReplaySource)
        yield SystemCommand(
            "Pause / resume",
            "Freeze the display (replay: stop the clock) · key p",
            self.action_toggle_pause,
        )
        if replay:
            yield SystemCommand(
                "Single step", "Pause and show the next timed step · key space", self.action_step
            )
            yield SystemCommand(
                "Faster replay", "Double the replay speed · key +", self.action_faster
            )
            yield SystemCommand(
                "Slower replay", "Halve the replay speed · key -", self.action_slower
            )
            yield SystemCommand(
                "Seek back", "Jump back in the recording · key ←", self.action_seek_back
            )
            yield SystemCommand(
                "Seek forward", "Jump forward in the recording · key →", self.action_seek_forward
            )
        yield SystemCommand(
            "Export summary", "Write the summary as markdown and CSV · key e", self.action_export
        )
        yield SystemCommand(
            "Save screenshot", "Save the screen as SVG · key s", self.action_screenshot
        )
        yield SystemCommand("Next theme", "Cycle the colour theme · key t", self.action_next_theme)
        yield SystemCommand(
            "Zoom pane",
            "Zoom the focused pane to the whole screen, or back · key z",
            self.action_zoom,
        )
        yield SystemCommand("Help: keys", "List every key binding · key ?", self.action_help)
        for i, (_, label) in enumerate(PAGES):
            yield SystemCommand(
                f"Show {label}",
                f"Switch the compact view to {label} · key {i + 1}",
                lambda i=i: self._show_page(i),
            )

    def on_unmount(self) -> None:
        self.source.stop()
