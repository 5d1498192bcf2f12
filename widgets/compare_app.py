"""`mlatui compare`: two recorded runs on one screen (the Comparison is built before it opens)."""

from __future__ import annotations

import os
from pathlib import Path

from rich.segment import Segment
from rich.text import Text
from textual.app import App, ComposeResult
from textual.containers import Horizontal
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.widget import Widget
from textual.widgets import Footer

from mlatui.views.compare import Comparison
from mlatui.views.keys import Key, KeyGroup

from . import compare_render as cr
from .compare_render import TableLine
from .help import HelpScreen, Symbol, bindings, output_name, save_screenshot, unwritable

NARROW_WIDTH = 170  # below: the table goes under the figure
COMPARE_KEYS = [
    Key("e", "export the comparison (markdown) to --out-dir", "export", KeyGroup.FILES, "export",
        label="export"),
    Key("s", "save a screenshot (SVG) to --out-dir", "screenshot", KeyGroup.FILES, "screenshot",
        label="screenshot"),
    Key("?", "help: every key, and what the symbols mean", "help", KeyGroup.VIEWS, "help",
        "question_mark", "help"),
    Key("q", "quit", "quit", KeyGroup.RUN, "quit", label="quit"),
]  # fmt: skip
COMPARE_SYMBOLS = (("compare", tuple(Symbol(g, "", m) for g, m in cr.SYMBOLS)),)


class FrozenTable(ScrollView, can_focus=True):
    """A table that scrolls both ways with its first columns fixed: its rows keep their keys
    (ctx, width, arm) in view while the figures scroll sideways; titles and notes stay put."""

    def __init__(self, lines: list[TableLine], frozen_cells: int, *, id: str | None = None):
        super().__init__(id=id)
        self.lines = lines
        self.frozen_cells = frozen_cells
        self._strips: list[Strip] | None = None

    def on_mount(self) -> None:
        widest = max((line.text.cell_len for line in self.lines), default=0)
        self.virtual_size = Size(widest, len(self.lines))

    @property
    def plain(self) -> str:
        return "\n".join(line.text.plain for line in self.lines)

    def _all_strips(self) -> list[Strip]:
        if self._strips is None:
            console = self.app.console
            self._strips = [
                Strip(list(line.text.render(console)), line.text.cell_len) for line in self.lines
            ]
        return self._strips

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        width = self.scrollable_content_region.width
        index = y + scroll_y
        strips = self._all_strips()
        if index >= len(strips):
            return Strip.blank(width, self.rich_style)
        strip, line = strips[index], self.lines[index]
        if not line.row:  # titles and notes: from their start, whatever the scroll
            shown = strip.crop(0, width)
        else:
            frozen = min(self.frozen_cells, width)
            keys = strip.crop(0, frozen)
            rest = strip.crop(frozen + scroll_x, scroll_x + width)
            shown = Strip.join([keys, rest])
        if strip.cell_length > (width if not line.row else width + scroll_x):
            shown = shown.crop(0, width - 1)
            segments = list(shown)
            more = Segment("…", segments[-1].style if segments else None)
            shown = Strip.join([shown, Strip([more], 1)])
        return shown.extend_cell_length(width, self.rich_style)


class CompareView(Widget):
    """A pane drawn from the app's Comparison by one of widgets.compare_render's functions."""

    def __init__(self, draw, *, title: str = "", id: str | None = None):
        super().__init__(id=id)
        self.draw = draw
        if title:
            self.border_title = title

    def render(self) -> Text:
        return self.draw(self.app.cmp, self.content_size.width, self.content_size.height)  # type: ignore[attr-defined]


class CompareApp(App):
    CSS_PATH = "compare.tcss"
    TITLE = "mlatui compare"
    BINDINGS = bindings(COMPARE_KEYS)

    def __init__(self, cmp: Comparison, *, out_dir: str | os.PathLike | None = None):
        super().__init__()
        self.cmp = cmp
        self.out_dir = Path(out_dir) if out_dir else Path.cwd()

    def compose(self) -> ComposeResult:
        yield CompareView(lambda c, w, h: cr.header_text(c, w), id="cmp-header")
        yield CompareView(
            lambda c, w, h: cr.verdicts_text(c, w, self.current_theme.dark), id="cmp-verdicts"
        )
        with Horizontal(id="cmp-body"):
            yield CompareView(
                lambda c, w, h: cr.plot_text(c, w, h, self.current_theme.dark),
                id="cmp-plot",
                title="marginal cost of a 2nd query: L=2 − L=1 (ms, log) · A ●▲  B ■◆",
            )
            table = FrozenTable(
                cr.table_lines(self.cmp, self.current_theme.dark),
                cr.FROZEN_CELLS,
                id="cmp-table-box",
            )  # both ways: wide rows, the ctx and arm columns fixed
            table.border_title = "shared contexts: A, B and B/A (tab, then ←/→ ↑/↓ scroll)"
            yield table
        yield Footer()

    def on_mount(self) -> None:
        self.screen.set_class(self.size.width < NARROW_WIDTH, "narrow")

    def on_resize(self, event) -> None:
        self.screen.set_class(event.size.width < NARROW_WIDTH, "narrow")

    def export_markdown(self) -> Path:
        from mlatui.views.compare import compare_markdown

        self.out_dir.mkdir(parents=True, exist_ok=True)
        path = self.out_dir / output_name("compare", "md")
        path.write_text(compare_markdown(self.cmp), encoding="utf-8")
        return path

    def action_export(self) -> None:
        try:
            self.notify(str(self.export_markdown()), title="comparison exported (markdown)")
        except OSError as e:
            self.notify(unwritable("export", self.out_dir, e), severity="error")

    def action_screenshot(self, filename: str | None = None, path: str | None = None) -> None:
        save_screenshot(self, Path(path) if path else self.out_dir, filename)

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(COMPARE_KEYS, COMPARE_SYMBOLS))
