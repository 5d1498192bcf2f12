"""The `?` screen: every active binding (generated from the bindings themselves, so only the
keys that work here: no seek or speed keys in a live run) and a legend of the symbols on screen;
and the one key action both apps share beside it, `s` (screenshot)."""

from __future__ import annotations

import re
import textwrap
from datetime import datetime
from pathlib import Path

from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

LEGEND_WIDTH = 76
LEGEND = (
    "Δ2 marginal cost of a 2nd query (L=2 − L=1, ms) · d1 d2 … draft depth · mtp d2: the "
    "MTP head drafting 2, draft-model d2: the draft model · ~ live estimate "
    "(not yet measured over rounds) · ×1.60 speedup over plain decode · bound ≤×0.05 "
    "rejected by bound: its verify step costs too much for any acceptance to win, so its "
    "blocks were not run (no tok/s) · [a-b] 95% CI · "
    "ā accepted drafts per verify · P(i∣<i) acceptance at position i given the earlier ones · "
    "exact match / rejection sampling: the acceptance rule · text N% distinct 4-grams: how much "
    "the emitted text repeats (looping: acceptance of a repeat, left out of verdicts) · "
    "L=1 check: ✓ valid ✓p valid by the pooled check (inconclusive alone, own CI contains 1; "
    "every context's L=1 quads pooled, valid) ✗ invalid ? inconclusive … pending · "
    "grey: left out of verdicts · "
    "L* absorbed-path threshold · ⏸ paused"
)


def binding_rows(app: App) -> list[tuple[str, str, str]]:
    """(key display, description, id) of every binding active on the app's screen, one row per
    binding (a binding on two keys, `+`/`=`, is one row)."""
    rows, seen = [], set()
    for key, active in app.active_bindings.items():
        b = active.binding
        display = b.key_display or app.get_key_display(b) or key
        ident = b.id or f"{b.action}@{key}"
        if ident in seen:
            continue
        seen.add(ident)
        rows.append((display, b.description or b.action, b.id or ""))
    return rows


def bindings_text(rows: list[tuple[str, str, str]], legend: str = "") -> Text:
    """rows: (key display, description, binding id); `legend`: what the symbols mean."""
    t = Text()
    t.append("Keys (also in the command palette, ctrl+p)\n\n", style="bold")
    width = max((len(k) for k, _, _ in rows), default=4)
    for key, desc, bid in rows:
        t.append(f"  {key:>{width}}  ", style="bold cyan")
        t.append(desc)
        if bid:
            t.append(f"  [{bid}]", style="dim")
        t.append("\n")
    if legend:  # wrapped here: the modal sizes itself to its longest line
        t.append("\nSymbols\n", style="bold")
        t.append("\n".join(textwrap.wrap(legend, LEGEND_WIDTH, break_on_hyphens=False)) + "\n")
    t.append("\nBinding ids can be remapped with App.set_keymap. esc closes this.", style="dim")
    return t


class HelpScreen(ModalScreen):
    BINDINGS = [Binding("escape,question_mark,q", "dismiss", "close help", id="help-close")]
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll { width: auto; max-width: 95%; height: auto; max-height: 90%;
        border: round $accent; background: $panel; padding: 0 1; }
    HelpScreen #help-text { width: auto; max-width: 100; height: auto; }
    """

    def __init__(self, rows: list[tuple[str, str, str]], legend: str = LEGEND):
        super().__init__()
        self.rows = rows
        self.legend = legend

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-box"):
            yield Static(bindings_text(self.rows, self.legend), id="help-text")


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


def save_screenshot(app: App, out_dir: Path, filename: str | None = None) -> None:
    """The `s` key: the screen as SVG in `out_dir`, named as the exports are; an unwritable
    folder is a notification and the run goes on."""
    name = filename or output_name("screenshot", "svg")
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        path = out_dir / name
        path.write_text(offline_svg(app.export_screenshot()), encoding="utf-8")
    except OSError as e:
        app.notify(f"screenshot failed: {e}", severity="error")
        return
    app.notify(f"{name}\nin {out_dir.resolve()}", title="screenshot saved (SVG)")
