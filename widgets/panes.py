"""Dashboard panes: thin widgets whose render() hands off to a pure function in widgets.render."""

from __future__ import annotations

from rich.text import Text
from textual.widget import Widget

from mlatui.dashboard_state import DashboardState
from widgets import render as r


class Pane(Widget):
    """A pane that draws from the app's shared DashboardState; the app calls refresh() on it
    only when its section changed."""

    section = ""

    def __init__(self, *, title: str = "", id: str | None = None, classes: str | None = None):
        super().__init__(id=id, classes=classes)
        if title:
            self.border_title = title

    @property
    def state(self) -> DashboardState:
        return self.app.dash  # type: ignore[attr-defined]


class HeaderPane(Pane):
    section = "header"

    def render(self) -> Text:
        return r.header_text(self.state, self.app.view_info(), self.content_size.width)  # type: ignore[attr-defined]


class ArmPane(Pane):
    section = "arms"

    def __init__(self, arm: str, **kw):
        super().__init__(**kw)
        self.arm = arm

    def render(self) -> Text:
        return r.arm_text(self.state, self.arm, self.content_size.width, self.content_size.height)


class MarginalPane(Pane):
    section = "marginal"

    def render(self) -> Text:
        return r.marginal_plot(self.state, self.content_size.width, self.content_size.height)


class ValidityPane(Pane):
    section = "validity"

    def render(self) -> Text:
        return r.validity_text(self.state, self.content_size.width)


class MemoryPane(Pane):
    section = "memory"

    def render(self) -> Text:
        return r.memory_text(self.state, self.content_size.width)


class LogPane(Pane):
    section = "log"

    def render(self) -> Text:
        return r.log_text(self.state, self.content_size.height)


class ExplainPane(Pane):
    def render(self) -> Text:
        return Text(r.DEMO_SHORT if self.app.compact else r.DEMO_TEXT)  # type: ignore[attr-defined]
