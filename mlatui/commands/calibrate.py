"""`mlatui calibrate`: measure the absorbed/materialised crossover on this device and store it."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from mlatui.bench.attention_scenario import AttentionModel
from mlatui.commands.argtypes import add_force, add_overwrite, end_status, progress_line

CACHE_HINT = "point XDG_CACHE_HOME (or MLATUI_CACHE_DIR) at a writable folder"
HELP = "measure the MLA absorbed/materialised crossover on this device (used by threshold='calibrated')"


def configure(parser: argparse.ArgumentParser) -> None:
    from mlatui.commands.argtypes import int_at_least, int_list
    from mlatui.commands.bench_attention import add_dtype_bits, add_family_source

    add_family_source(parser, "whose attention geometry to calibrate")
    parser.add_argument(
        "--contexts",
        type=int_list,
        default="1024,4096,16384",
        help="cache lengths (default 1024,4096,16384)",
    )
    parser.add_argument(
        "--max-width",
        type=int_at_least(2),
        default="2048",
        metavar="N",
        help="largest width searched (default 2048)",
    )
    parser.add_argument(
        "--reps",
        type=int_at_least(2, " (a round and its mirror)"),
        default="6",
        metavar="N",
        help="sampler rounds per probe (each round: one A B B A quad of the two branches; odd "
        "counts round up to whole pairs; default 6)",
    )
    add_dtype_bits(parser)
    parser.add_argument(
        "--out",
        metavar="FILE",
        help="every probe as a JSON line, streamed as measured (default: a new file in the "
        "user's data dir)",
    )
    add_overwrite(parser)
    add_force(parser)
    parser.add_argument("--size", choices=["full", "tiny"], default="full", help=argparse.SUPPRESS)


def _checked_model(args: argparse.Namespace) -> AttentionModel:
    """The family (or the model's own config), its size and the layer's memory checked before
    anything is built: the layer to probe. `args.family` is set."""
    from mlatui.commands.bench_attention import refuse_unless_layer_fits, resolve_family
    from mlatui.models.loading import default_dtype

    args.family, own_config = resolve_family(args)
    dtype = args.dtype or default_dtype()
    model = AttentionModel(args.family, args.size, dtype, args.bits, own_config)
    refuse_unless_layer_fits(model, max(args.contexts), args.max_width, args.force, "--max-width")
    return model


def run(args: argparse.Namespace) -> int:
    model = _checked_model(args)
    contexts, reps = args.contexts, args.reps
    import threading

    from mlatui import store as calibration
    from mlatui.config.outputs import JsonlSink, claim_output, ensure_folder, new_record_path
    from mlatui.errors import ExitStatus, error_line
    from mlatui.host.signals import StopOnSignals
    from mlatui.measure.records import environment
    from mlatui.views.bench_report import calibrate_report
    from mlatui.views.mdtable import env_line

    env = environment()
    print(
        f"# calibrate {args.family} ({model.describe()}, {reps + reps % 2} rounds per probe): "
        f"{env_line(env)}"
    )
    store = calibration.calibration_path(env)
    ensure_folder(store.parent, "the calibration store", CACHE_HINT)  # before any probe
    out = (
        claim_output(args.out, overwrite=args.overwrite)
        if args.out
        else new_record_path("calibrate")
    )
    stop = threading.Event()
    with JsonlSink(out) as sink, StopOnSignals(stop) as signals:
        geometry, crossovers, lines = _probe(model, args, sink, stop)
    print(f"probes: {out}")
    if sink.error:
        print(error_line(sink.error), file=sys.stderr)
        return ExitStatus.FAILED
    if not crossovers and signals.received is not None:
        return _stopped_status(
            signals, f"before a context completed; nothing stored (the probes done are in {out})"
        )
    print(calibrate_report(lines), end="")
    stored = _store(model, reps, geometry, crossovers, env, store)
    if stored is not None:
        return stored
    return _stopped_status(
        signals, f"stored the {len(crossovers)} of {len(contexts)} contexts completed"
    )


def _probe(model: AttentionModel, args: argparse.Namespace, sink, stop) -> tuple[Any, dict, list]:
    """The crossover search; each probe and each context's crossover is written to `sink` as it
    is measured and kept in the lines returned (the table is printed from them, as `replay
    --dump` prints it from the file)."""
    from mlatui.bench import attention
    from mlatui.host.signals import raise_if_set

    reps = args.reps
    settings = dict(family=model.family, dtype=model.dtype, bits=model.bits, rounds=reps + reps % 2)
    settings["max_width"] = args.max_width
    lines: list[dict] = []

    def record(line: dict) -> None:
        lines.append(line)
        sink.write(line)

    hooks = attention.CalibrateHooks(
        progress_line,
        lambda context, probe: record(probe_line(context, probe, settings)),
        raise_if_set(stop),
    )
    geometry, crossovers, _ = attention.calibrate(model, args.contexts, reps, args.max_width, hooks)
    where = {"geometry": geometry.key, "heads": geometry.num_heads}
    for t, w in crossovers.items():
        record({"type": "crossover", "context": t, "max_absorbed": w, **where, **settings})
    return geometry, crossovers, lines


def _store(model: AttentionModel, reps: int, geometry, crossovers: dict, env: dict, store):
    """Keep the crossovers for this device; None when stored, else the exit status."""
    from mlatui import store as calibration
    from mlatui.errors import ExitStatus, error_line

    probed = calibration.ProbedIn(model.dtype, model.bits, reps + reps % 2)
    try:
        path = calibration.save_crossovers(geometry, crossovers, model.family, env, probed)
    except OSError as e:
        print(
            error_line(f"cannot store the calibration in {store} ({e.strerror}) — {CACHE_HINT}"),
            file=sys.stderr,
        )
        return ExitStatus.FAILED
    quantised = f"{model.bits}-bit" if model.bits else "unquantised"
    print(
        f"stored for {geometry.key} ({model.dtype}, {quantised}) on "
        f"{calibration.device_key(env)}: {path}"
    )
    return None


def _stopped_status(signals, what: str) -> int:
    """0 for a run no signal stopped; else says what the stop left, and its exit status."""
    return end_status(signals, (" " if what.startswith("before") else ": ") + what) or 0


def probe_line(context: int, probe, settings: dict) -> dict:
    from mlatui.measure.records import interval_dict

    return {
        "type": "probe",
        "context": context,
        "width": probe.width,
        "absorbed_ms": interval_dict(probe.absorbed),
        "materialised_ms": interval_dict(probe.materialised),
        "ratio_absorbed_over_materialised": interval_dict(probe.ratio),
        "absorbed_faster": probe.faster,
        **settings,
    }
