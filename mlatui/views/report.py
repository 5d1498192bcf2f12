"""Summaries of a run, from its events alone (pure Python: used by `bench`, the TUI's export and
replays on machines without MLX). Invalid contexts (failed L = 1 check) are marked, never mixed in."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mlatui.config.phase_kind import rules_for
from mlatui.stream.events import (
    ARMS,
    Event,
    PhaseStart,
    RunHeader,
)
from mlatui.views.report_sweep import final_checks
from mlatui.views.run_meta import run_seed


def _header(events: Sequence[Event]) -> RunHeader | None:
    return next((e for e in events if isinstance(e, RunHeader)), None)


def invalid_contexts(events: Sequence[Event]) -> list[tuple[str, int, float, str]]:
    """(phase, context, signed diff %, outcome) of every context whose L = 1 check was not valid."""
    return [
        (v.phase, v.context, v.diff_pct, v.verdict) for v in final_checks(events) if not v.valid
    ]


# The event types the summary folds: a replay keeps only these (not every step).
SUMMARY_EVENT_TYPES = frozenset(
    {
        "header",
        "phase_start",
        "phase_summary",
        "validity",
        "pooled_validity",
        "estimate",
        "drift",
        "decode_result",
        "run_end",
    }
)


def reestimate(events: Sequence[Event]) -> dict[tuple[str, int], Any]:
    """Every sweep context's estimates recomputed from the recorded Step events alone, with the
    seeds the run used: a replay reproduces the recorded summary and CIs exactly (and an older
    recording can be read with this version's estimator)."""
    from mlatui.measure.estimates import Timing, estimate_context, stable_seed
    from mlatui.stream.events import Step

    h = _header(events)
    base = (run_seed(h) if h else None) or 0
    kinds = {e.phase: e.kind for e in events if isinstance(e, PhaseStart)}
    steps: dict[tuple[str, int], list[Timing]] = {}
    for e in events:
        if isinstance(e, Step) and rules_for(kinds.get(e.phase)).model_widths:
            steps.setdefault((e.phase, e.context), []).append(
                Timing(e.rep, e.width, e.arm, e.ms, e.t)
            )
    out = {}
    for (phase, context), timings in steps.items():
        control = 1 if any(t.width == 1 for t in timings) else None
        out[(phase, context)] = estimate_context(
            timings, ARMS, control, 2.0, stable_seed(base, phase, context)
        )
    return out
