"""`mlatui launch`: run a scenario live, stock and patched side by side, in the dashboard."""

from __future__ import annotations

import argparse

from mlatui.argtypes import positive_float
from mlatui.commands._gate_options import add_gate_options, gate_settings

HELP = (
    "run a scenario live in the dashboard (default: the embedded model and scenarios/default.toml)"
)


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--model", default=None, help="local folder or hub id (default: the embedded model)"
    )
    parser.add_argument("--draft-model", default=None, help="draft model folder or hub id")
    parser.add_argument(
        "--scenario", default=None, help="scenario TOML (default: scenarios/default.toml)"
    )
    parser.add_argument(
        "--record",
        default=None,
        help="JSONL recording path (default: a new file under the user data dir)",
    )
    parser.add_argument(
        "--isolate",
        action="store_true",
        help="run the engine in a child process (events over a pipe)",
    )
    parser.add_argument(
        "--ui-hz",
        type=positive_float,
        default=1.0,
        help="screen updates per second (default 1: the lowest observer effect measured, see docs/performance.md)",
    )
    parser.add_argument(
        "--random-weights",
        action="store_true",
        help="build the scenario's model with random weights (timing only)",
    )
    add_gate_options(parser)
    parser.add_argument(
        "--out-dir", default=None, help="where e/s write exports and screenshots (default: .)"
    )


def build_config(args: argparse.Namespace):
    from mlatui.inputs import read_scenario
    from mlatui.runconfig import RunConfig

    read_scenario(args.scenario)  # fail before the screen opens, as `bench` does
    return RunConfig(
        model=args.model,
        draft_model=args.draft_model,
        scenario=args.scenario,
        record=args.record,
        random_weights=args.random_weights,
        **gate_settings(args),
    )


def run(args: argparse.Namespace) -> int:
    import os
    import sys

    config = build_config(args)
    from mlatui.sources import LiveSource, ProcessSource

    source = ProcessSource(config) if args.isolate else LiveSource(config)
    from widgets.app import MlatuiApp

    app = MlatuiApp(source, ui_hz=args.ui_hz, out_dir=args.out_dir)
    status = 0
    try:
        app.run()
    finally:
        source.stop()  # joins the engine thread / ends the child, then closes the recording
        print(f"mlatui: recording kept at {source.record_path}", file=sys.stderr)
        if app.dash.error:
            print(f"mlatui: engine error: {app.dash.error}", file=sys.stderr)
    if not args.isolate:
        # MLX can abort at interpreter exit after compiled mlx-lm code ran on a worker thread.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)
    return status
