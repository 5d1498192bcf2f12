"""The `?` screen, two pages: Keys (grouped as k9s groups them: navigation, run, views,
files; generated from the one key table, mlatui.views.keys, and only the keys that work here)
and Symbols (every glyph and colour on screen, drawn in its own style). Focused on open, so
↑/↓/PgUp/PgDn scroll at once; tab or ←/→ switch pages. And the one key action both apps share
beside it, `s` (screenshot), and the Textual bindings and command-palette entries both apps
generate from their key table (mlatui.views.keys): the keys, the palette and the help never list
different things."""

from __future__ import annotations

import re
import textwrap
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from rich.text import Text
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from mlatui.views.keys import Key, KeyGroup

TEXT_WIDTH = 74  # readable inside the box at 80 columns
# keys sharing one compact footer hint (`+ -`, `← →`)
FOOTER_GROUPS = {name: Binding.Group(name, compact=True) for name in ("speed", "seek")}


@dataclass(frozen=True)
class Symbol:
    glyph: str  # as it appears on screen
    style: str  # as it is drawn
    meaning: str


SymbolSection = tuple[str, tuple[Symbol, ...]]


def keys_text(keys: list[Key]) -> Text:
    """The keys under their group's heading, in the table's order."""
    t = Text()
    width = max((len(k.key) for k in keys), default=4)
    for group in KeyGroup:
        rows = [k for k in keys if k.group is group]
        if not rows:
            continue
        t.append(f"{group.value.upper()}\n", style="bold")
        for k in rows:
            t.append(f"  {k.key:>{width}}  ", style="bold cyan")
            indent = " " * (width + 4)
            lines = textwrap.wrap(k.description, TEXT_WIDTH - len(indent))
            t.append(("\n" + indent).join(lines) + "\n")
        t.append("\n")
    t.append("ctrl+p finds every action by name; esc closes this", style="dim")
    return t


def symbols_text(sections: tuple[SymbolSection, ...]) -> Text:
    """Each section's glyphs in their own style, each meaning wrapped under itself."""
    t = Text()
    width = max(len(s.glyph) for _, rows in sections for s in rows if len(s.glyph) <= 14)
    for title, rows in sections:
        t.append(f"{title.upper()}\n", style="bold")
        for s in rows:
            t.append("  ")
            t.append(s.glyph, style=s.style)
            if len(s.glyph) > width:  # a long sample on its own line, its meaning under it
                t.append("\n" + " " * (width + 4))
            else:
                t.append(" " * (width + 2 - len(s.glyph)))
            lines = textwrap.wrap(s.meaning, TEXT_WIDTH - width - 4, break_on_hyphens=False)
            t.append(("\n" + " " * (width + 4)).join(lines) + "\n")
        t.append("\n")
    return t


PAGE_NAMES = ("Keys", "Symbols")


class HelpScreen(ModalScreen):
    BINDINGS = [
        Binding("escape,question_mark,q", "dismiss", "close help", id="help-close"),
        Binding("tab,shift+tab,left,right", "other_page", "keys / symbols", priority=True),
    ]
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > #help-tabs { width: 80; max-width: 100%; height: 1; padding: 0 1; }
    HelpScreen > VerticalScroll { width: 80; max-width: 100%; height: auto; max-height: 90%;
        border: round $accent; background: $panel; padding: 0 1; }
    HelpScreen #help-text { width: 100%; height: auto; }
    """

    def __init__(self, keys: list[Key], symbols: tuple[SymbolSection, ...]):
        super().__init__()
        self.keys = keys
        self.pages = (keys_text(keys), symbols_text(symbols))
        self.page = 0

    def compose(self) -> ComposeResult:
        yield Static(id="help-tabs")
        with VerticalScroll(id="help-box"):
            yield Static(id="help-text")

    def on_mount(self) -> None:
        self._show(0)
        self.query_one("#help-box").focus()  # ↑/↓ scroll without a tab first

    def _show(self, page: int) -> None:
        self.page = page % len(self.pages)
        tabs = Text()
        for i, name in enumerate(PAGE_NAMES):
            tabs.append(f" {name} ", style="bold reverse" if i == self.page else "dim")
        tabs.append("  tab: keys/symbols · ↑↓ PgUp PgDn scroll · esc closes", style="dim")
        self.query_one("#help-tabs", Static).update(tabs)
        self.query_one("#help-text", Static).update(self.pages[self.page])
        self.query_one("#help-box", VerticalScroll).scroll_home(animate=False)

    def action_other_page(self) -> None:
        self._show(self.page + 1)

    @property
    def text(self) -> str:
        """What the page on show says, as plain text."""
        return self.pages[self.page].plain


def output_name(kind: str, ext: str) -> str:
    """One naming style for everything a key writes: mlatui-<kind>-<date>-<time>.<ext>."""
    return f"mlatui-{kind}-{datetime.now().strftime('%Y%m%d-%H%M%S')}.{ext}"


# Rich's SVG asks the network for Fira Code: offline another font with other widths fills in
# and the columns drift. Local monospace fonts only, in the order most systems have them.
LOCAL_MONO = '"Fira Code", "DejaVu Sans Mono", Menlo, Consolas, "Liberation Mono", monospace'
_WEB_FONT = re.compile(r',\s*url\("https?://[^"]*"\)\s*format\("woff2?"\)')


def offline_svg(svg: str) -> str:
    """The screenshot with its web-font sources removed and local monospace fallbacks named."""
    svg = _WEB_FONT.sub("", svg)
    return svg.replace("font-family: Fira Code, monospace;", f"font-family: {LOCAL_MONO};")


def unwritable(what: str, folder: Path, error: OSError) -> str:
    """One line naming the folder that could not be written, and why."""
    return f"{what} failed: cannot write to {folder.resolve()} ({error.strerror or error})"


def save_screenshot(app: App, out_dir: Path, filename: str | None = None) -> None:
    """The `s` key: the screen as SVG in `out_dir`, named as the exports are; an unwritable
    folder is a notification and the run goes on."""
    name = filename or output_name("screenshot", "svg")
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        path = out_dir / name
        path.write_text(offline_svg(app.export_screenshot()), encoding="utf-8")
    except OSError as e:
        app.notify(unwritable("screenshot", out_dir, e), severity="error")
        return
    width = min(TOAST_WIDTH, app.size.width * TOAST_SHARE // 100) - TOAST_GUTTER
    where = fold_path(f"in {out_dir.resolve()}", width)
    app.notify(f"{name}\n{where}", title="screenshot saved (SVG)")


TOAST_WIDTH, TOAST_SHARE, TOAST_GUTTER = 64, 90, 3  # app.tcss Toast: columns, % of screen, pad


def fold_path(path: str, width: int) -> str:
    """The path on lines of at most `width` columns, broken after a `/`, never inside a name
    (a name longer than a line keeps a line of its own)."""
    lines, line = [], ""
    for piece in path.replace("/", "/\0").split("\0"):
        if line and len(line) + len(piece) > width:
            lines.append(line)
            line = ""
        line += piece
    return "\n".join([*lines, line])


def bindings(keys: Iterable[Key]) -> list[BindingType]:
    return [
        Binding(
            k.keys,
            k.action,
            k.label or k.title or k.description,
            show=bool(k.label),
            key_display=k.key if k.bind else None,
            priority=k.priority,
            id=k.id,
            group=FOOTER_GROUPS.get(k.footer_group),
        )
        for k in keys
        if not k.builtin
    ]


def palette_commands(
    keys: Iterable[Key], run: Callable[[str], object], works: Callable[[Key], bool]
) -> list[SystemCommand]:
    """One palette entry per titled key that works here, naming its key."""
    return [
        SystemCommand(k.title, f"{k.description} · key {k.key}", lambda a=k.action: run(a))
        for k in keys
        if k.title and works(k)
    ]
