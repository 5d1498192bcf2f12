"""The dashboard's keys: what each binding does, and the same actions in the command palette."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from textual.app import SystemCommand
from textual.screen import Screen

from mlatui.views.keys import KEYS, Key, Only

from .help import HelpScreen, output_name, save_screenshot, unwritable
from .host import DashboardHost
from .keymap import bindings, palette_commands
from .messages import Exported
from .panes import ExplainPane, HeaderPane
from .symbols import symbols

TEXTUAL_TWINS = {"Theme", "Keys", "Screenshot", "Maximize", "Minimize"}
THEMES = ("textual-dark", "nord", "gruvbox", "tokyo-night", "textual-light")
KEY_BINDINGS = bindings(KEYS)
WHERE = {k.action.split("(")[0]: k.only for k in KEYS}  # where each action works


class ControlsMixin(DashboardHost):
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return self.works(WHERE.get(action, Only.ALWAYS))

    def works(self, only: Only) -> bool:
        replay = self.source.playback is not None
        return {
            Only.ALWAYS: True,
            Only.REPLAY: replay,
            Only.LIVE: not replay,
            Only.COMPACT: self.compact,
            Only.DEMO: self.mode == "demo",
        }[only]

    def keys_here(self) -> list[Key]:
        """The listed keys that work in this app now (the help's rows)."""
        return [k for k in KEYS if k.listed and self.works(k.only)]

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
            self.post_message(Exported(self.export_summary()))
        except OSError as e:
            self.notify(unwritable("export", self.out_dir, e), severity="error")

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

    def action_figure_view(self) -> None:
        """`m`: the key figure's other view (the marginal cost of a 2nd query, or MBU)."""
        from .panes import MarginalPane

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
