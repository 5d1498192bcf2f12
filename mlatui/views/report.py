"""Summaries of a run, from its events alone (pure Python: used by `bench`, the TUI's export and
replays on machines without MLX). Invalid contexts (failed L = 1 check) are marked, never mixed in."""

from __future__ import annotations

from collections.abc import Sequence

from mlatui.stream.events import Event
from mlatui.views.report_sweep import final_checks


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
