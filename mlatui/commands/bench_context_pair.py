"""`mlatui bench context-pair`: one arm's step cost at two context lengths, paired within each
quad (see mlatui.run.context_pair)."""

from __future__ import annotations

import argparse

from mlatui.stream.phrases import interval_text

HELP = (
    "one arm's step cost at a short and a long context, interleaved in A B B A quads: the "
    "growth ms(long) / ms(short) per width with its 95% CI"
)
DEFAULT_MAX_SECONDS = 110.0  # about two minutes of sampling on a 2-core CPU


def configure(parser: argparse.ArgumentParser) -> None:
    from mlatui.commands.argtypes import int_at_least, int_list, non_negative_int, positive_float

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
        choices=("prefill", "random-latents"),
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
    parser.add_argument("--force", action="store_true", help="overwrite an existing --out")


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
        claim_output(args.out, force=args.force)


def run(args: argparse.Namespace) -> int:
    from mlatui.cli import UserError

    _check(args)
    import mlatui  # noqa: F401  (fast BLAS before mlx on Linux CPU)
    from mlatui.config.scenario import ScenarioError, load_scenario
    from mlatui.gate.policy import Variant
    from mlatui.measure.records import BenchRecord, environment
    from mlatui.models.loading import LoadError, load_target
    from mlatui.run.context_pair import measure_context_pair
    from mlatui.run.prompts import text_tokens
    from mlatui.views.mdtable import env_line, jsonl, num, table

    try:
        scenario = load_scenario(args.scenario)
        seed = scenario.run_seed(args.seed)
        loaded = load_target(args.model, scenario, args.random_weights, seed)
    except (ScenarioError, LoadError) as e:
        raise UserError(str(e)) from None
    short, long = args.contexts
    env = environment()
    print(f"# mlatui bench context-pair\n\n{env_line(env)}", flush=True)
    fill_note = " (random latents: timing only)" if args.fill == "random-latents" else ""
    print(
        f"model {loaded.name}, {args.variant} arm, contexts {short} and {long}{fill_note}, "
        f"widths {','.join(map(str, args.widths))}, {args.rounds} rounds planned\n",
        flush=True,
    )
    results, _run = measure_context_pair(
        loaded.model,
        (short, long),
        tuple(args.widths),
        text_tokens(loaded, seed),
        args.rounds,
        seed,
        variant=Variant(args.variant),
        fill=args.fill,
        max_seconds=args.max_seconds,
    )
    settings = {
        "model": loaded.name,
        "variant": args.variant,
        "fill": args.fill,
        "contexts": [short, long],
        "rounds": args.rounds,
        "max_seconds": args.max_seconds,
    }
    records, rows = [], []
    for r in results:
        g = r.growth
        for c in (short, long):
            records.append(
                BenchRecord(
                    "context-pair",
                    loaded.model_type,
                    args.variant,
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
                        rounds_done=r.rounds,
                    ),
                    env,
                )
            )
        s, lo = r.step_ms[short], r.step_ms[long]
        rows.append(
            [
                r.width,
                interval_text(s, 2),
                interval_text(lo, 2),
                interval_text(g),
                g.n,
                r.rounds,
            ]
        )
    print(
        table(
            [
                "L",
                f"{short} ms [95% CI]",
                f"{long} ms [95% CI]",
                f"{long} / {short} paired [95% CI]",
                "quads",
                "rounds",
            ],
            rows,
            cell=num,
        )
    )
    print(
        f"\nBoth lengths on one {args.variant} arm (one model, two caches, a worker thread each), "
        "alternated in every A B B A quad: the ratio is paired, so device drift between minutes "
        "cancels; step ms are medians over rounds of each round's mean."
    )
    if args.out:
        from mlatui.config.outputs import write_output

        write_output(args.out, jsonl(rec.to_dict() for rec in records))
    return 0
