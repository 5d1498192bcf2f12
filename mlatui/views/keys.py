"""The dashboard's keys as plain data, for `--help` texts (no textual import).

widgets/controls.py's KEY_BINDINGS are the live source; tests/test_help.py proves the two agree."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Key:
    key: str  # as the footer shows it
    description: str
    id: str  # the binding id (remap with App.set_keymap)
    replay_only: bool = False
    live_only: bool = False


KEYS = (
    Key("p", "pause / resume the display (replay: the clock)", "pause"),
    Key("space", "single step to the next event that changes the screen", "step", replay_only=True),
    Key("+", "replay faster", "faster", replay_only=True),
    Key("-", "replay slower", "slower", replay_only=True),
    Key(
        "+", "a run that ended undecided: measure more L = 1 rounds", "more-rounds", live_only=True
    ),
    Key("←", "seek back", "seek-back", replay_only=True),
    Key("→", "seek forward", "seek-forward", replay_only=True),
    Key("home", "go to the recording's start", "seek-home", replay_only=True),
    Key("end", "go to the recording's end", "seek-end", replay_only=True),
    Key("e", "export the summary (markdown + CSV) to --out-dir", "export"),
    Key("s", "save a screenshot (SVG) to --out-dir", "screenshot"),
    Key("t", "next colour theme", "theme"),
    Key("z", "zoom the focused pane (or the key figure) to full screen, and back", "zoom"),
    Key("1 2 3", "show a page (narrow screens): cost, arms, memory/log", "page-cost"),
    Key("?", "every key and what the symbols on screen mean", "help"),
    Key("q", "quit (a live run stops; its recording is kept)", "quit"),
)


def keys_epilog(replay: bool) -> str:
    rows = [k for k in KEYS if not (k.live_only if replay else k.replay_only)]
    width = max(len(k.key) for k in rows)
    return "keys in the dashboard:\n" + "\n".join(
        f"  {k.key:<{width}}  {k.description}" for k in rows
    )
