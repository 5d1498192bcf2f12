"""`mlatui replay FILE [--speed X]`: the dashboard from a recording, on any machine (no MLX)."""

from __future__ import annotations

import argparse

from mlatui.argtypes import positive_float

HELP = "replay a recorded run in the dashboard (no MLX needed)"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", help="a JSONL recording (from `mlatui launch` or `mlatui bench`)")
    add_view_options(parser)


def add_view_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--speed", type=positive_float, default=1.0, help="replay speed factor (default 1)"
    )
    parser.add_argument(
        "--ui-hz", type=positive_float, default=4.0, help="screen updates per second (default 4)"
    )
    parser.add_argument(
        "--out-dir", default=None, help="where e/s write exports and screenshots (default: .)"
    )
    parser.add_argument(
        "--dump",
        action="store_true",
        help="no terminal UI: replay headless at full speed through the dashboard, then print its summary",
    )


def play(path, args: argparse.Namespace, mode: str) -> int:
    from mlatui.errors import UserError
    from mlatui.recorder import RecordingError
    from mlatui.sources import ReplaySource

    try:
        source = ReplaySource(path, speed=1e6 if args.dump else args.speed)
    except RecordingError as e:
        raise UserError(str(e)) from None
    import sys

    for w in source.warnings:
        print(f"mlatui: warning: {w}", file=sys.stderr)
    from widgets.app import MlatuiApp

    app = MlatuiApp(
        source,
        mode=mode,
        ui_hz=20.0 if args.dump else args.ui_hz,
        out_dir=args.out_dir,
        exit_when_done=args.dump,
    )
    if args.dump:
        app.run(headless=True, size=(120, 40))
        md, _ = app.summary()
        print(md, end="")
        print(f"replayed {len(app.events)} events through the dashboard; status {app.dash.status}")
        return 0 if app.dash.status != "error" else 1
    app.run()
    return 0


def run(args: argparse.Namespace) -> int:
    return play(args.file, args, "replay")
