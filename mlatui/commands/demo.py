"""`mlatui demo [--live]`: replay the shipped recording with an explanation, or run it live."""

from __future__ import annotations

import argparse
from pathlib import Path

HELP = "show the dashboard on a shipped recording of the real engine (--live: run the default scenario)"
DEMO_FILE = "demo.jsonl"


def epilog() -> str:
    from mlatui.views.keys import keys_epilog

    return keys_epilog(replay=True) + "\n  x      hide the explanation"


def configure(parser: argparse.ArgumentParser) -> None:
    from mlatui.commands.replay import add_view_options

    parser.add_argument("--live", action="store_true", help="run the default scenario live instead")
    add_view_options(parser)


def demo_recording() -> Path:
    """The shipped recording: package data of `mlatui.scenarios`, else the repo's scenarios/."""
    from importlib import resources

    try:
        p = resources.files("mlatui.scenarios").joinpath(DEMO_FILE)
        if p.is_file():
            return Path(str(p))
    except (ModuleNotFoundError, TypeError):
        pass
    return Path(__file__).resolve().parents[2] / "scenarios" / DEMO_FILE


def run(args: argparse.Namespace) -> int:
    from mlatui.errors import UserError

    if args.live:
        from mlatui.commands import launch

        replay_only = [
            flag for flag, on in (("--dump", args.dump), ("--skip-bad", args.skip_bad)) if on
        ]
        if replay_only:
            raise UserError(
                f"{' and '.join(replay_only)} read a recording; --live runs the engine",
                "drop --live to replay the shipped run, or run `mlatui bench "
                "scenarios/default.toml` for a headless live run",
            )
        parser = argparse.ArgumentParser()
        launch.configure(parser)
        ns = parser.parse_args(["--ui-hz", str(args.ui_hz)])
        ns.out_dir = args.out_dir
        return launch.run(ns)
    path = demo_recording()
    if not path.is_file():
        raise UserError(
            f"the demo recording {path} is missing; reinstall mlatui or run `mlatui demo --live`"
        )
    from mlatui.commands.replay import play

    return play(path, args, "demo")
