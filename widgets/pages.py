"""The dashboard's panes on three pages: side by side, or one at a time on a compact screen."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import Tab, Tabs

from mlatui.views.key_figure import FigureView

from .arm import ARM_TITLES
from .figure import VIEW_TITLES
from .host import DashboardHost
from .keybar import KeyFooter
from .panes import (
    ArmPane,
    ExplainPane,
    HeaderPane,
    LogPane,
    MarginalPane,
    MemoryPane,
    ValidityPane,
)

# on a compact screen the first page is the one that answers the question: the key figure and the
# L = 1 checks (the verdict is in the header on every page)
# (the tab labels carry their keys: the page keys' hints on a compact screen)
PAGES = (
    ("page-cost", "1 cost · validity"),
    ("page-arms", "2 arms"),
    ("page-sys", "3 memory · log"),
)
# below 120 columns the key figure beside the L = 1 table would get 40 columns: one page at a time
COMPACT_WIDTH, COMPACT_HEIGHT = 120, 34


class PagesMixin(DashboardHost):
    def compose(self) -> ComposeResult:
        yield HeaderPane(id="header")
        if self.mode == "demo":
            yield ExplainPane(id="explain", title="what you are looking at")
        tabs = Tabs(*(Tab(label, id=f"tab-{pid}") for pid, label in PAGES), id="pages")
        tabs.can_focus = False  # 1/2/3 or a click switch pages; ←/→ stay replay seeks
        yield tabs
        with Horizontal(id="page-arms", classes="page"):
            yield ArmPane("stock", id="arm-stock", title=ARM_TITLES["stock"])
            yield ArmPane("patched", id="arm-patched", title=ARM_TITLES["patched"])
        with Horizontal(id="page-cost", classes="page"):
            yield MarginalPane(id="marginal", title=VIEW_TITLES[FigureView.MARGINAL])
            yield ValidityPane(id="validity", title="L=1 check per context")
        with Horizontal(id="page-sys", classes="page"):
            yield MemoryPane(id="memory", title="memory")
            yield LogPane(id="log", title="events")
        yield KeyFooter(compact=True)

    def on_mount(self) -> None:
        self._layout(self.size.width, self.size.height)
        self.source.start()
        self._tick()
        self.set_interval(1.0 / self.ui_hz, self._tick, name="drain")

    def on_resize(self, event) -> None:
        self._layout(event.size.width, event.size.height)

    def _layout(self, width: int, height: int) -> None:
        compact = width < COMPACT_WIDTH or height < COMPACT_HEIGHT
        self.compact = compact
        self.screen.set_class(compact, "compact")
        self._show_page(self.page)

    def _show_page(self, index: int) -> None:
        self.page = index % len(PAGES)
        for i, (pid, _) in enumerate(PAGES):
            self.query_one(f"#{pid}").set_class(self.compact and i != self.page, "hidden")
        tabs = self.query_one("#pages", Tabs)
        tab_id = f"tab-{PAGES[self.page][0]}"
        if tabs.active != tab_id:
            tabs.active = tab_id

    def on_tabs_tab_activated(self, event: Tabs.TabActivated) -> None:
        if event.tab is None:
            return
        ids = [f"tab-{pid}" for pid, _ in PAGES]
        if event.tab.id in ids:
            self.page = ids.index(event.tab.id)
            for i, (pid, _) in enumerate(PAGES):
                self.query_one(f"#{pid}").set_class(self.compact and i != self.page, "hidden")
