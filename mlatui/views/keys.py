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
    def keys(self) -> str:
        return self.bind or self.key


NAV, RUN, VIEWS, FILES = KeyGroup.NAVIGATION, KeyGroup.RUN, KeyGroup.VIEWS, KeyGroup.FILES
KEYS = (
    Key("p", "pause / resume the display (replay: the clock)", "pause", RUN, "toggle_pause",
        label="pause", title="Pause / resume", rank=1),
    Key("space", "single step to the next event that changes the screen", "step", NAV, "step",
        label="step", title="Single step", only=Only.REPLAY, rank=2),
    Key("+", "replay faster", "faster", RUN, "faster", bind="plus,equals_sign", label="faster",
        title="Faster replay", only=Only.REPLAY, rank=2, footer_group="speed"),
    Key("-", "replay slower", "slower", RUN, "slower", bind="minus", label="slower",
        title="Slower replay", only=Only.REPLAY, rank=2, footer_group="speed"),
    Key("+", "a run that ended undecided: measure more L = 1 rounds", "more-rounds", RUN,
        "more_rounds", bind="plus,equals_sign", title="More L = 1 rounds", only=Only.LIVE),
    Key("←", "seek back", "seek-back", NAV, "seek_back", bind="left", label="seek −",
        title="Seek back", only=Only.REPLAY, rank=2, footer_group="seek", priority=True),
    Key("→", "seek forward", "seek-forward", NAV, "seek_forward", bind="right", label="seek +",
        title="Seek forward", only=Only.REPLAY, rank=2, footer_group="seek", priority=True),
    Key("home", "go to the recording's start", "seek-home", NAV, "seek_home",
        title="Go to start", only=Only.REPLAY),
    Key("end", "go to the recording's end", "seek-end", NAV, "seek_end",
        title="Go to end", only=Only.REPLAY),
    Key("e", "export the summary (markdown + CSV + JSON) to --out-dir", "export", FILES, "export",
        label="export", title="Export summary"),
    Key("s", "save a screenshot (SVG) to --out-dir", "screenshot", FILES, "screenshot",
        label="shot", title="Save screenshot", rank=4),
    Key("t", "next colour theme", "theme", VIEWS, "next_theme",
        label="theme", title="Next theme", rank=4),
    Key("z", "zoom the focused pane (or the key figure) to full screen, and back", "zoom", VIEWS,
        "zoom", label="zoom", title="Zoom pane", rank=1),
    Key("m", "the key figure: marginal cost of a 2nd query, or MBU against context (and back)",
        "figure-view", VIEWS, "figure_view", title="Key figure: marginal cost / MBU", rank=4),
    Key("1 2 3", "show a page (narrow screens): cost, arms, memory/log", "page-cost", NAV,
        "page(0)", bind="1", title="Show the cost · validity page", only=Only.COMPACT),
    Key("2", "show the arms page", "page-arms", NAV, "page(1)",
        title="Show the arms page", only=Only.COMPACT, listed=False),
    Key("3", "show the memory · log page", "page-sys", NAV, "page(2)",
        title="Show the memory · log page", only=Only.COMPACT, listed=False),
    Key("x", "hide the explanation (demo)", "hide-explain", VIEWS, "hide_explain",
        title="Hide the explanation", only=Only.DEMO),
    Key("?", "help: every key, and what the symbols on screen mean", "help", VIEWS, "help",
        bind="question_mark", label="help", title="Help: keys and symbols", rank=0),
    Key("ctrl+p", "command palette: every action by name", "palette", VIEWS, "command_palette",
        rank=5, builtin=True),
    Key("q", "quit (a live run stops; its recording is kept)", "quit", RUN, "quit",
        label="quit", rank=0),
    Key("ctrl+c", "quit", "quit-ctrl-c", RUN, "quit", priority=True, listed=False),
)  # fmt: skip


def works(only: Only, replay: bool, compact: bool = True, demo: bool = False) -> bool:
    """Whether a key marked `only` works in a replay (or a live run) on this screen."""
    where = {Only.REPLAY: replay, Only.LIVE: not replay, Only.COMPACT: compact, Only.DEMO: demo}
    return where.get(only, True)


def keys_for(replay: bool, compact: bool = True, demo: bool = False) -> list[Key]:
    """The listed keys that work in a replay (or a live run), in the table's order."""
    return [k for k in KEYS if k.listed and works(k.only, replay, compact, demo)]


def keys_epilog(replay: bool, demo: bool = False) -> str:
    rows = keys_for(replay, demo=demo)
    width = max(len(k.key) for k in rows)
    return "keys in the dashboard:\n" + "\n".join(
        f"  {k.key:<{width}}  {k.description}" for k in rows
    )
