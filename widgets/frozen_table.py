"""A table that scrolls both ways with its first columns fixed: its rows keep their keys (ctx,
width, arm) in view while the figures scroll sideways; titles and notes stay where they are."""

from __future__ import annotations

from rich.segment import Segment
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.strip import Strip

from .compare_render import TableLine


class FrozenTable(ScrollView, can_focus=True):
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
