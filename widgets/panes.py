"""Dashboard panes: thin widgets whose render() hands off to a pure function in widgets.render,
widgets.arm or widgets.figure. The events log and the L=1 table scroll."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from rich.text import Text
from textual.color import Color
from textual.containers import VerticalScroll
from textual.widget import Widget
from textual.widgets import Static

if TYPE_CHECKING:
    _WidgetBase = Widget
else:
    _WidgetBase = object

from mlatui.stream.events import ARMS
from mlatui.views.dashboard_state import DashboardState
from mlatui.views.key_figure import FigureView

from . import render as r
from .arm import arm_text, arm_title
from .figure import VIEW_TITLES
from .palette import series_look
from .validity_pane import validity_text


class _Section(_WidgetBase):
    """What every pane is: a titled view of one section of the app's shared DashboardState."""

    section = ""

    def __init__(self, *, title: str = "", id: str | None = None, classes: str | None = None):
        super().__init__(id=id, classes=classes)
        if title:
            self.border_title = title

    @property
    def state(self) -> DashboardState:
        return self.app.dash  # type: ignore[attr-defined]


class Pane(_Section, Widget):
    """A pane that draws from the app's shared DashboardState; the app calls redraw() on it
    only when its section changed. Focusable, so `z` can zoom it."""

    can_focus = True

    def content(self) -> Text:
        return Text()

    def render(self) -> Text:
        return self.content()

    def redraw(self) -> None:
        self.refresh()


class ScrollPane(_Section, VerticalScroll):
    """A pane whose text can be longer than the pane: it scrolls (keys or wheel when focused);
    with `follow`, new lines keep the end in view unless the user scrolled up."""

    follow = False
    ALLOW_MAXIMIZE = True

    def compose(self):
        yield Static(classes="body")

    def on_mount(self) -> None:
        self._pinned = True  # at the end: new lines keep it there
        self.redraw()

    def on_resize(self) -> None:
        self._update()

    def on_show(self) -> None:
        self._update()

    def content(self) -> Text:
        return Text()

    def redraw(self) -> None:
        if self.size.height > 0:  # a hidden page keeps what the user last chose
            self._pinned = self.scroll_y >= self.max_scroll_y
        self._update()

    def _update(self) -> None:
        bodies = self.query(".body")
        if not bodies:  # a tick between mounting and composing: on_mount redraws
            return
        bodies.first(Static).update(self.content())
        if self.follow and self._pinned:
            self.call_after_refresh(self.scroll_end, animate=False, immediate=True)


@dataclass(frozen=True)
class HeaderPass:
    """The header's lines for one content width, from one reading of the state: the layout's
    height and the lines drawn are both this text's."""

    width: int
    text: Text

    @property
    def lines(self) -> int:
        return self.text.plain.count("\n") + 1


class HeaderPane(Pane):
    """Its height follows its lines (the verdict strip takes one to three): the layout asks
    for the lines at the width it lays out, render draws the same pass, and a redraw that
    changes the line count lays the screen out again (a repaint alone would keep the old
    height and hide the last lines)."""

    section = "header"
    can_focus = False

    def __init__(self, **kw):
        super().__init__(**kw)
        self._pass: HeaderPass | None = None  # the last lines computed
        self._laid_out_lines = 0  # the lines the layout made room for

    def _lines_at(self, width: int) -> HeaderPass:
        view = self.app.view_info()  # type: ignore[attr-defined]
        dark = self.app.current_theme.dark
        self._pass = HeaderPass(width, r.header_text(self.state, view, width, dark))
        return self._pass

    def content(self) -> Text:
        return self._lines_at(self.content_size.width).text

    def get_content_height(self, container, viewport, width: int) -> int:
        self._laid_out_lines = self._lines_at(width).lines
        return self._laid_out_lines

    def render(self) -> Text:
        drawn = self._pass
        if drawn is None or drawn.width != self.content_size.width:
            drawn = self._lines_at(self.content_size.width)
        return drawn.text

    def redraw(self) -> None:
        lines = self._lines_at(self.content_size.width).lines
        self.refresh(layout=lines != self._laid_out_lines)

    def shows_every_line(self) -> bool:
        """The layout made room for exactly the lines drawn last, at the width they were drawn."""
        drawn = self._pass
        return (
            drawn is not None
            and drawn.width == self.content_size.width
            and drawn.lines == self._laid_out_lines
            and self.content_size.height >= drawn.lines
        )


class ArmPane(Pane):
    section = "arms"

    def __init__(self, arm: str, **kw):
        super().__init__(**kw)
        self.arm = arm

    def on_mount(self) -> None:
        self.watch(self.app, "theme", self._colour_border, init=True)

    def _colour_border(self) -> None:
        """The border in this arm's series colour (widgets.palette, by theme), as its bars and
        its markers in the key figure: colour-blind-safe, never red against green."""
        dark = self.app.current_theme.dark
        look = series_look(ARMS.index(self.arm) if self.arm in ARMS else 0, dark)
        self.styles.border = ("round", Color(*look.colour, 0.6))

    def content(self) -> Text:
        size, dark = self.content_size, self.app.current_theme.dark
        return arm_text(self.state, self.arm, size.width, size.height, dark)

    def redraw(self) -> None:
        self.border_title = arm_title(self.state, self.arm)
        super().redraw()


class MarginalPane(Pane):
    """The key figure, in the view `m` picks (the marginal cost of a 2nd query, or MBU)."""

    section = "marginal"
    view = FigureView.MARGINAL

    def show_view(self, view: FigureView) -> None:
        self.view = view
        self.border_title = VIEW_TITLES[view]
        self.refresh()

    def content(self) -> Text:
        size, dark = self.content_size, self.app.current_theme.dark
        return r.marginal_plot(self.state, size.width, size.height, dark, self.view)


class ValidityPane(ScrollPane):
    section = "validity"

    def content(self) -> Text:
        width, dark = self.scrollable_content_region.width, self.app.current_theme.dark
        return validity_text(self.state, width, dark)


class MemoryPane(ScrollPane):
    section = "memory"

    def content(self) -> Text:
        width, dark = self.scrollable_content_region.width, self.app.current_theme.dark
        return r.memory_text(self.state, width, dark)


class LogPane(ScrollPane):
    section = "log"
    follow = True

    def content(self) -> Text:
        return r.log_text(self.state, self.app.current_theme.dark)


class ExplainPane(Pane):
    can_focus = False

    def content(self) -> Text:
        lines = r.DEMO_LINES if self.app.size.height >= 30 else 2
        return Text(r.demo_text(self.content_size.width, self.app.compact, lines))  # type: ignore[attr-defined]
