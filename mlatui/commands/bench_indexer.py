"""`mlatui bench indexer`: the pooled-window sparse indexer, stock vs patched pooling."""

from __future__ import annotations

import argparse

from mlatui.commands.argtypes import (
    add_force,
    add_overwrite,
    end_status,
    int_at_least,
    int_list,
    int_list_or_none,
    non_negative_int,
    positive_float,
)
from mlatui.config.scenario import DTYPE_NAMES

HELP = "sparse indexer step ms, stock vs patched pooling (GLM-5.3-Flash geometry, random weights)"
# about two minutes on a 2-core CPU: the first part always runs, later ones only if they fit
DEFAULT_MAX_SECONDS = 100.0
DEFAULT_CONTEXTS = (8192, 32768, 131072)


def configure(parser: argparse.ArgumentParser) -> None:
    _add_shape_arguments(parser)
    _add_rounds_arguments(parser)
    _add_run_arguments(parser)


def _add_shape_arguments(parser: argparse.ArgumentParser) -> None:
    """The contexts and widths the parts measure."""
    parser.add_argument(
        "--contexts",
        type=int_list,
        default=None,
        help=f"cache lengths (> 2048; default {','.join(map(str, DEFAULT_CONTEXTS))}, those that "
        "fit this device's memory)",
    )
    parser.add_argument(
        "--widths",
        type=int_list,
        default="1,2,4",
        help="new tokens per step; 1 is always run (control)",
    )
    parser.add_argument(
        "--layer-contexts",
        type=int_list_or_none,
        default=None,
        help="contexts for the whole sparse layer (default: same as --contexts; 'none' to skip)",
    )


def _add_rounds_arguments(parser: argparse.ArgumentParser) -> None:
    """How many rounds each part takes, and the time limit on them."""
    parser.add_argument(
        "--rounds",
        "--reps",
        dest="rounds",
        type=int_at_least(2, " (a round and its mirror)"),
        default=6,
        help="rounds before the S=1 check may decide (default 6); each round measures every S "
        "once per arm as an A B B A quad, S=1 three times",
    )
    parser.add_argument(
        "--max-rounds",
        type=int_at_least(2),
        default=None,
        help="while the S=1 check is inconclusive, add rounds up to this (default 3x --rounds)",
    )
    parser.add_argument(
        "--max-seconds",
        type=positive_float,
        default=DEFAULT_MAX_SECONDS,
        metavar="S",
        help=f"time limit (default {DEFAULT_MAX_SECONDS:g}): no rounds past the minimum and no "
        "part a later context would overrun once S seconds are spent; what it left out or "
        "undecided is listed",
    )
    parser.add_argument(
        "--warmup", type=non_negative_int, default=1, help="untimed steps per arm and S (default 1)"
    )


def _add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """Seed, dtype and where the records go."""
    parser.add_argument(
        "--seed", type=non_negative_int, default=0, help="weights, inputs and bootstrap seed"
    )
    parser.add_argument(
        "--dtype",
        choices=DTYPE_NAMES,
        default=None,
        help="default: float32 on CPU, bfloat16 on GPU",
    )
    parser.add_argument(
        "--out", default=None, help="write the records as JSONL here, streamed part by part"
    )
    add_overwrite(parser)
    add_force(parser)
    parser.add_argument("--quiet", action="store_true", help="no per-sample progress on stderr")


def _fitting_defaults(dtype: str | None, width: int, force: bool) -> list[int]:
    """The default contexts this device's memory holds (the largest ones are for GPUs); the
    others are named on stderr. None fits: the smallest, for refuse_unless_fits to explain."""
    import sys

    from mlatui.models.fit import indexer_estimate
    from mlatui.models.indexer import SparseMLAConfig
    from mlatui.models.loading import default_dtype

    config, dtype = SparseMLAConfig(), dtype or default_dtype()
    fit = [c for c in DEFAULT_CONTEXTS if force or indexer_estimate(config, dtype, c, width).fits]
    left = [c for c in DEFAULT_CONTEXTS if c not in fit]
    if left and fit:
        print(
            f"mlatui: default contexts {', '.join(map(str, left))} do not fit this device's "
            "memory: left out (pass --contexts to choose)",
            file=sys.stderr,
        )
    return fit or [DEFAULT_CONTEXTS[0]]


def _checked_contexts(args: argparse.Namespace) -> tuple[list[int], list[int]]:
    """The contexts of the two parts (the kernels', the layer's), checked against the indexer's
    top-k and the memory estimate before anything is built."""
    from mlatui.errors import UserError

    widths = args.widths
    contexts = args.contexts or _fitting_defaults(args.dtype, max(widths), args.force)
    layer_contexts = contexts if args.layer_contexts is None else args.layer_contexts
    if args.max_rounds is not None and args.max_rounds < args.rounds:
        raise UserError(
            f"--max-rounds {args.max_rounds} is below --rounds {args.rounds}",
            "pass a --max-rounds >= --rounds",
        )
    from mlatui.models.indexer import SparseMLAConfig

    topk = SparseMLAConfig().index_topk
    small = [c for c in [*contexts, *layer_contexts] if c <= topk]
    if small:
        raise UserError(
            f"contexts must be above index_topk ({topk}); the indexer is bypassed at {small[0]}"
        )
    from mlatui.models.fit import indexer_estimate, refuse_unless_fits
    from mlatui.models.loading import default_dtype

    refuse_unless_fits(
        indexer_estimate(
            SparseMLAConfig(),
            args.dtype or default_dtype(),
            max(contexts + layer_contexts),
            max(widths),
        ),
        args.force,
        "use smaller --contexts or --widths, or --force to try anyway",
    )
    return contexts, layer_contexts


def run(args: argparse.Namespace) -> int:
    contexts, layer_contexts = _checked_contexts(args)
    widths = args.widths
    import sys
    import threading

    from mlatui.config.outputs import JsonlSink, claim_output
    from mlatui.errors import ExitStatus, error_line
    from mlatui.host.signals import StopOnSignals, raise_if_set

    out = claim_output(args.out, overwrite=args.overwrite) if args.out else None
    from mlatui.bench.indexer import (
        IndexerGrid,
        PartBuild,
        Rounds,
        TimedProgress,
        run_indexer_bench,
    )

    sink = JsonlSink(out) if out else None
    stop = threading.Event()
    hooks = TimedProgress(args.quiet, raise_if_set(stop), args.max_seconds)
    with StopOnSignals(stop) as signals:
        records = run_indexer_bench(
            IndexerGrid(contexts, widths, layer_contexts),
            Rounds(args.rounds, args.warmup, args.max_rounds),
            PartBuild(dtype=args.dtype, seed=args.seed),
            hooks,
            sink.write_records if sink else lambda records: None,
        )
    if sink is not None:
        sink.close()
    if not records:
        if sink is not None and sink.error:
            print(error_line(sink.error), file=sys.stderr)
        print(
            f"mlatui: stopped by {signals.stopped_by.name} before a part completed", file=sys.stderr
        )
        return signals.exit_status or ExitStatus.INTERRUPTED
    from mlatui.views.bench_report import indexer_report

    print(indexer_report(records, hooks.skipped, args.max_seconds), end="")
    if sink is not None:
        print(f"\nwrote {len(records)} records to {out}")
    return end_status(signals, "; the parts done are above", sink.error if sink else None) or 0
