"""`mlatui bench observer`: measures whether watching a run (the dashboard) changes its figures.

Runs one plan headless, under the dashboard in-process (LiveSource), and under the dashboard
with the engine in a child process (ProcessSource), in rounds (H T I H T I ...): the first run
fits the scenario to its share of the time limit, every later run runs the phases it fitted. It
compares median and p95 verify ms per arm, and the spread of the L = 1 quad ratios, against
headless. The dashboard runs Textual's headless driver:
the compositor renders every tick as in a terminal, only the final write to the tty is skipped.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from mlatui.commands.argtypes import (
    add_force,
    add_overwrite,
    end_status,
    positive_float,
    positive_int,
)
from mlatui.measure.records import percentile
from mlatui.stream.event_base import Interval
from mlatui.views.bench_report import observer_table

HELP = "observer effect: the scenario headless vs under the dashboard (in-process and isolated)"
MODES = ("headless", "tui", "isolated")
DEFAULT_MAX_SECONDS = 110.0  # about two minutes on a 2-core CPU, model loads aside


def configure(parser: argparse.ArgumentParser) -> None:
    from mlatui.config.outputs import name_pattern

    parser.add_argument(
        "--scenario", default=None, help="scenario TOML (default: scenarios/default.toml)"
    )
    parser.add_argument("--model", default=None)
    parser.add_argument("--random-weights", action="store_true")
    parser.add_argument("--rounds", type=positive_int, default=2, help="H/T/I rounds (default 2)")
    parser.add_argument(
        "--max-seconds",
        type=positive_float,
        default=DEFAULT_MAX_SECONDS,
        metavar="S",
        help=f"time limit (default {DEFAULT_MAX_SECONDS:g}): each run is fitted to its share (as "
        "launch fits a scenario to its budget), and no new round of the three modes starts past "
        "it; the rounds left are said",
    )
    parser.add_argument("--ui-hz", type=positive_float, default=4.0)
    parser.add_argument(
        "--out",
        default=None,
        help="per-mode results as JSONL, streamed run by run (default: a new "
        f"{name_pattern('observer')} here)",
    )
    add_overwrite(parser)
    add_force(parser)


def verify_samples(events) -> dict[str, list[float]]:
    """Verify-shaped forwards per arm: the sweep steps with L >= 2."""
    out: dict[str, list[float]] = {}
    for e in events:
        if e.type == "step" and e.width >= 2:
            out.setdefault(e.arm, []).append(e.ms)
    return out


def l1_quad_ratios(events) -> list[list[float]]:
    """Every complete L = 1 quad's stock/patched sum ratio, a list per round of each context:
    the samples the L = 1 check's CI comes from, so their spread is what an observer costs a
    verdict (a round's quads share its moment on the device, so rounds are resampled whole)."""
    from mlatui.measure.estimates import Timing, quad_ratios

    by_round: dict[tuple[str, int, int], list[Timing]] = {}
    for e in events:
        if e.type == "step" and e.width == 1:
            key = (e.phase, e.context, e.rep)
            by_round.setdefault(key, []).append(Timing(e.rep, 1, e.arm, e.ms))
    rounds = (quad_ratios(timings) for timings in by_round.values())
    return [r for r in rounds if r]


def run_mode(mode: str, plan, ui_hz: float, record: str, stop, current: list) -> list:
    """One run of `plan` in `mode`; `stop` ends a headless run after its step, and the app
    running a dashboard mode is kept in `current` (a signal asks it to exit)."""
    from mlatui.stream.sources import LiveSource, ProcessSource

    if mode == "headless":
        from mlatui.run.engine import run
        from mlatui.stream.recorder import Recorder

        events: list = []
        with Recorder(record) as rec:

            def emit(e) -> None:
                rec(e)
                events.append(e)

            run(plan, emit, stop)
        return events
    from mlatui.widgets.app import MlatuiApp

    source = (
        LiveSource(plan, record=record) if mode == "tui" else ProcessSource(plan, record=record)
    )
    app = MlatuiApp(source, ui_hz=ui_hz, exit_when_done=True)
    current[:] = [app]
    try:
        app.run(headless=True, size=(160, 50))
    finally:
        current.clear()
        source.stop()
    if app.unexpected is not None:
        raise app.unexpected
    return app.events


def _recorded(path, fallback: list) -> list:
    from mlatui.stream.recorder import RecordingError, read_recording

    try:
        return read_recording(path).events
    except (OSError, RecordingError):
        return fallback


def _completed(events) -> bool:
    return bool(events) and events[-1].type == "run_end" and events[-1].status == "completed"


def run(args: argparse.Namespace) -> int:
    import tempfile
    import threading

    from mlatui.commands.launch import _exit_app
    from mlatui.config.outputs import JsonlSink, claim_output, new_record_path
    from mlatui.host.signals import StopOnSignals

    plan = _first_plan(args)  # a bad file: one line, before anything loads
    out = (
        claim_output(args.out, overwrite=args.overwrite)
        if args.out
        else new_record_path("observer", Path.cwd())
    )
    tmp = Path(tempfile.mkdtemp(prefix="mlatui-observer-"))
    stop = threading.Event()
    current: list = []

    def on_first(sig) -> None:
        for app in list(current):
            threading.Thread(target=_exit_app, args=(app, sig.exit_status), daemon=True).start()

    with JsonlSink(out) as sink, StopOnSignals(stop, on_first=on_first) as signals:
        samples, l1_quads = _measure(args, plan, _Run(sink, signals, stop, current, tmp))
        rows = summary_rows(samples, l1_quads, args.ui_hz)
        if signals.received is None:
            for row in rows:
                sink.write(row)
    print(observer_table(rows))
    print(f"\nper-mode samples: {out}; recordings: {tmp}")
    return end_status(signals, f"; the completed mode runs are in {out}", sink.error) or 0


def _first_plan(args: argparse.Namespace):
    """The first run's plan, resolved here so that bad input (the file, its phases) is refused
    before anything loads: fitted to a run's share of the time limit by that run's probe, and
    then run as fitted in every mode (`one_plan`)."""
    from mlatui.config.run_plan import RunConfig, resolve_plan
    from mlatui.config.scenario import load_scenario

    scenario = load_scenario(args.scenario)
    config = RunConfig(
        model=args.model,
        scenario=args.scenario,
        random_weights=args.random_weights,
        budget_s=args.max_seconds / (args.rounds * len(MODES)),
        force=args.force,
    )
    return resolve_plan(config, scenario)


def one_plan(plan, events) -> tuple[Any, frozenset[str]]:
    """The plan every later mode run runs: the phases the first run's budget fitted, each for
    exactly as many rounds as the first run gave it (no budget: no probe picks other contexts,
    no sampler stops sooner or later, for another mode); and the names of those phases, the only
    ones whose steps are compared (a budget's last rounds, `more`, are not)."""
    import dataclasses

    fitted = _fitted(plan, events)
    done: dict[str, int] = {}
    for e in events:
        if e.type == "step" or e.type == "decode_block":
            index = e.rep if e.type == "step" else e.round
            done[e.phase] = max(done.get(e.phase, 0), index + 1)
    started = {e.phase for e in events if e.type == "phase_start"} | set(done)
    if started:  # a phase the budget dropped at a re-plan did not run: no later run runs it
        fitted = [p for p in fitted if p.name in started]
    fixed = []
    for p in fitted:
        rounds = max(2, done.get(p.name, p.reps))
        rounds += rounds % 2  # rounds come in mirrored pairs
        fixed.append(msgspec.structs.replace(p, reps=rounds, max_rounds=rounds))
    return (
        dataclasses.replace(plan.with_phases(tuple(fixed)), budget_s=0.0),
        frozenset(p.name for p in fitted),
    )


def _fitted(plan, events) -> list:
    """The phases as the first run ran them: its budget's first fit, each phase the budget
    planned again at a phase boundary (BudgetPlanned again: the phases left, scaled down) as
    planned last; the plan's own without a budget."""
    planned = [e.phases for e in events if e.type == "budget_planned"]
    if not planned:
        return list(plan.phases)
    last = {p.name: p for phases in planned for p in phases}
    return [last[p.name] for p in planned[0]]


def first_rounds(plan, events) -> tuple[Any, dict[tuple[str, int], int]]:
    """`one_plan`, and the rounds the first run measured at each context of its phases: every
    mode run's steps are compared up to them, so every mode weighs each context alike (the
    fixed plan gives every context of a phase the most rounds one of them took)."""
    fixed, names = one_plan(plan, events)
    rounds: dict[tuple[str, int], int] = {}
    for e in events:
        if e.type == "step" and e.phase in names:
            rounds[(e.phase, e.context)] = max(rounds.get((e.phase, e.context), 0), e.rep + 1)
    return fixed, rounds


def compared_steps(events, rounds: dict[tuple[str, int], int]) -> list:
    """The steps of the first run's phases and contexts, in the rounds it measured there."""
    return [e for e in events if e.type == "step" and e.rep < rounds.get((e.phase, e.context), 0)]


@dataclass
class _Run:
    """Where the mode runs write (the samples file, the recordings' folder) and what stops them."""

    sink: Any
    signals: Any
    stop: Any
    current: list
    tmp: Path


def _measure(
    args: argparse.Namespace, plan, where: _Run
) -> tuple[dict[str, dict[str, list[float]]], dict[str, list[list[float]]]]:
    """Every mode once per round, in whole rounds while the time limit allows (the modes stay
    paired); each mode run's samples written as they come. Returns mode -> arm -> verify ms, and
    mode -> L = 1 quad ratios by round."""
    import time

    from mlatui.errors import UserError

    deadline = time.monotonic() + args.max_seconds
    samples: dict[str, dict[str, list[float]]] = {m: {} for m in MODES}
    l1_quads: dict[str, list[list[float]]] = {m: [] for m in MODES}
    signals = where.signals
    compared: dict[tuple[str, int], int] | None = None  # the first run's rounds per context
    for r in range(args.rounds):
        if r and time.monotonic() > deadline:  # whole rounds only: the modes stay paired
            print(
                f"time limit {args.max_seconds:g} s: rounds {r + 1}-{args.rounds} not run "
                "(raise --max-seconds)",
                flush=True,
            )
            break
        for mode in MODES:
            record = where.tmp / f"{mode}-{r}.jsonl"
            events = run_mode(mode, plan, args.ui_hz, str(record), where.stop, where.current)
            if compared is None:
                plan, compared = first_rounds(plan, events)
            stopped = signals.received is not None
            if stopped:  # the recording has every step, the dashboard only what it drew
                events = _recorded(record, events)
            if not stopped and not _completed(events):
                why = next((e.message for e in events if e.type == "error"), "")
                raise UserError(
                    f"{mode} run did not complete" + (f": {why}" if why else ""),
                    f"see {record}",
                )
            steps = compared_steps(events, compared)
            measured, quads = verify_samples(steps), l1_quad_ratios(steps)
            where.sink.write(
                {
                    "type": "mode_run",
                    "round": r,
                    "mode": mode,
                    "completed": not stopped,  # a stopped run: the steps it measured
                    "ui_hz": args.ui_hz,
                    "recording": str(record),
                    "samples_ms": measured,
                    "l1_quad_ratios": quads,
                }
            )
            if stopped:
                break
            for arm, xs in measured.items():
                samples[mode].setdefault(arm, []).extend(xs)
            l1_quads[mode].extend(quads)
            print(f"round {r + 1}/{args.rounds}: {mode} done", flush=True)
        if signals.received is not None:
            break
    return samples, l1_quads


def summary_rows(
    samples: dict[str, dict[str, list[float]]], l1_quads: dict[str, list[list[float]]], ui_hz: float
) -> list[dict]:
    """Per mode and arm: the median and p95 verify ms, and their ratio to the headless run's;
    per mode, the spread of its L = 1 quad ratios against the headless runs'."""
    import statistics

    rows = []
    for mode in MODES:
        for arm, xs in sorted(samples[mode].items()):
            base = samples["headless"].get(arm) or xs
            med, p95 = statistics.median(xs), percentile(xs, 95)
            rows.append(
                {
                    "type": "summary",
                    "mode": mode,
                    "arm": arm,
                    "n": len(xs),
                    "median_ms": med,
                    "p95_ms": p95,
                    "median_ratio": med / statistics.median(base),
                    "p95_ratio": p95 / percentile(base, 95),
                    "ui_hz": ui_hz,
                    "samples_ms": xs,
                }
            )
    for mode in MODES:
        rounds = l1_quads[mode]
        if (spread := quad_spread_pct(rounds)) is not None:
            vs = spread_ratio(rounds, l1_quads["headless"])
            rows.append(
                {
                    "type": "l1_spread",
                    "mode": mode,
                    "quads": sum(len(r) for r in rounds),
                    "spread_pct": spread,
                    "spread_ratio": None if vs is None else msgspec.to_builtins(vs),
                    "ui_hz": ui_hz,
                }
            )
    return rows


def spread_ratio(
    rounds: list[list[float]], base: list[list[float]], resamples: int = 1000
) -> Interval | None:
    """The spread of `rounds`' quads over `base`'s, with a 95% percentile bootstrap (each set's
    rounds resampled whole, on their own, seeded); None when either has under four quads, no
    spread, or no resample of `base` with a spread."""
    import random

    spread, base_spread = quad_spread_pct(rounds), quad_spread_pct(base)
    if spread is None or not base_spread:
        return None
    rng = random.Random(0)
    draws = []
    for _ in range(resamples):
        b = _spread_pct(rng.choices(base, k=len(base)))
        if b:
            draws.append(_spread_pct(rng.choices(rounds, k=len(rounds))) / b)
    if not draws:
        return None
    draws.sort()
    low, high = draws[int(0.025 * (len(draws) - 1))], draws[math.ceil(0.975 * (len(draws) - 1))]
    return Interval(spread / base_spread, low, high, sum(len(r) for r in rounds))


def quad_spread_pct(rounds: list[list[float]]) -> float | None:
    """How far apart the middle half of the quad ratios lies: 75th over 25th percentile - 1, in
    percent (None under four quads)."""
    return _spread_pct(rounds) if sum(len(r) for r in rounds) >= 4 else None


def _spread_pct(rounds: list[list[float]]) -> float:
    ratios = [q for r in rounds for q in r]
    return 100.0 * (percentile(ratios, 75) / percentile(ratios, 25) - 1.0)
