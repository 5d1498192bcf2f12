"""The engine as the commands run it: the request resolved into its plan once, then run."""

from __future__ import annotations

import threading
from collections.abc import Callable

from mlatui.config.run_plan import RunConfig, RunPlan, resolve_plan
from mlatui.run import engine
from mlatui.stream.events import Event


def run(
    request: RunConfig | RunPlan,
    emit: Callable[[Event], None],
    stop: threading.Event | None = None,
) -> str:
    plan = request if isinstance(request, RunPlan) else resolve_plan(request)
    return engine.run(plan, emit, stop)


def cli_in_process(capsys, *argv: str) -> tuple[int, str, str]:
    """`mlatui ARGV` through the CLI's main() in this process (a test about a command's tables,
    records and refusals, not the process boundary, which test_signals checks): its exit status,
    stdout and stderr."""
    from mlatui.cli import main

    try:
        code = main(list(argv))
    except SystemExit as e:  # argparse's refusals
        code = e.code
    out = capsys.readouterr()
    return code, out.out, out.err
