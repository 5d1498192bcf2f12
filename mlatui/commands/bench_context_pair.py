"""`mlatui bench context-pair`: one arm's step cost at two context lengths, paired within each
quad (see mlatui.run.context_pair)."""

from __future__ import annotations

import argparse

from mlatui.commands.argtypes import add_overwrite

HELP = (
    "one arm's step cost at a short and a long context, interleaved in A B B A quads: the "
    "growth ms(long) / ms(short) per width with its 95% CI"
)
DEFAULT_MAX_SECONDS = 110.0  # about two minutes of sampling on a 2-core CPU


def configure(parser: argparse.ArgumentParser) -> None:
    from mlatui.commands.argtypes import int_at_least, int_list, non_negative_int, positive_float
    from mlatui.config.scenario import FILLS

    parser.add_argument(
        "scenario", nargs="?", default=None, help="scenario .toml (default: the shipped default)"
    )
    parser.add_argument("--model", default=None, help="a local mlx-lm folder or hub id")
    parser.add_argument(
        "--random-weights", action="store_true", help="the scenario's config, random weights"
    )
    parser.add_argument(
        "--contexts",
        type=int_list,
        default=[2048, 16384],
        help="the short and the long length (default 2048,16384)",
    )
    parser.add_argument(
        "--widths", type=int_list, default=[1, 3], help="query widths L (default 1,3)"
    )
    parser.add_argument(
        "--variant",
        choices=("patched", "stock"),
        default="patched",
        help="which arm's gates (default patched)",
    )
    parser.add_argument(
        "--fill",
        choices=FILLS,
        default="prefill",
        help="random-latents: timing only, each layer's cache filled with random latents",
    )
    parser.add_argument(
        "--rounds", type=int_at_least(2), default=12, help="rounds of A B B A (default 12)"
    )
    parser.add_argument(
        "--max-seconds",
        type=positive_float,
        default=DEFAULT_MAX_SECONDS,
        metavar="S",
        help="stop adding rounds (after a whole pair) once S seconds of sampling are spent "
        f"(default {DEFAULT_MAX_SECONDS:g}; loading the model comes on top)",
    )
    parser.add_argument("--seed", type=non_negative_int, default=0)
    parser.add_argument("--out", default=None, help="write the records as JSONL here")
    add_overwrite(parser)


def _check(args: argparse.Namespace) -> None:
    from mlatui.cli import UserError
    from mlatui.config.outputs import claim_output

    if len(args.contexts) != 2 or args.contexts[0] >= args.contexts[1]:
        raise UserError(
            f"--contexts {','.join(map(str, args.contexts))}: give two lengths, short first",
            "e.g. --contexts 2048,16384",
        )
    if len(set(args.widths)) != len(args.widths):
        raise UserError("--widths: each width once", "e.g. --widths 1,3")
    if args.out:
        claim_output(args.out, overwrite=args.overwrite)


def run(args: argparse.Namespace) -> int:

    _check(args)
    from mlatui.config.scenario import load_scenario
    from mlatui.gate.policy import Variant
    from mlatui.measure.records import environment
    from mlatui.models.loading import load_target
    from mlatui.run.context_pair import ContextPairPlan, measure_context_pair
    from mlatui.run.engine_setup import text_tokens
    from mlatui.views.bench_report import context_pair_header, context_pair_report
    from mlatui.views.mdtable import jsonl

    scenario = load_scenario(args.scenario)
    seed = scenario.run_seed(args.seed)
    loaded = load_target(args.model, scenario, args.random_weights, seed)
    short, long = args.contexts
    env = environment()
    settings = {
        "model": loaded.name,
        "variant": args.variant,
        "fill": args.fill,
        "contexts": [short, long],
        "widths": list(args.widths),
        "rounds": args.rounds,
        "max_seconds": args.max_seconds,
    }
    print(context_pair_header(env, settings), end="", flush=True)
    plan = ContextPairPlan(
        (short, long),
        tuple(args.widths),
        args.rounds,
        seed,
        variant=Variant(args.variant),
        fill=args.fill,
        max_seconds=args.max_seconds,
    )
    results, _run = measure_context_pair(loaded.model, text_tokens(loaded, seed), plan)
    records = _records(results, loaded.model_type, args.variant, settings, env)
    print(context_pair_report(records), end="")
    if args.out:
        from mlatui.config.outputs import write_output

        write_output(args.out, jsonl(rec.to_dict() for rec in records))
    return 0


def _records(results, model_type: str, variant: str, settings: dict, env: dict) -> list:
    """One record per width and context: its samples, CI and the growth between the contexts."""
    from mlatui.measure.records import BenchRecord

    short, long = settings["contexts"]
    records = []
    for r in results:
        g = r.growth
        for c in (short, long):
            records.append(
                BenchRecord(
                    "context-pair",
                    model_type,
                    variant,
                    c,
                    r.width,
                    r.samples_ms[c],
                    dict(
                        settings,
                        median_ms=r.step_ms[c].median,
                        ci_low_ms=r.step_ms[c].low,
                        ci_high_ms=r.step_ms[c].high,
                        growth=g.median,
                        growth_low=g.low,
                        growth_high=g.high,
                        quads=g.n,
                        rounds_done=r.rounds,
                    ),
                    env,
                )
            )
    return records
