"""Summaries of a run, from its events alone (pure Python: used by `bench`, the TUI's export and
replays on machines without MLX). Invalid contexts (failed L = 1 check) are marked, never mixed in."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from mlatui.config.phase_kind import rules_for
from mlatui.stream.events import (
    ARMS,
    DriftEvent,
    Event,
    PhaseStart,
    PhaseSummary,
    PooledValidity,
    RunEnd,
    RunHeader,
    Validity,
)
from mlatui.stream.phrases import left_out_of_verdicts
from mlatui.views.dashboard_decode import kind_of_label
from mlatui.views.mdtable import csv_text
from mlatui.views.phase_views import Table, view_of
from mlatui.views.report_decode import decode_table
from mlatui.views.report_indexer import indexer_table
from mlatui.views.report_sweep import (
    final_checks,
    inversion_note,
    null_bias_table,
    sweep_table,
    validity_table,
)
from mlatui.views.run_meta import header_lines, run_seed


def _header(events: Sequence[Event]) -> RunHeader | None:
    return next((e for e in events if isinstance(e, RunHeader)), None)


def invalid_contexts(events: Sequence[Event]) -> list[tuple[str, int, float, str]]:
    """(phase, context, signed diff %, outcome) of every context whose L = 1 check was not valid."""
    return [
        (v.phase, v.context, v.diff_pct, v.verdict) for v in final_checks(events) if not v.valid
    ]


def run_verdict(events: Sequence[Event]) -> str:
    """The dashboard's verdict strip, from the same events (mlatui.views.verdict_strip)."""
    from mlatui.views.dashboard_state import DashboardState
    from mlatui.views.verdict_strip import verdict_line

    state = DashboardState()
    state.apply_all(list(events))
    return verdict_line(state)


# The event types summary_markdown / summary_csv read: a replay keeps only these (not every step).
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


DRIFTS_LISTED = 12


def drift_line(drifts: Sequence[DriftEvent]) -> str:
    shown = ", ".join(
        f"{d.phase} @ {d.context} round {d.round + 1} {d.change_pct:+.0f}%"
        for d in drifts[:DRIFTS_LISTED]
    )
    if len(drifts) > DRIFTS_LISTED:
        shown += f", … ({len(drifts) - DRIFTS_LISTED} more)"
    return (
        f"Device drift: {len(drifts)} step(s) of the L = 1 level > 10% between rounds "
        f"(both arms; paired figures cancel them): {shown}"
    )


def summary_markdown(events: Sequence[Event], verdict: str | None = None) -> str:
    """`verdict`: the strip as the dashboard computed it (it saw every event); else folded here."""
    h = _header(events)
    parts = ["# mlatui run summary", ""]
    if h:
        parts += [*header_lines(h), ""]
    parts += [f"**Verdict:** {verdict or run_verdict(events)}", ""]
    for s in (e for e in events if isinstance(e, PhaseSummary)):
        parts.append(f"## {s.phase} ({s.kind})")
        parts.append("")
        table = view_of(s.kind).table
        if table is Table.SWEEP:
            parts.append(sweep_table(s))
        elif table is Table.DECODE:
            parts.append(decode_table(s, kind_of_label(h.draft) if h else ""))
        elif table is Table.ROWS:
            parts.append(indexer_table(s))
        if s.verdict:
            parts += ["", f"Verdict: {s.verdict}"]
        note = inversion_note(s) if table is Table.SWEEP else None
        if note:
            parts += ["", f"Note: {note}"]
        parts.append("")
    kinds = {e.phase: e.kind for e in events if isinstance(e, PhaseStart)}
    checks = [
        e
        for e in events
        if isinstance(e, PooledValidity)
        or (isinstance(e, Validity) and not view_of(kinds.get(e.phase)).layer_steps)
    ]
    if checks:  # the indexer's S = 1 checks are in its own table
        parts += ["## L = 1 validity check", "", validity_table(checks), ""]
    bias = null_bias_table(events)
    if bias:
        parts += [
            "## A/A: harness bias (both arms the same variant; the true ratio is 1)",
            "",
            bias,
            "",
        ]
    drifts = [e for e in events if isinstance(e, DriftEvent)]
    if drifts:
        parts += [drift_line(drifts), ""]
    # the last: a run that measured more after it ended (`+`) ends again
    end = next((e for e in reversed(events) if isinstance(e, RunEnd)), None)
    if end:
        parts.append(
            f"Run {end.status}"
            + (f"; {left_out_of_verdicts(end.invalid_contexts)}" if end.invalid_contexts else "")
            + "."
        )
    return "\n".join(parts).rstrip() + "\n"


CSV_FIELDS = (
    "phase",
    "kind",
    "context",
    "width",
    "depth",
    "arm",
    "median_ms",
    "p10_ms",
    "p90_ms",
    "n",
    "tok_s",
    "tok_s_low",
    "tok_s_high",
    "vs_plain",
    "vs_plain_low",
    "vs_plain_high",
    "acceptance_conditional",
    "acceptance_by_position",
    "mean_accepted",
    "acceptance_rule",
    "temperature",
    "distinct_4gram_share",
    "distinct_4gram_share_across",
    "verify_ms_median",
    "warnings",
    "valid",
    "measured",
    "bound",
)


def summary_rows(events: Sequence[Event]) -> list[dict]:
    out = []
    for s in (e for e in events if isinstance(e, PhaseSummary)):
        for r in s.rows:
            row = {
                "phase": s.phase,
                "kind": s.kind,
                **{k: v for k, v in r.items() if k != "samples_ms"},
            }
            for key in ("acceptance_by_position", "acceptance_conditional"):
                if isinstance(row.get(key), list):
                    row[key] = " ".join("" if a is None else f"{a:.3f}" for a in row[key])
            if isinstance(row.get("warnings"), list):
                row["warnings"] = "; ".join(row["warnings"])
            if isinstance(row.get("bound"), dict):  # the bound's upper end on vs plain
                row["bound"] = f"{row['bound']['value']:.4g}"
            out.append(row)
    return out


def summary_csv(events: Sequence[Event]) -> str:
    return csv_text(CSV_FIELDS, summary_rows(events))


def summary_json(events: Sequence[Event]) -> str:
    """Summaries with raw samples (llama-bench style), plus the header and the validity verdicts."""
    h = _header(events)
    return json.dumps(
        {
            "header": h.to_dict() if h else None,
            "phases": [
                {"phase": s.phase, "kind": s.kind, "verdict": s.verdict, "rows": list(s.rows)}
                for s in events
                if isinstance(s, PhaseSummary)
            ],
            "validity": [v.to_dict() for v in final_checks(events)],
            "pooled_validity": [p.to_dict() for p in events if isinstance(p, PooledValidity)],
        },
        indent=1,
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
