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
        "--indexer",
        choices=("patched", "stock"),
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
    from mlatui.cli import UserError

    if args.threshold is None:
        threshold = None
    else:
        threshold = str(args.threshold).strip()
    if threshold is not None and not (
        threshold in ("formula", "calibrated", "stock") or threshold.isdigit()
    ):
        raise UserError(
            f"--threshold {args.threshold!r}: use formula, calibrated, stock or an integer >= 1"
        )
    if threshold is not None and threshold.isdigit() and int(threshold) < 1:
        raise UserError("--threshold must be >= 1 (1 = the stock gate)")
    if args.fill == "random-latents" and not getattr(args, "random_weights", False):
        raise UserError("--fill random-latents is a timing-only fill: add --random-weights")
    return {"threshold": threshold, "indexer": args.indexer, "null": args.null, "fill": args.fill}
