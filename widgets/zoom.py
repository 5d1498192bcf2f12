"""`z`: zoom the focused pane to the whole screen (Textual's maximize; the footer stays)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from textual.widget import Widget

from .panes import Pane, ScrollPane

if TYPE_CHECKING:
    from textual.app import App

    _AppBase = App[Any]
else:
    _AppBase = object


class ZoomMixin(_AppBase):
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
