"""The dashboard's screen as a person reads it: each pane's rows off the composed screen, on
every page and view the keys reach (pages 1-3 on a compact screen, the key figure's `m` view,
an arm pane zoomed with `z` where it ends in '… N more line(s)'), scroll panes scrolled through
(the log as it follows its end); and the rows cut without an ellipsis."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

from mlatui.widgets.panes import ArmPane, MarginalPane, Pane, ScrollPane


def screen_rows(app) -> list[str]:
    return ["".join(seg.text for seg in strip) for strip in app.screen._compositor.render_strips()]


def _shown(pane) -> bool:
    return bool(pane.region.area) and pane.display and pane.parent.display


def _rows_of(app, region) -> list[str]:
    rows = screen_rows(app)
    return [rows[y][region.x : region.right].rstrip() for y in range(region.y, region.bottom)]


async def _scrolled_rows(pilot, pane: ScrollPane) -> list[str]:
    """Every row the pane shows as it is scrolled from its top to its end, a view at a time."""
    view = pane.scrollable_content_region
    pane.scroll_to(y=0, animate=False)
    await pilot.pause()
    lines = _rows_of(pilot.app, pane.scrollable_content_region)
    while pane.scroll_y < pane.max_scroll_y:
        pane.scroll_to(y=min(pane.max_scroll_y, pane.scroll_y + view.height), animate=False)
        await pilot.pause()
        lines += _rows_of(pilot.app, pane.scrollable_content_region)
    return lines


@dataclass
class Screen:
    """One view: each shown pane's rows by pane id (a scroll pane's from top to end)."""

    name: str
    rows: dict[str, list[str]]
    panes: dict[str, Pane | ScrollPane]


async def read_screen(pilot, name: str) -> Screen:
    app = pilot.app
    rows, panes = {}, {}
    for pane in [*app.query(Pane).results(), *app.query(ScrollPane).results()]:
        if pane.id is None or not _shown(pane):
            continue
        if isinstance(pane, ScrollPane) and not pane.follow:  # the log: its end, as it follows
            rows[pane.id] = await _scrolled_rows(pilot, pane)
        elif isinstance(pane, ScrollPane):
            rows[pane.id] = _rows_of(app, pane.scrollable_content_region)
        else:
            rows[pane.id] = _rows_of(app, pane.content_region)
        panes[pane.id] = pane
    return Screen(name, rows, panes)


async def every_view(pilot) -> AsyncIterator[Screen]:
    """Each page (one on a wide screen), then on a page with the key figure its other view
    (`m`), and each arm pane too short for its lines zoomed (`z`)."""
    app = pilot.app
    for page in range(3) if app.compact else (None,):
        if page is not None:
            await pilot.press(str(page + 1))
            await pilot.pause()
        name = f"page {page + 1}" if page is not None else "screen"
        yield await read_screen(pilot, name)
        figure = app.query_one(MarginalPane)
        if _shown(figure):
            await pilot.press("m")
            await pilot.pause()
            yield await read_screen(pilot, f"{name}, key figure {figure.view.value}")
            await pilot.press("m")
            await pilot.pause()
        for arm in app.query(ArmPane).results():
            if _shown(arm) and "more line(s): z zooms" in arm.render().plain:
                arm.focus()
                await pilot.press("z")
                await pilot.pause()
                yield await read_screen(pilot, f"{name}, {arm.id} zoomed")
                await pilot.press("z")
                await pilot.pause()
                app.set_focus(None)


def cut_lines(app) -> list[str]:
    """`pane: shown | meant` for each row whose text runs past its pane without an ellipsis."""
    rows = screen_rows(app)
    cut = []
    for pane in app.query(Pane).results():
        if isinstance(pane, ScrollPane) or pane.id == "log" or not pane.region.area:
            continue
        region = pane.content_region
        for k, meant in enumerate(pane.render().plain.split("\n")[: region.height]):
            meant = meant.rstrip()
            shown = rows[region.y + k][region.x : region.right].rstrip()
            if len(meant) > region.width and not shown.endswith("…"):
                cut.append(f"{pane.id}: {shown!r} | {meant!r}")
    for pane in app.query(ScrollPane).results():
        if pane.id == "log" or not pane.region.area:  # the log wraps
            continue
        body = pane.query_one(".body")
        view = pane.scrollable_content_region
        meant_lines = body.render().plain.split("\n")
        for k, meant in enumerate(meant_lines):
            y = body.region.y + k
            if not view.y <= y < view.bottom:
                continue
            meant = meant.rstrip()
            shown = rows[y][view.x : view.right].rstrip()
            if len(meant) > view.width and not shown.endswith("…"):
                cut.append(f"{pane.id}: {shown!r} | {meant!r}")
    return cut
