"""`mlatui calibrate`: measure the absorbed/materialised crossover on this device and store it."""

from __future__ import annotations

import argparse
import sys

HELP = "measure the MLA absorbed/materialised crossover on this device (used by threshold='calibrated')"


def configure(parser: argparse.ArgumentParser) -> None:
    from mlatui.commands.bench_attention import int_list

    parser.add_argument(
        "--family", required=True, help="MLA family whose attention geometry to calibrate"
    )
    parser.add_argument(
        "--contexts",
        type=int_list,
        default=[1024, 4096, 16384],
        help="cache lengths (default 1024,4096,16384)",
    )
    parser.add_argument(
        "--max-width", type=int, default=2048, help="largest width searched (default 2048)"
    )
    parser.add_argument("--reps", type=int, default=5, help="timed samples per branch and probe")
    parser.add_argument(
        "--bits", type=int, default=None, help="quantize the layer's weights (e.g. 4)"
    )
    parser.add_argument("--size", choices=["full", "tiny"], default="full", help=argparse.SUPPRESS)


def run(args: argparse.Namespace) -> int:
    from mlatui.cli import UserError
    from mlatui.families import FAMILIES

    if args.family not in FAMILIES:
        raise UserError(f"unknown family {args.family!r}: use one of {', '.join(FAMILIES)}")
    if args.max_width < 2:
        raise UserError("--max-width must be >= 2")

    from mlatui import calibration
    from mlatui.mla import max_absorbed_queries
    from mlatui.records import env_line, environment, markdown_table

    env = environment()
    print(f"# calibrate {args.family}: {env_line(env)}")
    geometry, crossovers, _ = calibration.calibrate(
        args.family,
        args.contexts,
        args.reps,
        args.max_width,
        args.size,
        args.bits,
        lambda s: print(f"  {s}", file=sys.stderr, flush=True),
    )
    g = geometry
    rows = [
        (
            t,
            w if w < args.max_width else f">= {w}",
            max_absorbed_queries(g.kv_lora_rank, g.qk_nope_head_dim, g.v_head_dim, t),
        )
        for t, w in crossovers.items()
    ]
    print(markdown_table(["cache T", "measured max absorbed L", "formula"], rows))
    path = calibration.save_crossovers(geometry, crossovers, args.family, env)
    print(f"stored for {g.key} on {calibration.device_key(env)}: {path}")
    return 0
