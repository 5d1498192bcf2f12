"""`python -m mlatui.run.child --plan PLAN`: the engine in its own process, for `launch --isolate`,
on the plan its parent resolved (`RunPlan.to_wire`; `--config JSON`: a request, for an engine
that takes one).

Events go to the original stdout as JSONL, one flushed line each; anything else that writes to
stdout (libraries, prints) is redirected to stderr so the event pipe stays clean. The parent
closes our stdin to ask for a stop; SIGTERM, SIGINT and SIGHUP do the same. With --offer-more, a `more N` line on
stdin is the `+` key's request (mlatui.stream.sources.RunControl).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time

from mlatui.config.run_plan import RunConfig, RunPlan
from mlatui.host.blas import choose_blas
from mlatui.stream.events import ErrorEvent, Event, RunEnd
from mlatui.stream.sources import ENGINE, RunControl, load_engine, parse_ask


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m mlatui.run.child")
    given = parser.add_mutually_exclusive_group(required=True)
    given.add_argument("--plan", help="the RunPlan its parent resolved (RunPlan.to_wire)")
    given.add_argument("--config", help="a RunConfig as JSON, for an engine that takes one")
    parser.add_argument("--engine", default=ENGINE, help="module:function of the engine")
    parser.add_argument(
        "--offer-more",
        action="store_true",
        help="after the run, keep the arms and read `more N` lines on stdin (the `+` key)",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    choose_blas()  # before the engine loads MLX (a parent's LD_PRELOAD is inherited)

    events = os.fdopen(os.dup(1), "w", encoding="utf-8", buffering=1)
    os.dup2(2, 1)  # stray prints must not corrupt the event stream
    sys.stdout = sys.stderr

    stop = RunControl(args.offer_more)
    lock = threading.Lock()
    saw_end = False

    def emit(event: Event) -> None:
        nonlocal saw_end
        line = event.to_json()
        with lock:
            try:
                events.write(line + "\n")
                events.flush()
            except (BrokenPipeError, ValueError):
                stop.set()  # the parent is gone
        if isinstance(event, RunEnd):
            saw_end = True

    def watch_stdin() -> None:
        try:
            for line in sys.stdin.buffer:
                rounds = parse_ask(line.decode("utf-8", "replace"))
                if rounds is not None:
                    stop.ask_more(rounds)
        except (OSError, ValueError):
            pass
        stop.set()

    threading.Thread(target=watch_stdin, name="mlatui-child-stdin", daemon=True).start()
    # SIGHUP: the terminal window closed (the Terminal app sends it to the whole session)
    for stop_signal in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(stop_signal, lambda *_: stop.set())

    t0 = time.monotonic()
    status = "error"
    try:
        given = RunPlan.from_wire(args.plan) if args.plan else RunConfig.from_json(args.config)
        status = load_engine(args.engine)(given, emit, stop)
    except BaseException as e:
        emit(ErrorEvent(time.monotonic() - t0, f"{type(e).__name__}: {e}", "engine"))
    if not saw_end:
        emit(RunEnd(time.monotonic() - t0, status))
    try:
        events.flush()
        events.close()
    except (BrokenPipeError, OSError, ValueError):
        pass
    sys.stderr.flush()
    # MLX can abort at interpreter exit after compiled mlx-lm code ran on a worker thread.
    os._exit(1 if status == "error" else 0)


if __name__ == "__main__":
    main()
