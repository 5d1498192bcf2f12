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
