"""`mlatui bench SCENARIO.toml`: run a scenario headless; tables on stdout, events to JSONL."""

from __future__ import annotations

import argparse
import sys
import threading
from typing import Any

from mlatui.commands.argtypes import (
    add_expect,
    add_force,
    add_gate_options,
    add_overwrite,
    check_expectations,
    int_at_least,
    int_list,
    non_negative_int,
    print_summary,
    resolve_request,
)
from mlatui.errors import ExitStatus, shell_path
from mlatui.stream.events import BudgetOutcome, ErrorEvent, Event
from mlatui.stream.phrases import check_not_passed

HELP = "run a scenario without the UI: medians and spread on stdout, every event recorded to JSONL"


def configure(parser: argparse.ArgumentParser) -> None:
    _add_input_output_arguments(parser)
    add_gate_options(parser)
    _add_harness_arguments(parser)
    _add_override_arguments(parser)


def _add_input_output_arguments(parser: argparse.ArgumentParser) -> None:
    """The scenario, the models that replace its own, and where the recording and tables go."""
    parser.add_argument("scenario", help="scenario TOML (e.g. scenarios/default.toml)")
    parser.add_argument(
        "--model", help="local mlx-lm folder or hub id (default: the scenario's model)"
    )
    parser.add_argument("--draft-model", help="local mlx-lm folder or hub id of a draft model")
    parser.add_argument(
        "--out", help="JSONL recording (default: a new file in the user's data dir)"
    )
    add_overwrite(parser)
    add_force(parser)
    parser.add_argument(
        "--format",
        choices=("md", "csv", "json"),
        default="md",
        help="the summary on stdout as markdown (default), CSV rows, or one JSON document "
        "(header, rows with their CIs, checks, verdict; mlatui/views/summary_doc.py)",
    )
    add_expect(parser)
    parser.add_argument(
        "--random-weights",
        action="store_true",
        help="build the scenario's model from its config values with random weights (timing only; acceptance is synthetic)",
    )


def _add_harness_arguments(parser: argparse.ArgumentParser) -> None:
    """How the arms take turns: a smoke run, threads, settle steps."""
    parser.add_argument("--quick", action="store_true", help="3 reps, 8 decode tokens: a smoke run")
    parser.add_argument(
        "--reps",
        type=int_at_least(3, " (rounds before the L = 1 check may decide)"),
        help="override every phase's reps",
    )
    parser.add_argument(
        "--tokens", type=int_at_least(4), help="override every decode/tune phase's token count"
    )
    parser.add_argument(
        "--arm-threads",
        choices=("shared", "per-arm"),
        default="shared",
        help="shared (default): both arms take turns on one worker thread and MLX stream; "
        "per-arm: a thread (and stream) each, the diagnostic that showed a slot bias on GPUs",
    )
    parser.add_argument(
        "--no-settle",
        action="store_true",
        help="diagnostic: no untimed settle steps before each quad (shows the carry-over bias)",
    )


def _add_override_arguments(parser: argparse.ArgumentParser) -> None:
    """What of the scenario's phases runs: contexts, widths, rounds, phases, budget, seed; or
    only the plan."""
    parser.add_argument(
        "--contexts",
        type=int_list,
        help="override every phase's contexts, e.g. 2048,8192,16k (tokens)",
    )
    parser.add_argument(
        "--widths", type=int_list, help="override every sweep/indexer phase's widths, e.g. 1,2,4"
    )
    parser.add_argument(
        "--max-rounds",
        type=int_at_least(2),
        help="override every phase's round limit (inconclusive checks)",
    )
    parser.add_argument("--phases", help="comma-separated phase names to run (default: all)")
    parser.add_argument(
        "--budget",
        "--max-seconds",
        dest="budget",
        type=non_negative_int,
        default=0,
        metavar="S",
        help="fit the scenario to S seconds, as launch does with the scenario's budget_s "
        "(default 0: bench runs the scenario in full)",
    )
    parser.add_argument("--seed", type=non_negative_int, default=0)
    parser.add_argument(
        "--plan",
        action="store_true",
        help="print the run's resolved plan (phases after these flags, arms, budget, seeds) and "
        "exit without loading a model; --format json gives it as JSON",
    )


def run(args: argparse.Namespace) -> int:
    plan = build_plan(args)  # every check, before mlx is imported
    if args.plan:
        from mlatui.views.run_meta import print_plan

        return print_plan(plan, args.format)
    from mlatui.host.distributed import launch_rank, launched

    rank = launch_rank() if launched() else 0
    stop = threading.Event()
    if rank:  # only rank 0 records
        return _follower(plan, rank, stop)
    from dataclasses import replace

    from mlatui.config.outputs import claim_output, new_record_path

    # the output last: a refused argument leaves no empty file behind
    out = claim_output(args.out, overwrite=args.overwrite) if args.out else new_record_path("bench")
    return _record(args, replace(plan, record=str(out)), out, stop)


def overrides_of(args: argparse.Namespace) -> dict[str, Any]:
    """The quick-run overrides the flags ask for (config.run_plan.apply_overrides applies them)."""
    overrides: dict[str, Any] = {"reps": 3, "tokens": 8, "warmup": 1} if args.quick else {}
    if args.reps:
        overrides["reps"] = args.reps
    if args.tokens:
        overrides["tokens"] = args.tokens
    if args.contexts:
        overrides["contexts"] = args.contexts
    if args.widths:
        overrides["widths"] = sorted({1, *args.widths})  # the L = 1 control is never optional
    if args.max_rounds is not None:
        overrides["max_rounds"] = args.max_rounds
    if args.phases:
        overrides["only_phases"] = [p.strip() for p in args.phases.split(",") if p.strip()]
    return overrides


def build_plan(args: argparse.Namespace):
    """The run's plan from the flags and the scenario, read once (every check, before anything
    loads)."""
    _config, plan = resolve_request(
        args,
        seed=args.seed,
        shared_arm_thread=args.arm_threads == "shared",
        overrides=overrides_of(args),
        settle=not args.no_settle,
    )
    return plan


def _record(args: argparse.Namespace, plan, out, stop: threading.Event) -> int:
    """Rank 0: the engine's events to the recording, the progress on stderr, then the tables."""
    from mlatui.host.signals import StopOnSignals
    from mlatui.run.engine import run as run_engine  # imports mlx: after every check
    from mlatui.stream.recorder import Recorder, tee
    from mlatui.views.progress_view import StderrProgress

    events: list[Event] = []
    progress = StderrProgress()

    def recording_failed(message: str) -> None:
        print(f"[mlatui] error: {message}", file=progress.stream, flush=True)

    with (
        Recorder(out, on_error=recording_failed) as recorder,
        StopOnSignals(stop) as signals,
    ):
        try:
            status = run_engine(plan, tee(recorder, events.append, progress), stop)
        except KeyboardInterrupt:
            stop.set()
            status = "interrupted"
        # still inside the handlers: under mlx.launch a dead rank makes the launcher SIGTERM the
        # others, and rank 0 must live to print its one-line error (the default action killed it
        # while it printed the summary)
        return _report(args, events, out, recorder, signals, status)


def _report(args, events, out, recorder, signals, status) -> int:
    """The tables on stdout, the recording's path and the one-line outcome on stderr; with
    --expect, its lines and the status they decide once the run completed."""
    from mlatui.views.summary import summarize_events

    summary = summarize_events(events)
    expected, expect_status = check_expectations(summary, args.expect)
    print_summary(summary, args.format, expected)
    outcome = _outcome(events, out, recorder, signals, status)
    if expect_status is not None and outcome in (ExitStatus.OK, ExitStatus.INVALID_CHECK):
        return expect_status
    return outcome


def _outcome(events, out, recorder, signals, status) -> int:
    from mlatui.errors import error_line
    from mlatui.views.summary import invalid_contexts

    print(f"[mlatui] recording: {shell_path(out)}", file=sys.stderr)
    budget = next((e for e in events if isinstance(e, BudgetOutcome)), None)
    if budget is not None:
        from mlatui.run.budget import outcome_text

        print(f"[mlatui] {outcome_text(budget)}", file=sys.stderr)
    if signals.received is not None:
        print(f"[mlatui] stopped by {signals.stopped_by.name}", file=sys.stderr)
    errors = [e for e in events if isinstance(e, ErrorEvent)]
    if errors or recorder.error:
        if errors:
            print(
                error_line(f"{errors[0].message} — the recording {out} keeps what ran"),
                file=sys.stderr,
            )
        if recorder.error:
            print(error_line(recorder.error), file=sys.stderr)
        return ExitStatus.USAGE if errors and errors[0].refused else ExitStatus.FAILED
    bad = invalid_contexts(events)
    if bad:
        where = [f"{phase} @ {ctx} {outcome} ({diff:+.1f}%)" for phase, ctx, diff, outcome in bad]
        from mlatui.views.run_meta import PATCH_QUESTION, is_patch_review

        header = next((e for e in events if e.type == "header"), None)
        review = header is not None and is_patch_review(header.settings)
        print(
            f"mlatui: {check_not_passed(where)}"
            + (f" ({PATCH_QUESTION} invalid: it does; inconclusive: undecided)" if review else ""),
            file=sys.stderr,
        )
        return ExitStatus.INVALID_CHECK
    if status == "completed":
        return ExitStatus.OK
    return signals.exit_status or ExitStatus.INTERRUPTED


def _follower(plan, rank: int, stop: threading.Event) -> int:
    """A rank other than 0 under mlx.launch: the same schedule, no recording and no tables
    (rank 0 has them); only its warnings and errors, on stderr, named by rank."""
    from mlatui.errors import ExitStatus, error_line
    from mlatui.host.signals import StopOnSignals
    from mlatui.run.engine import run as run_engine

    errors: list[str] = []

    def sink(event) -> None:
        if event.type == "error":
            errors.append(event.message)
        elif event.type == "log" and event.level in ("warning", "error"):
            print(f"[mlatui rank {rank}] {event.level}: {event.message}", file=sys.stderr)

    with StopOnSignals(stop, announce=False) as signals:
        status = run_engine(plan, sink, stop)
    if errors:
        message = errors[0] if errors[0].startswith("rank ") else f"rank {rank}: {errors[0]}"
        print(error_line(message), file=sys.stderr)
        return ExitStatus.FAILED
    if status == "completed":
        return ExitStatus.OK
    return signals.exit_status or ExitStatus.INTERRUPTED
