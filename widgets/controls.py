"""The dashboard's keys: what each binding does, and the same actions in the command palette."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from textual.app import SystemCommand
from textual.binding import Binding
from textual.screen import Screen

from widgets.help import HelpScreen, binding_rows, output_name, save_screenshot
from widgets.host import DashboardHost
from widgets.messages import Exported
from widgets.pages import PAGES
from widgets.panes import ExplainPane, HeaderPane

REPLAY_ONLY = {"step", "faster", "slower", "seek_back", "seek_forward", "seek_home", "seek_end"}
TEXTUAL_TWINS = {"Theme", "Keys", "Screenshot", "Maximize", "Minimize"}
THEMES = ("textual-dark", "nord", "gruvbox", "tokyo-night", "textual-light")
SPEED = Binding.Group("speed", compact=True)
SEEK = Binding.Group("seek", compact=True)

KEY_BINDINGS: list[Binding | tuple[str, str] | tuple[str, str, str]] = [
    Binding("p", "toggle_pause", "pause", id="pause"),
    Binding("space", "step", "step", id="step"),
    Binding("plus,equals_sign", "faster", "faster", key_display="+", id="faster", group=SPEED),
    Binding("minus", "slower", "slower", key_display="-", id="slower", group=SPEED),
    # the same key in a live run (speed is a replay's): more rounds of the undecided checks
    Binding(
        "plus,equals_sign",
        "more_rounds",
        "more rounds",
        key_display="+",
        show=False,  # the strip offers it when there is something to measure
        id="more-rounds",
    ),
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
    Binding("home", "seek_home", "start", show=False, id="seek-home"),
    Binding("end", "seek_end", "end", show=False, id="seek-end"),
    Binding("e", "export", "export", id="export"),
    Binding("s", "screenshot", "shot", id="screenshot"),
    Binding("t", "next_theme", "theme", id="theme"),
    Binding("z", "zoom", "zoom", id="zoom"),
    Binding("1", "page(0)", "cost", show=False, id="page-cost"),
    Binding("2", "page(1)", "arms", show=False, id="page-arms"),
    Binding("3", "page(2)", "memory/log", show=False, id="page-sys"),
    Binding("x", "hide_explain", "hide explanation", show=False, id="hide-explain"),
    Binding("question_mark", "help", "help", key_display="?", id="help"),
    Binding("q", "quit", "quit", id="quit"),
    Binding("ctrl+c", "quit", "quit", show=False, priority=True, id="quit-ctrl-c"),
]


class ControlsMixin(DashboardHost):
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in REPLAY_ONLY and self.source.playback is None:
            return False
        if action == "page":
            return self.compact
        if action == "hide_explain":
            return self.mode == "demo"
        if action == "more_rounds":
            return self.source.playback is None
        return True

    def action_more_rounds(self) -> None:
        """`+` in a live run: once it has ended with undecided L = 1 checks, more rounds of them
        on the arms still loaded; otherwise a short notice of why nothing happens."""
        from mlatui.views.more_offer import more_offer

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

    def summary(self) -> tuple[str, str]:
        """(markdown, csv) of what the dashboard knows now (mlatui.views.export)."""
        from mlatui.views import export
        from mlatui.views.summary import summarize

        summary = summarize(self.dash)
        return export.summary_markdown(summary), export.summary_csv(summary)

    def export_summary(self) -> list[str]:
        self.out_dir.mkdir(parents=True, exist_ok=True)
        md, csv_text = self.summary()
        paths = []
        for ext, text in (("md", md), ("csv", csv_text)):
            path = self.out_dir / output_name("summary", ext)
            path.write_text(text, encoding="utf-8")
            paths.append(str(path))
        return paths

    def action_export(self) -> None:
        try:
            self.post_message(Exported(self.export_summary()))
        except OSError as e:
            self.notify(f"export failed: {e}", severity="error")

    def on_exported(self, message: Exported) -> None:
        names = ", ".join(Path(p).name for p in message.paths)
        self.notify(f"{names}\nin {self.out_dir.resolve()}", title="summary exported")

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
        # Textual's own theme, keys, screenshot and maximize commands do what ours below do
        # (ours name their key): list each action once
        yield from (c for c in super().get_system_commands(screen) if c.title not in TEXTUAL_TWINS)
        replay = self.source.playback is not None
        yield SystemCommand(
            "Pause / resume",
            "Freeze the display (replay: stop the clock) · key p",
            self.action_toggle_pause,
        )
        if replay:
            yield SystemCommand(
                "Single step",
                "Pause and show the next event that changes the screen · key space",
                self.action_step,
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
                "Go to start", "Replay from the recording's start · key Home", self.action_seek_home
            )
            yield SystemCommand(
                "Go to end", "Jump to the recording's end · key End", self.action_seek_end
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
