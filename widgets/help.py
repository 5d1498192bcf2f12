"""The `?` screen: every active binding, generated from the bindings themselves."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static


def bindings_text(rows: list[tuple[str, str, str]]) -> Text:
    """rows: (key display, description, binding id)."""
    t = Text()
    t.append("Keys (also in the command palette, ctrl+p)\n\n", style="bold")
    width = max((len(k) for k, _, _ in rows), default=4)
    for key, desc, bid in rows:
        t.append(f"  {key:>{width}}  ", style="bold cyan")
        t.append(desc)
        if bid:
            t.append(f"  [{bid}]", style="dim")
        t.append("\n")
    t.append("\nBinding ids can be remapped with App.set_keymap. esc closes this.", style="dim")
    return t


class HelpScreen(ModalScreen):
    BINDINGS = [Binding("escape,question_mark,q", "dismiss", "close help", id="help-close")]
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll { width: auto; max-width: 95%; height: auto; max-height: 90%;
        border: round $accent; background: $panel; padding: 0 1; }
    HelpScreen #help-text { width: auto; height: auto; }
    """

    def __init__(self, rows: list[tuple[str, str, str]]):
        super().__init__()
        self.rows = rows

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-box"):
            yield Static(bindings_text(self.rows), id="help-text")
