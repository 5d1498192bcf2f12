"""The options that choose what the arms run, shared by `launch` and `bench SCENARIO`: one place
parses them, and they reach every gated layer (dense and sparse) and every draft alike."""

from __future__ import annotations

import argparse


def add_gate_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--threshold",
        default=None,
        help="the patched arm's MLA gate, in every gated layer (dense and sparse) and draft: "
        "formula | calibrated | stock | an integer (max absorbed queries); default: the "
        "scenario's `threshold`, else formula",
    )
    parser.add_argument(
        "--arms",
        default=None,
        metavar="A,B",
        help="what the two arms run, e.g. pre-fix,installed or installed,calibrated: each one of "
        "installed (the runtime as it is), pre-fix (L == 1), formula, calibrated, compiled "
        "(mlatui's own absorbed attention, mx.compile, formula gate) or an integer; "
        "default: the scenario's [arms], else installed,formula on pre-fix code and "
        "pre-fix,installed on code that already carries the fix",
    )
    parser.add_argument(
        "--arm-source",
        action="append",
        default=None,
        metavar="NAME=PATH",
        help="an arm whose model code comes from another source tree: NAME is A, B, stock or "
        "patched; PATH an mlx-lm or mlx-vlm checkout (holding mlx_lm/ or mlx_vlm/) or package "
        "folder. The model is built from that tree's classes on the same weights, its gate its "
        "own code; the other arm runs the installed code as it is unless --arms says otherwise "
        "(e.g. --arm-source B=~/src/mlx-lm to review a patch)",
    )
    parser.add_argument(
        "--indexer",
        choices=("patched", "stock"),  # config.gate_settings.IndexerMode
        default=None,
        help="the patched arm's sparse indexer pooling (default: the scenario's `indexer`, else patched)",
    )
    parser.add_argument(
        "--null",
        action="store_true",
        help="A/A null test: both arms the same variant (both stock, then both patched) through "
        "the identical harness; reports the harness bias and remembers it for this device and "
        "scenario",
    )
    parser.add_argument(
        "--fill",
        choices=("prefill", "random-latents"),
        help="with --random-weights: fill caches with random latents instead of a prefill "
        "(timing only; long contexts in seconds instead of minutes)",
    )


def gate_settings(args: argparse.Namespace) -> dict:
    """RunConfig fields; a bad threshold is a one-line error before anything loads."""
    from mlatui.config.gate_settings import Threshold
    from mlatui.errors import UserError

    threshold = None
    if args.threshold is not None:
        try:
            threshold = str(Threshold.parse(args.threshold))
        except ValueError as e:
            raise UserError(f"--{e}") from None
    arms = getattr(args, "arms", None)
    if arms is not None:
        from mlatui.config.gate_settings import parse_arms

        try:
            baseline, candidate = parse_arms(arms)
        except ValueError as e:
            raise UserError(f"--{e}") from None
        arms = f"{baseline},{candidate}"
    from mlatui.config.arm_sources import ArmSourceError, parse_arm_sources

    try:
        arm_sources = parse_arm_sources(getattr(args, "arm_source", None))
    except ArmSourceError as e:
        raise UserError(str(e)) from None
    if args.fill == "random-latents" and not getattr(args, "random_weights", False):
        raise UserError("--fill random-latents is a timing-only fill: add --random-weights")
    return {
        "threshold": threshold,
        "arms": arms,
        "arm_sources": arm_sources,
        "indexer": args.indexer,
        "null": args.null,
        "fill": args.fill,
    }
