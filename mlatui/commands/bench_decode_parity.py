"""`mlatui bench decode-parity`: mlatui's decode beside a direct mlx-lm call (see mlatui.run.parity)."""

from __future__ import annotations

import argparse

from mlatui.commands.argtypes import add_overwrite, progress_line

HELP = (
    "mlatui's plain and speculative decode beside a direct mlx_lm call on the same model, cache "
    "and settings: tok/s ratio with its 95% CI (parity: within ±3%)"
)
DEFAULT_MAX_SECONDS = 110.0  # about two minutes of sampling on a 2-core CPU


def configure(parser: argparse.ArgumentParser) -> None:
    from mlatui.commands.argtypes import (
        finite_float,
        int_at_least,
        non_negative_int,
        positive_float,
    )

    parser.add_argument(
        "scenario", nargs="?", default=None, help="scenario .toml (default: the shipped default)"
    )
    parser.add_argument("--model", default=None, help="a local mlx-lm folder or hub id")
    parser.add_argument("--draft-model", default=None, help="a draft model folder or hub id")
    parser.add_argument(
        "--random-weights", action="store_true", help="the scenario's config, random weights"
    )
    parser.add_argument(
        "--context",
        type=int_at_least(16),
        default=None,
        help="prefilled tokens (default: the scenario's first tune context)",
    )
    parser.add_argument(
        "--tokens", type=int_at_least(4), default=32, help="tokens per block (default 32)"
    )
    parser.add_argument("--depth", type=int_at_least(1), default=2, help="draft depth (default 2)")
    parser.add_argument(
        "--rounds", type=int_at_least(2), default=6, help="rounds of A B B A (default 6)"
    )
    parser.add_argument(
        "--versus",
        default="mlx_lm,mlx_lm-thread,sync-loop",
        help="what mlatui's blocks are paired with, comma-separated, each with its own rounds "
        "(default: mlx_lm,mlx_lm-thread,sync-loop; mlx_lm-aa: the A/A, mlx_lm-thread against "
        "itself, the harness's own spread)",
    )
    parser.add_argument(
        "--max-seconds",
        type=positive_float,
        default=DEFAULT_MAX_SECONDS,
        metavar="S",
        help="stop adding rounds (after a whole pair) once S seconds are spent, shared equally by "
        "the --versus pairings: a time limit then still leaves the table and records (default "
        f"{DEFAULT_MAX_SECONDS:g}; loading the model comes on top)",
    )
    parser.add_argument(
        "--arm-source",
        default=None,
        metavar="NAME=PATH",
        help="measure the model built from another source tree (an mlx-lm or mlx-vlm checkout "
        "or package folder) on the same weights, running its own code (NAME: A, B, stock or "
        "patched, as launch and bench take it)",
    )
    parser.add_argument("--temperature", type=finite_float, default=0.0, help="0 = greedy")
    parser.add_argument("--seed", type=non_negative_int, default=0)
    parser.add_argument("--out", default=None, help="write the records as JSONL here")
    add_overwrite(parser)


def _check(args: argparse.Namespace) -> None:
    from mlatui.cli import UserError
    from mlatui.config.outputs import claim_output
    from mlatui.run.parity import SIDES

    if not 0 <= args.temperature <= 10:
        raise UserError(f"--temperature must be in [0, 10], got {args.temperature}", "0 = greedy")
    versus = tuple(v.strip() for v in args.versus.split(",") if v.strip())
    unknown = [v for v in versus if v not in SIDES]
    if unknown or not versus or len(set(versus)) != len(versus):
        raise UserError(
            f"--versus {args.versus!r}: name each of {', '.join(SIDES)} at most once",
            "e.g. --versus mlx_lm-thread",
        )
    args.versus = versus
    from mlatui.config.arm_settings import parse_arm_sources

    args.arm_sources = parse_arm_sources([args.arm_source] if args.arm_source else None)
    if args.out:
        claim_output(args.out, overwrite=args.overwrite)


def run(args: argparse.Namespace) -> int:
    from mlatui.cli import UserError

    _check(args)
    from mlatui.config.scenario import load_scenario
    from mlatui.measure.records import environment
    from mlatui.models.loading import DraftKind, load_draft, load_target
    from mlatui.run.decode_stream import Sampling, draft_factory
    from mlatui.run.engine_setup import text_tokens
    from mlatui.run.parity import ParityPlan, run_parity
    from mlatui.views.bench_report import parity_header, parity_report
    from mlatui.views.mdtable import jsonl

    scenario = load_scenario(args.scenario)
    seed = scenario.run_seed(args.seed)
    loaded = load_target(args.model, scenario, args.random_weights, seed)
    load_draft(args.draft_model, scenario.draft, loaded, seed)
    source = _source_model(loaded.model, args.arm_sources)
    sampling = Sampling(args.temperature)
    make_draft = draft_factory(loaded, scenario, seed)
    if not sampling.greedy and loaded.draft.kind is DraftKind.SYNTHETIC:
        raise UserError("a synthetic draft (random weights) decodes greedily: use --temperature 0")
    tunes = [p for p in scenario.phases if p.kind.rules.decodes]
    context = args.context or (tunes[0].contexts[0] if tunes else 2048)
    text = text_tokens(loaded, seed)(context + 1)
    env = environment()
    settings = _settings(args, loaded, source)
    code = f", code from {next(iter(args.arm_sources.values()))}" if source is not None else ""
    print(parity_header(env, settings, context, code), end="", flush=True)
    plan = ParityPlan(
        text[:-1],
        text[-1],
        args.tokens,
        args.depth,
        args.rounds,
        seed,
        sampling,
        args.versus,
        args.max_seconds,
    )
    results = run_parity(loaded.model, make_draft, plan, progress_line, source)
    records = _records(results, loaded.model_type, context, settings, env)
    print(parity_report(records), end="")
    if args.out:
        from mlatui.config.outputs import write_output

        write_output(args.out, jsonl(r.to_dict() for r in records))
    bad = [r for r in results if r.other.startswith("mlx_lm") and r.outcome.value != "valid"]
    return 3 if bad else 0


def _source_model(model, arm_sources: dict[str, str]):
    """The model built from `--arm-source`'s tree on the loaded weights, or None."""
    if not arm_sources:
        return None
    from mlatui.run.arms import build_sources

    return next(iter(build_sources(model, arm_sources).models.values()))


def _records(results, model_type: str, context: int, settings: dict, env: dict) -> list:
    """One record per result and side: its samples, tok/s and the paired ratio's CI."""
    from mlatui.measure.records import BenchRecord

    records = []
    for r in results:
        for side, samples in r.samples_ms.items():
            records.append(
                BenchRecord(
                    "decode-parity",
                    model_type,
                    side,
                    context,
                    r.depth + 1,
                    samples,
                    dict(
                        settings,
                        versus=r.other,
                        depth=r.depth,
                        rounds_done=r.rounds,
                        tok_s=r.tok_s[side],
                        ratio=r.ratio.median,
                        ratio_low=r.ratio.low,
                        ratio_high=r.ratio.high,
                        outcome=r.outcome.value,
                    ),
                    env,
                    r.outcome.value == "valid",
                )
            )
    return records


def _settings(args: argparse.Namespace, loaded, source) -> dict:
    """Every record's settings; with a source tree, what code was measured (as a run's header
    records it)."""
    from mlatui.run.parity import TOLERANCE_PCT

    settings = {
        "model": loaded.name,
        "draft": loaded.draft.label,
        "tokens": args.tokens,
        "rounds": args.rounds,
        "max_seconds": args.max_seconds,
        "temperature": args.temperature,
        "tolerance_pct": TOLERANCE_PCT,
    }
    if source is not None:
        from mlatui.models.tree_model import open_tree, provenance

        settings["source"] = provenance(source, open_tree(next(iter(args.arm_sources.values()))))
    return settings
