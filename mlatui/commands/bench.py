"""`mlatui bench attention|indexer|SCENARIO.toml ...`: hands the arguments to the benchmark named."""

from __future__ import annotations

import argparse
import importlib

HELP = "headless benchmarks: `bench attention`, `bench indexer`, or `bench SCENARIO.toml`"


def configure(parser: argparse.ArgumentParser) -> None:
    from mlatui.cli import bench_targets

    parser.add_argument(
        "target", help=f"one of {', '.join(bench_targets())}, or a scenario .toml file"
    )
    parser.add_argument("rest", nargs=argparse.REMAINDER, help="options of that benchmark")


def run(args: argparse.Namespace) -> int:
    from mlatui.cli import BENCH_SCENARIO, BENCH_TARGETS, UserError, bench_targets

    target = args.target
    if target in BENCH_TARGETS:
        mod = importlib.import_module(BENCH_TARGETS[target])
    elif target.endswith(".toml") or "/" in target:
        mod = importlib.import_module(BENCH_SCENARIO)
        args.rest = [target, *args.rest]
    else:
        raise UserError(
            f"unknown benchmark {target!r}: use one of {', '.join(bench_targets())} or a scenario .toml file"
        )
    from mlatui.commands.argtypes import OneLineParser

    parser = OneLineParser(prog=f"mlatui bench {target}", description=mod.HELP)
    mod.configure(parser)
    sub_args = parser.parse_args(args.rest)
    return mod.run(sub_args)
