"""What the dashboard's mixins may read of the app that hosts them (for the type checker only)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pathlib import Path

    from textual.app import App

    from mlatui.stream.sources import Source
    from mlatui.views.dashboard_state import DashboardState

    class DashboardHost(App[Any]):
        source: Source
        dash: DashboardState
        out_dir: Path
        mode: str
        ui_hz: float
        paused: bool
        compact: bool
        page: int

        def _tick(self) -> None: ...
        def _show_page(self, index: int) -> None: ...
        def action_zoom(self) -> None: ...

else:
    DashboardHost = object
