"""`mlatui launch`: run a scenario live, stock and patched side by side, in the dashboard."""

from __future__ import annotations

import argparse
import os
from typing import Any

from mlatui.commands.argtypes import (
    add_force,
    add_gate_options,
    add_overwrite,
    non_negative_int,
    positive_float,
    resolve_request,
)

HELP = (
    "run a scenario live in the dashboard (default: the embedded model and scenarios/default.toml)"
)


def epilog() -> str:
    from mlatui.config.outputs import name_pattern, runs_dir
    from mlatui.views.keys import keys_epilog

    return (
        f"recording: every run is written to --record FILE, by default a new\n"
        f"  {runs_dir() / name_pattern('run')}\n"
        "  (flushed line by line; the path is printed at exit; replay it with `mlatui replay FILE`)\n\n"
        + keys_epilog(replay=False)
    )


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--model", default=None, help="local folder or hub id (default: the embedded model)"
    )
    parser.add_argument("--draft-model", default=None, help="draft model folder or hub id")
    parser.add_argument(
        "--scenario", default=None, help="scenario TOML (default: scenarios/default.toml)"
    )
    parser.add_argument(
        "--record",
        default=None,
        help="JSONL recording path (default: a new file under the user data dir)",
    )
    add_overwrite(parser, "--record file")
    add_force(parser)
    parser.add_argument(
        "--isolate",
        action="store_true",
        help="run the engine in a child process (events over a pipe)",
    )
    parser.add_argument(
        "--ui-hz",
        type=positive_float,
        default=1.0,
        help="screen updates per second (default 1: the lowest observer effect measured, see docs/method.md)",
    )
    parser.add_argument(
        "--random-weights",
        action="store_true",
        help="build the scenario's model with random weights (timing only)",
    )
    add_gate_options(parser)
    parser.add_argument(
        "--budget",
        type=non_negative_int,
        default=None,
        metavar="S",
        help="seconds the run may take: a probe of this device scales the scenario down to fit, "
        "and the log says what was cut (default: the scenario's budget_s, 100 for the default "
        "scenario; 0 runs the scenario in full)",
    )
    parser.add_argument(
        "--out-dir", default=None, help="where e/s write exports and screenshots (default: .)"
    )
    parser.add_argument(
        "--plan",
        action="store_true",
        help="print the run's resolved plan (phases, arms, budget, seeds) and exit without "
        "loading a model or opening the dashboard",
    )
    parser.add_argument(
        "--format", choices=("md", "json"), default="md", help="with --plan: md (words) or json"
    )


class TerminalState:
    """The tty settings before the dashboard starts, to put back if we must exit at once (a
    second signal) without Textual's own shutdown."""

    RESET = (
        "\x1b[?1000l\x1b[?1003l\x1b[?1015l\x1b[?1006l\x1b[?1016l"  # mouse reporting off
        "\x1b[?2004l\x1b[?1004l\x1b[<u\x1b[?7h"  # paste, focus events, keyboard protocol
        "\x1b[?1049l\x1b[?25h"  # leave the alternate screen, show the cursor
    )

    def __init__(self) -> None:
        import sys

        self.attrs: list[Any] | None = None
        self.fd: int | None = None
        try:
            import termios

            stdin = sys.__stdin__
            fd = stdin.fileno() if stdin is not None else -1
            if fd >= 0 and os.isatty(fd):
                self.fd, self.attrs = fd, termios.tcgetattr(fd)
        except (ImportError, OSError, ValueError, AttributeError):
            pass

    def restore(self) -> None:
        import sys

        try:
            if sys.__stderr__ is not None:
                sys.__stderr__.write(self.RESET)
                sys.__stderr__.flush()
        except (OSError, ValueError, AttributeError):
            pass
        if self.attrs is not None and self.fd is not None:
            try:
                import termios

                termios.tcsetattr(self.fd, termios.TCSANOW, self.attrs)
            except (OSError, ValueError):
                pass


def _exit_app(app, status: int) -> None:
    """From a helper thread (a signal handler must not block): ask the running app to exit."""
    import time

    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if app.is_running:
            try:
                app.call_from_thread(app.exit, None, status)
                return
            except RuntimeError:  # stopping already
                return
        time.sleep(0.05)


def outcome(source, app, signals) -> tuple[int, list[str]]:
    """The exit status and the closing lines on stderr (an error last, in one line)."""
    from mlatui.errors import ExitStatus, error_line, shell_path

    lines = [f"mlatui: recording kept at {shell_path(source.record_path)}"]
    status = ExitStatus.OK
    if signals.received is not None:
        status = signals.exit_status
        lines.append(f"mlatui: stopped by {signals.stopped_by.name}")
    problems = []
    if app.dash.error:
        problems.append(
            f"engine error: {app.dash.error} — the recording keeps what ran; fix the input and "
            "run again"
        )
    if getattr(source, "recording_error", None):
        problems.append(source.recording_error)
    for problem in problems:
        lines.append(error_line(problem))
    if problems and status == ExitStatus.OK:
        status = ExitStatus.FAILED
    return int(status), lines


def run(args: argparse.Namespace) -> int:
    import sys

    from mlatui.config.outputs import check_out_dir, claim_output
    from mlatui.host.signals import StopOnSignals

    # resolved here, so that bad input fails before the screen opens, as `bench` does
    config, plan = resolve_request(args, record=args.record)
    if getattr(args, "plan", False):
        from mlatui.views.run_meta import print_plan

        return print_plan(plan, args.format)
    check_out_dir(args.out_dir)
    if config.record:  # a default name is created (unique) by the source
        claim_output(config.record, overwrite=args.overwrite, flag="--record")
    from mlatui.stream.sources import LiveSource, ProcessSource

    # `+`: a run that ends with undecided L = 1 checks keeps its arms for more rounds. The engine
    # runs the plan resolved above, in this process or in a child that receives it
    source = (
        ProcessSource(plan, offer_more=True) if args.isolate else LiveSource(plan, offer_more=True)
    )
    from mlatui.widgets.app import MlatuiApp

    app = MlatuiApp(source, ui_hz=args.ui_hz, out_dir=args.out_dir)
    terminal = TerminalState()

    def on_first(sig) -> None:
        import threading

        threading.Thread(target=_exit_app, args=(app, sig.exit_status), daemon=True).start()

    with StopOnSignals(
        on_first=on_first, on_second=lambda sig: terminal.restore(), announce=False
    ) as signals:
        try:
            app.run()
        finally:
            source.stop()  # joins the engine thread / ends the child, then closes the recording
    if app.unexpected is not None:
        raise app.unexpected  # the top-level handler: one line and a crash log
    status, lines = outcome(source, app, signals)
    for line in lines:
        print(line, file=sys.stderr)
    if not args.isolate:
        # MLX can abort at interpreter exit after compiled mlx-lm code ran on a worker thread.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)
    return status
