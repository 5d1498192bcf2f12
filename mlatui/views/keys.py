"""The dashboard's keys: one table, plain data (no textual import), in the footer's order.
The app's bindings, its footer ranks, the `?` help (grouped as k9s groups it), the command
palette and the `--help` texts are all generated from KEYS."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class KeyGroup(Enum):
    """The help's sections, in the order it shows them."""

    NAVIGATION = "navigation"
    RUN = "run"
    VIEWS = "views"
    FILES = "files"


class Only(Enum):
    """Where a key works (the app disables it elsewhere, and help and palette leave it out)."""

    ALWAYS = "always"
    REPLAY = "replay"
    LIVE = "live"
    COMPACT = "compact"  # one page at a time (< 120x34)
    DEMO = "demo"


@dataclass(frozen=True)
class Key:
    key: str  # as the footer and the help show it
    description: str  # the help's line, the palette's text and `--help`'s
    id: str  # the binding id
    group: KeyGroup
    action: str  # the app action (`page(0)`)
    bind: str = ""  # textual key names, comma-separated; "" : `key` itself
    label: str = ""  # the footer's word; "" : not in the footer
    title: str = ""  # the command palette's entry; "" : not in the palette
    only: Only = Only.ALWAYS
    rank: int = 3  # the footer drops higher ranks first at narrow widths; 0 always stays
    footer_group: str = ""  # keys sharing one compact footer hint (`+ -`, `← →`)
    priority: bool = False  # before a focused pane's own keys (← → in a table)
    listed: bool = True  # False: an alias of the key above it (not a line of its own)
    builtin: bool = False  # textual binds it itself (the palette's ctrl+p): listed, not bound

    @property
    def replay_only(self) -> bool:
        return self.only is Only.REPLAY

    @property
    def live_only(self) -> bool:
        return self.only is Only.LIVE

    @property
    def keys(self) -> str:
        return self.bind or self.key


KEYS = (
    Key(
        "p",
        "pause / resume the display (replay: the clock)",
        "pause",
        KeyGroup.RUN,
        "toggle_pause",
        label="pause",
        title="Pause / resume",
        rank=1,
    ),
    Key(
        "space",
        "single step to the next event that changes the screen",
        "step",
        KeyGroup.NAVIGATION,
        "step",
        label="step",
        title="Single step",
        only=Only.REPLAY,
        rank=2,
    ),
    Key(
        "+",
        "replay faster",
        "faster",
        KeyGroup.RUN,
        "faster",
        "plus,equals_sign",
        "faster",
        "Faster replay",
        Only.REPLAY,
        2,
        "speed",
    ),
    Key(
        "-",
        "replay slower",
        "slower",
        KeyGroup.RUN,
        "slower",
        "minus",
        "slower",
        "Slower replay",
        Only.REPLAY,
        2,
        "speed",
    ),
    Key(
        "+",
        "a run that ended undecided: measure more L = 1 rounds",
        "more-rounds",
        KeyGroup.RUN,
        "more_rounds",
        "plus,equals_sign",
        title="More L = 1 rounds",
        only=Only.LIVE,
    ),
    Key(
        "←",
        "seek back",
        "seek-back",
        KeyGroup.NAVIGATION,
        "seek_back",
        "left",
        "seek −",
        "Seek back",
        Only.REPLAY,
        2,
        "seek",
        priority=True,
    ),
    Key(
        "→",
        "seek forward",
        "seek-forward",
        KeyGroup.NAVIGATION,
        "seek_forward",
        "right",
        "seek +",
        "Seek forward",
        Only.REPLAY,
        2,
        "seek",
        priority=True,
    ),
    Key(
        "home",
        "go to the recording's start",
        "seek-home",
        KeyGroup.NAVIGATION,
        "seek_home",
        title="Go to start",
        only=Only.REPLAY,
    ),
    Key(
        "end",
        "go to the recording's end",
        "seek-end",
        KeyGroup.NAVIGATION,
        "seek_end",
        title="Go to end",
        only=Only.REPLAY,
    ),
    Key(
        "e",
        "export the summary (markdown + CSV + JSON) to --out-dir",
        "export",
        KeyGroup.FILES,
        "export",
        label="export",
        title="Export summary",
    ),
    Key(
        "s",
        "save a screenshot (SVG) to --out-dir",
        "screenshot",
        KeyGroup.FILES,
        "screenshot",
        label="shot",
        title="Save screenshot",
        rank=4,
    ),
    Key(
        "t",
        "next colour theme",
        "theme",
        KeyGroup.VIEWS,
        "next_theme",
        label="theme",
        title="Next theme",
        rank=4,
    ),
    Key(
        "z",
        "zoom the focused pane (or the key figure) to full screen, and back",
        "zoom",
        KeyGroup.VIEWS,
        "zoom",
        label="zoom",
        title="Zoom pane",
        rank=1,
    ),
    Key(
        "m",
        "the key figure: marginal cost of a 2nd query, or MBU against context (and back)",
        "figure-view",
        KeyGroup.VIEWS,
        "figure_view",
        title="Key figure: marginal cost / MBU",
        rank=4,
    ),
    Key(
        "1 2 3",
        "show a page (narrow screens): cost, arms, memory/log",
        "page-cost",
        KeyGroup.NAVIGATION,
        "page(0)",
        "1",
        title="Show the cost · validity page",
        only=Only.COMPACT,
    ),
    Key(
        "2",
        "show the arms page",
        "page-arms",
        KeyGroup.NAVIGATION,
        "page(1)",
        title="Show the arms page",
        only=Only.COMPACT,
        listed=False,
    ),
    Key(
        "3",
        "show the memory · log page",
        "page-sys",
        KeyGroup.NAVIGATION,
        "page(2)",
        title="Show the memory · log page",
        only=Only.COMPACT,
        listed=False,
    ),
    Key(
        "x",
        "hide the explanation (demo)",
        "hide-explain",
        KeyGroup.VIEWS,
        "hide_explain",
        title="Hide the explanation",
        only=Only.DEMO,
    ),
    Key(
        "?",
        "help: every key, and what the symbols on screen mean",
        "help",
        KeyGroup.VIEWS,
        "help",
        "question_mark",
        "help",
        "Help: keys and symbols",
        rank=0,
    ),
    Key(
        "ctrl+p",
        "command palette: every action by name",
        "palette",
        KeyGroup.VIEWS,
        "command_palette",
        rank=5,
        builtin=True,
    ),
    Key(
        "q",
        "quit (a live run stops; its recording is kept)",
        "quit",
        KeyGroup.RUN,
        "quit",
        label="quit",
        rank=0,
    ),
    Key("ctrl+c", "quit", "quit-ctrl-c", KeyGroup.RUN, "quit", priority=True, listed=False),
)


def keys_for(replay: bool, compact: bool = True, demo: bool = False) -> list[Key]:
    """The listed keys that work in a replay (or a live run), in the table's order."""
    works = {
        Only.ALWAYS: True,
        Only.REPLAY: replay,
        Only.LIVE: not replay,
        Only.COMPACT: compact,
        Only.DEMO: demo,
    }
    return [k for k in KEYS if k.listed and works[k.only]]


def keys_epilog(replay: bool, demo: bool = False) -> str:
    rows = keys_for(replay, demo=demo)
    width = max(len(k.key) for k in rows)
    return "keys in the dashboard:\n" + "\n".join(
        f"  {k.key:<{width}}  {k.description}" for k in rows
    )
