"""`mlatui bench attention`: (a) forced absorbed vs materialised branch on one real-geometry
attention layer, through the sampler; (b) whole model stock vs patched: the engine's sweep on a
random-weight model of the family, from a scenario written next to the output."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mlatui.bench.attention_scenario import (
    AttentionModel,
    Sweep,
    _check_round_trip,
    scenario_toml,
)
from mlatui.commands.argtypes import (
    BIT_WIDTHS,
    add_force,
    add_overwrite,
    bit_width,
    end_status,
    int_at_least,
    int_list,
    positive_float,
    positive_int,
    progress_line,
)
from mlatui.config.model_inputs import PREFIX
from mlatui.config.scenario import DTYPE_NAMES, FILLS

HELP = "MLA attention: forced-branch sweep on one layer (a) and whole-model stock vs patched (b)"
DEFAULT_MAX_SECONDS = 110.0  # about two minutes on a 2-core CPU, both parts together


# ---- argument parsing: argparse types (mlatui/commands/argtypes.py), one-line errors, exit status 2 --


def add_dtype_bits(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--dtype",
        choices=DTYPE_NAMES,
        default=None,
        help="weights and activations (default: float32 on CPU, bfloat16 on GPU)",
    )
    parser.add_argument(
        "--bits",
        type=bit_width,
        default=None,
        metavar="N",
        help=f"quantise the weights to N bits ({', '.join(map(str, BIT_WIDTHS))}); default: not quantised",
    )


def add_family_source(parser: argparse.ArgumentParser, what: str) -> None:
    """--family, or a model's own config (--config FILE, --model FOLDER) for a family with no
    public full-size config."""
    parser.add_argument(
        "--family",
        help=f"MLA family {what}, e.g. glm4_moe_lite, deepseek_v3, glm5_next (mlx-vlm's as "
        "mlx-vlm:NAME; `mlatui thresholds --family x` lists them); optional with --config/--model",
    )
    own = parser.add_mutually_exclusive_group()
    own.add_argument("--config", metavar="FILE", help="the model's config.json (its geometry)")
    own.add_argument("--model", metavar="FOLDER", help="a model folder holding its config.json")


def resolve_family(args: argparse.Namespace) -> tuple[str, dict[str, Any] | None]:
    """(the family's name, the config given with --config/--model or None), checked in one line
    before anything loads: an unknown family, a config that is not that family's MLA model, a
    family with no public full-size config and none given."""
    from mlatui.commands.thresholds import read_config
    from mlatui.errors import UserError
    from mlatui.models.families import from_config, lookup, missing_full_config

    if args.config or args.model:
        config, where = read_config(
            argparse.Namespace(family=None, config=args.config, model=args.model)
        )
        try:
            given = from_config(args.family, config, where)
        except KeyError as e:
            raise UserError(e.args[0]) from None
        return given.name, config
    if not args.family:
        raise UserError("no model: give --family NAME, --config FILE or --model FOLDER")
    try:
        fam = lookup(args.family)
    except KeyError as e:
        raise UserError(e.args[0]) from None
    if args.size == "full" and not fam.has_full:
        raise UserError(missing_full_config(args.family))
    return fam.name, None


def configure(parser: argparse.ArgumentParser) -> None:
    _add_shape_arguments(parser)
    add_dtype_bits(parser)
    _add_part_b_arguments(parser)
    _add_output_arguments(parser)


def _add_shape_arguments(parser: argparse.ArgumentParser) -> None:
    """The family and the contexts and widths each part sweeps."""
    add_family_source(parser, "whose attention layer and model to build")
    parser.add_argument(
        "--contexts",
        type=int_list,
        default="1024,8192",
        help="cache lengths T (default 1024,8192)",
    )
    parser.add_argument(
        "--widths",
        type=int_list,
        default="1,2,3,4,8,16,32,64,128,256,512",
        help="query widths L for part (a) (default 1,2,3,4,8,...,512)",
    )
    parser.add_argument(
        "--model-widths",
        type=int_list,
        default="1,2,3,4",
        help="widths for part (b) (default 1,2,3,4; 1 always)",
    )


def _add_part_b_arguments(parser: argparse.ArgumentParser) -> None:
    """The whole model part (b) builds, and the rounds both parts take."""
    parser.add_argument(
        "--layers",
        type=positive_int,
        default=None,
        metavar="N",
        help="part (b): number of layers (default: the full model)",
    )
    parser.add_argument(
        "--fill",
        choices=FILLS,
        default="prefill",
        help="part (b): fill the caches by a prefill (default) or with random latents (timing only)",
    )
    parser.add_argument(
        "--reps",
        type=int_at_least(2, " (a round and its mirror)"),
        default="9",
        metavar="N",
        help="sampler rounds per context (each round: every width, A B B A per arm; odd counts "
        "round up to whole pairs); part (b): rounds before the L = 1 check decides (default 9)",
    )


def _add_output_arguments(parser: argparse.ArgumentParser) -> None:
    """Where the records go, which parts run and for how long."""
    parser.add_argument(
        "--out",
        metavar="FILE",
        help="write part (a)'s JSONL records (raw samples + env) here, streamed context by "
        "context; part (b)'s scenario and recording go next to it",
    )
    add_overwrite(parser, "--out file (and part (b)'s scenario and recording beside it)")
    add_force(parser)
    parser.add_argument("--part", choices=["a", "b", "both"], default="both")
    parser.add_argument(
        "--max-seconds",
        type=positive_float,
        default=DEFAULT_MAX_SECONDS,
        metavar="S",
        help=f"time limit (default {DEFAULT_MAX_SECONDS:g}; half each with --part both): part (a) "
        "stops between contexts' steps and lists the contexts it left; part (b) is fitted to its "
        "share as `bench SCENARIO --budget` fits a scenario",
    )
    parser.add_argument("--size", choices=["full", "tiny"], default="full", help=argparse.SUPPRESS)


def _check(args: argparse.Namespace) -> AttentionModel:
    """The family and what each part asks of it, refused in one line before anything loads."""
    from mlatui.errors import UserError

    name, config = resolve_family(args)
    part_b, contexts, reps = args.part in ("b", "both"), args.contexts, args.reps
    if part_b:
        if reps < 3:
            raise UserError(
                f"--reps: expected an integer >= 3 (part (b): the engine's sweep minimum), got {reps}",
                "use --part a for fewer rounds",
            )
        if min(contexts) < 16:
            raise UserError(f"--contexts: part (b) needs contexts >= 16, got {min(contexts)}")
    from mlatui.models.families import lookup
    from mlatui.models.loading import default_dtype

    if part_b and args.layers and lookup(name).runtime == "mlx-vlm":
        raise UserError(
            f"--layers: {name} is mlx-vlm's, built at its own layer pattern",
            "leave --layers out, or use --part a",
        )
    args.family = name
    return AttentionModel(name, args.size, args.dtype or default_dtype(), args.bits, config)


def part_b_blocker(args: argparse.Namespace, model: AttentionModel) -> str | None:
    """Why part (b) cannot run here, in one line (None: it can): a config TOML cannot say, a
    whole model past the device's memory."""
    from mlatui.errors import UserError

    try:
        b = part_b_scenario(args, model)
    except UserError as e:
        return e.args[0]
    if args.force:
        return None
    from mlatui.config.model_inputs import text_config
    from mlatui.models.fit import config_weights_lower_bound, estimate

    config = text_config(b.config)
    weights = config_weights_lower_bound(config, model.dtype, model.bits)
    fit = estimate(config, model.dtype, weights, max(args.contexts))
    if fit.fits:
        return None
    return f"part (b), the whole model, {fit.describe()}; --layers N builds fewer, --force tries anyway"


def run(args: argparse.Namespace) -> int:
    from mlatui.errors import UserError

    model = _check(args)
    part_a, part_b = args.part in ("a", "both"), args.part in ("b", "both")
    if part_a:
        refuse_unless_layer_fits(model, max(args.contexts), max(args.widths), args.force)
    skipped = part_b_blocker(args, model) if part_b else None
    if skipped is not None and not part_a:
        raise UserError(skipped, "use --part a for one layer")
    part_b = part_b and skipped is None
    out_a, scenario = _claim_outputs(args, model, part_a, part_b)

    from mlatui.measure.records import environment

    env = environment()
    _print_title(args, model, env)
    import time

    started = time.monotonic()
    share = args.max_seconds / 2 if part_a and part_b else args.max_seconds
    if part_a:
        status = _part_a(args, model, env, out_a, started + share)
        if status:
            return status
    if skipped is not None:
        print(f"## (b) whole model: skipped\n\n{skipped}; part (a) above ran alone\n")
    if scenario is not None:
        left = max(1, round(args.max_seconds - (time.monotonic() - started)))
        return _part_b(scenario, args.family, args.layers, args.force, left)
    return 0


def _claim_outputs(
    args: argparse.Namespace, model: AttentionModel, part_a: bool, part_b: bool
) -> tuple[Path | None, PartB | None]:
    """Part (a)'s records file and part (b)'s scenario and recording, created before anything
    runs. Outputs first (cheap checks), then part (b)'s scenario (imports mlx-lm); a refused
    scenario takes back the file claimed for part (a)."""
    from mlatui.config.outputs import claim_output
    from mlatui.errors import UserError

    out_a = claim_output(args.out, overwrite=args.overwrite) if part_a and args.out else None
    if not part_b:
        return out_a, None
    try:
        return out_a, claim_part_b(part_b_scenario(args, model), args)
    except UserError:
        if out_a is not None:
            out_a.unlink(missing_ok=True)
        raise


def _print_title(args: argparse.Namespace, model: AttentionModel, env: dict[str, Any]) -> None:
    from mlatui.views.mdtable import env_line

    part_a, part_b, reps = args.part in ("a", "both"), args.part in ("b", "both"), args.reps
    rounds = f"(a): {reps + reps % 2} rounds per context" if part_a else ""
    if part_b:
        rounds += f"{'; ' if rounds else ''}(b): {reps} to {3 * reps} rounds per context"
    print(f"# bench attention: {args.family} ({model.describe()}; {rounds})\n{env_line(env)}\n")


def refuse_unless_layer_fits(
    model: AttentionModel, context: int, width: int, force: bool, widths_flag: str = "--widths"
) -> None:
    """One attention layer at the largest context and width, against the device's memory (MLX
    dies with signal 11 where it cannot allocate): refused before anything is built."""
    from mlatui.config.model_inputs import text_config
    from mlatui.models.fit import forced_layer_estimate, refuse_unless_fits

    config = text_config(model.layer_config())
    refuse_unless_fits(
        forced_layer_estimate(config, model.dtype, model.bits, context, width),
        force,
        f"use smaller --contexts or {widths_flag}, or --force to try anyway",
    )


def _part_a(
    args: argparse.Namespace,
    model: AttentionModel,
    env: dict[str, Any],
    out: Path | None,
    deadline: float,
) -> int:
    """Part (a); its records stream to `out` context by context. 0, or the status to exit with
    (a stop signal, a failed write). Past `deadline` (monotonic) it stops between steps: the
    contexts done are reported, the others listed as left out."""
    import threading

    from mlatui.bench import attention as attnbench
    from mlatui.config.outputs import JsonlSink
    from mlatui.host.signals import StopOnSignals, raise_if_set

    contexts, widths = args.contexts, args.widths
    stop = threading.Event()
    sink = JsonlSink(out) if out else None
    with StopOnSignals(stop) as signals:
        hooks = attnbench.SweepHooks(
            progress_line,
            sink.write_records if sink else lambda records: None,
            within(raise_if_set(stop), deadline),
        )
        records = attnbench.forced_sweep(model, contexts, widths, args.reps, env, hooks)
    if sink is not None:
        sink.close()
    from mlatui.views.bench_report import attention_report, forced_summary

    summary = forced_summary(records)
    print(attention_report(summary, widths))
    if sink is not None:
        print(f"{len(records)} records written to {out}\n")
    done = f" after {len(summary)} of {len(contexts)} contexts; the table holds the completed ones"
    status = end_status(signals, done, sink.error if sink else None)
    if status is not None:
        return status
    left = [c for c in contexts if c not in summary]
    if left:
        print(
            f"time limit {args.max_seconds:g} s: part (a) left T={', '.join(map(str, left))} "
            "unmeasured (raise --max-seconds, or pass fewer --contexts or --widths)\n"
        )
    return 0


def within(check_stop, deadline: float):
    """`check_stop`, and Interrupted once the monotonic clock passes `deadline`."""
    import time

    from mlatui.host.signals import Interrupted

    def check() -> None:
        check_stop()
        if time.monotonic() > deadline:
            raise Interrupted("time limit")

    return check


@dataclass(frozen=True)
class PartB:
    text: str  # the scenario TOML
    config: dict[str, Any]  # the model config it holds
    scenario_path: Path | None  # None until claimed (default names)
    record: Path | None


def part_b_scenario(args: argparse.Namespace, model: AttentionModel) -> PartB:
    """The scenario of part (b) and where it and its recording go, checked (nothing written)."""
    import tomllib

    sweep = Sweep(args.contexts, args.model_widths, args.reps)
    text, config = scenario_toml(model, args.layers, args.fill, sweep)
    if not config["model_type"].startswith(PREFIX):  # mlx-vlm's config classes are its own
        _check_round_trip(args.family, config, tomllib.loads(text)["model"]["config"])
    scenario_path: Path | None
    record: Path | None
    if args.out:
        where = Path(args.out).resolve().parent
        scenario_path = where / f"attention-{args.family}.toml"
        record = where / f"attention-{args.family}.events.jsonl"
    else:  # new, unique names when claimed
        scenario_path, record = None, None
    return PartB(text, config, scenario_path, record)


def claim_part_b(b: PartB, args) -> PartB:
    """Part (b) with its scenario and recording files created (refused: one line, before any
    run)."""
    from mlatui.config.outputs import claim_output, new_record_path

    if b.record is not None and b.scenario_path is not None:
        claim_output(b.scenario_path, overwrite=args.overwrite, flag="part (b)'s scenario")
        claim_output(b.record, overwrite=args.overwrite, flag="part (b)'s recording")
        return b
    record = new_record_path(f"attention-{args.family}")
    scenario_path = claim_output(record.with_suffix(".toml"), flag="part (b)'s scenario")
    return dataclasses.replace(b, scenario_path=scenario_path, record=record)


def _part_b(
    b: PartB, family_name: str, layers: int | None, force: bool = False, budget_s: int = 0
) -> int:
    """Write the (claimed) scenario, then run it exactly as `mlatui bench SCENARIO.toml
    --random-weights` does (same parser, same engine run, recorder, printers and exit codes)."""
    from mlatui.commands import bench_scenario
    from mlatui.config.scenario import load_scenario

    assert b.scenario_path is not None and b.record is not None

    b.scenario_path.parent.mkdir(parents=True, exist_ok=True)
    b.scenario_path.write_text(b.text, encoding="utf-8")
    load_scenario(b.scenario_path)  # a ScenarioError is the command line's one-line bad input

    layers_shown = f"{layers} layer(s)" if layers else "all layers"
    print(
        f"## (b) whole model ({layers_shown}), stock vs patched: the engine's sweep "
        "(more rounds while the L = 1 check is inconclusive)\n\n"
        f"scenario: {b.scenario_path}\nrecording: {b.record}\n"
        f"rerun: mlatui bench {b.scenario_path} --random-weights\n",
        flush=True,
    )
    from mlatui.commands.argtypes import OneLineParser

    parser = OneLineParser(prog="mlatui bench", description=bench_scenario.HELP)
    bench_scenario.configure(parser)
    # the (empty) recording claimed up front is handed over (no --overwrite needed); --force
    # (past the memory estimate) only when the user gave it
    b.record.unlink(missing_ok=True)
    argv = [str(b.scenario_path), "--random-weights", "--out", str(b.record)]
    argv += ["--budget", str(budget_s)] if budget_s else []
    status = bench_scenario.run(parser.parse_args(argv + (["--force"] if force else [])))
    print(f"scenario: {b.scenario_path}\nrecording: {b.record}")
    if status == 1 and _gathermm_failed(b.record):
        print(
            f"mlatui: hint: MLX on the CPU runs MoE experts that are not quantised in float32 only "
            f"(GatherMM); use --dtype float32 for {family_name} here (bf16 works on Metal and CUDA)",
            file=sys.stderr,
        )
    return status


def _gathermm_failed(record: Path) -> bool:
    from mlatui.stream.events import ErrorEvent
    from mlatui.stream.recorder import RecordingError, read_recording

    try:
        events = read_recording(record).events
    except (OSError, RecordingError):
        return False
    return any(isinstance(e, ErrorEvent) and "GatherMM" in e.message for e in events)
