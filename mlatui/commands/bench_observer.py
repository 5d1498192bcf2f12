"""`mlatui bench observer`: does watching change what is measured?

Runs one scenario headless, under the dashboard in-process (LiveSource), and under the dashboard
with the engine in a child process (ProcessSource), in rounds (H T I H T I ...), and compares
median and p95 verify ms per arm against headless. The dashboard runs Textual's headless driver:
the compositor renders every tick as in a terminal, only the final write to the tty is skipped.
"""

from __future__ import annotations

import argparse

from mlatui.argtypes import positive_float, positive_int

HELP = "observer effect: the scenario headless vs under the dashboard (in-process and isolated)"
MODES = ("headless", "tui", "isolated")


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--scenario", default=None, help="scenario TOML (default: scenarios/default.toml)"
    )
    parser.add_argument("--model", default=None)
    parser.add_argument("--random-weights", action="store_true")
    parser.add_argument("--rounds", type=positive_int, default=2, help="H/T/I rounds (default 2)")
    parser.add_argument("--ui-hz", type=positive_float, default=4.0)
    parser.add_argument("--out", default="observer.jsonl", help="per-mode results as JSONL")


def verify_samples(events) -> dict[str, list[float]]:
    """Verify-shaped forwards per arm: sweep steps with L >= 2 and speculative verify steps."""
    out: dict[str, list[float]] = {}
    for e in events:
        if e.type == "step" and e.width >= 2:
            out.setdefault(e.arm, []).append(e.ms)
        elif e.type == "spec_step":
            out.setdefault(e.arm, []).append(e.verify_ms)
    return out


def _p95(xs: list[float]) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(round(0.95 * (len(s) - 1))))]


def run_mode(mode: str, config, ui_hz: float, record: str) -> list:
    import threading

    from mlatui.sources import LiveSource, ProcessSource

    if mode == "headless":
        from mlatui.engine import run
        from mlatui.recorder import Recorder

        events: list = []
        with Recorder(record) as rec:

            def emit(e) -> None:
                rec(e)
                events.append(e)

            run(config, emit, threading.Event())
        return events
    from widgets.app import MlatuiApp

    source = (
        LiveSource(config, record=record) if mode == "tui" else ProcessSource(config, record=record)
    )
    app = MlatuiApp(source, ui_hz=ui_hz, exit_when_done=True)
    app.run(headless=True, size=(160, 50))
    source.stop()
    return app.events


def run(args: argparse.Namespace) -> int:
    import json
    import statistics
    import tempfile
    from pathlib import Path

    from mlatui.errors import UserError
    from mlatui.inputs import read_scenario
    from mlatui.runconfig import RunConfig

    read_scenario(args.scenario)  # a bad file: one line, before anything loads
    config = RunConfig(model=args.model, scenario=args.scenario, random_weights=args.random_weights)
    samples: dict[str, dict[str, list[float]]] = {m: {} for m in MODES}
    tmp = Path(tempfile.mkdtemp(prefix="mlatui-observer-"))
    for r in range(args.rounds):
        for mode in MODES:
            events = run_mode(mode, config, args.ui_hz, str(tmp / f"{mode}-{r}.jsonl"))
            if not events or events[-1].type != "run_end" or events[-1].status != "completed":
                raise UserError(f"{mode} run did not complete; see {tmp / f'{mode}-{r}.jsonl'}")
            for arm, xs in verify_samples(events).items():
                samples[mode].setdefault(arm, []).extend(xs)
            print(f"round {r + 1}/{args.rounds}: {mode} done", flush=True)
    rows = []
    for mode in MODES:
        for arm, xs in sorted(samples[mode].items()):
            base = samples["headless"].get(arm) or xs
            med, p95 = statistics.median(xs), _p95(xs)
            rows.append(
                {
                    "mode": mode,
                    "arm": arm,
                    "n": len(xs),
                    "median_ms": med,
                    "p95_ms": p95,
                    "median_ratio": med / statistics.median(base),
                    "p95_ratio": p95 / _p95(base),
                    "ui_hz": args.ui_hz,
                    "samples_ms": xs,
                }
            )
    with open(args.out, "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")
    print("| mode | arm | n | median ms | p95 ms | median / headless | p95 / headless |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['mode']} | {r['arm']} | {r['n']} | {r['median_ms']:.2f} | {r['p95_ms']:.2f} | "
            f"{r['median_ratio']:.3f} | {r['p95_ratio']:.3f} |"
        )
    print(f"\nraw samples: {args.out}; recordings: {tmp}")
    return 0
