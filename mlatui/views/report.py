"""Summaries of a run, from its events alone (pure Python: used by `bench`, the TUI's export and
replays on machines without MLX). Invalid contexts (failed L = 1 check) are marked, never mixed in."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from mlatui.stream.events import (
    ARMS,
    DriftEvent,
    Event,
    PhaseStart,
    PhaseSummary,
    RunEnd,
    RunHeader,
    Validity,
)
from mlatui.views.mdtable import check as _check
from mlatui.views.mdtable import ci, csv_text
from mlatui.views.mdtable import fmt as _fmt
from mlatui.views.mdtable import table as _table
from mlatui.views.report_decode import decode_table
from mlatui.views.run_meta import header_lines, run_seed


def _header(events: Sequence[Event]) -> RunHeader | None:
    return next((e for e in events if isinstance(e, RunHeader)), None)


def sweep_table(summary: PhaseSummary, null: bool = False) -> str:
    """Per context and width: each arm's step ms and the paired stock/patched ratio, medians over
    rounds with 95% bootstrap CIs; then the marginal cost of the second query per arm."""
    med = {(r["context"], r["width"], r["arm"]): r for r in summary.rows}
    keys = sorted({(c, w) for c, w, _ in med})
    if keys and "ratio" not in next(iter(med.values())):
        return _legacy_sweep_table(summary)
    a, b = ("A", "B") if null else ARMS
    rows = []
    for c, w in keys:
        s, p = med.get((c, w, "stock")), med.get((c, w, "patched"))
        if not s or not p:
            continue
        rows.append(
            [
                c,
                w,
                ci(s["median_ms"], s["ci_low_ms"], s["ci_high_ms"]),
                ci(p["median_ms"], p["ci_low_ms"], p["ci_high_ms"]),
                ci(s["ratio"], s["ratio_low"], s["ratio_high"], 3) + ("" if null else "x"),
                ci(p.get("vs_l1"), p.get("vs_l1_low"), p.get("vs_l1_high")) if w > 1 else "1",
                s["rounds"],
                s.get("drifting_rounds", 0),
                _check(s),
            ]
        )
    out = _table(
        [
            "context",
            "L",
            f"{a} ms [95% CI]",
            f"{b} ms [95% CI]",
            f"{a}/{b} paired [95% CI]",
            f"{b} L / L=1 [95% CI]",
            "rounds",
            "drifting",
            "L=1 check",
        ],
        rows,
    )
    marg = []
    for c in sorted({c for c, _ in keys}):
        s, p = med.get((c, 2, "stock")), med.get((c, 2, "patched"))
        if s and p and s.get("marginal_ms") is not None:
            marg.append(
                [
                    c,
                    ci(s["marginal_ms"], s["marginal_low_ms"], s["marginal_high_ms"]),
                    ci(p["marginal_ms"], p["marginal_low_ms"], p["marginal_high_ms"]),
                    _check(s),
                ]
            )
    if marg:
        out += (
            "\n\nMarginal cost of the second query, per round mean(L=2) - mean(L=1), median over "
            "rounds [95% CI], ms:\n\n"
        )
        out += _table(["context", a, b, "L=1 check"], marg)
    return out


def _legacy_sweep_table(summary: PhaseSummary) -> str:
    """Schema-1 recordings: unpaired medians (kept readable; never a verdict of this version)."""
    med = {(r["context"], r["width"], r["arm"]): r for r in summary.rows}
    rows = []
    for c, w in sorted({(c, w) for c, w, _ in med}):
        s, p = med.get((c, w, "stock")), med.get((c, w, "patched"))
        if s and p:
            rows.append(
                [
                    c,
                    w,
                    f"{s['median_ms']:.2f} ({s['p10_ms']:.2f}-{s['p90_ms']:.2f})",
                    f"{p['median_ms']:.2f} ({p['p10_ms']:.2f}-{p['p90_ms']:.2f})",
                    f"{s['median_ms'] / p['median_ms']:.2f}x" if p["median_ms"] else "-",
                    "ok" if s["valid"] else "INVALID",
                ]
            )
    out = "(recorded by an older mlatui: unpaired medians, no CIs)\n\n" + _table(
        [
            "context",
            "L",
            "stock ms (p10-p90)",
            "patched ms (p10-p90)",
            "ratio of medians",
            "L=1 check",
        ],
        rows,
    )
    marg = []
    for c in sorted({c for c, _, _ in med}):
        vals = []
        for arm in ARMS:
            one, two = med.get((c, 1, arm)), med.get((c, 2, arm))
            vals.append(_fmt(two["median_ms"] - one["median_ms"]) if one and two else "-")
        marg.append([c, *vals])
    if marg:
        out += (
            "\n\nMarginal cost of the second query, median(L=2) - median(L=1) (unpaired), ms:\n\n"
        )
        out += _table(["context", "stock", "patched"], marg)
    return out


def null_bias_table(events: Sequence[Event]) -> str:
    """A/A runs: the harness's own bias per pass, context and width (paired ratio - 1)."""
    from mlatui.stream.events import Estimate

    rows = []
    for e in events:
        if isinstance(e, Estimate) and e.final and "/aa-" in e.phase:
            for r in e.rows:
                if r["quantity"] == "ratio":
                    lo, hi = (r["low"] - 1) * 100, (r["high"] - 1) * 100
                    rows.append(
                        [
                            e.phase.rsplit("/", 1)[1],
                            e.context,
                            r["width"],
                            f"{(r['median'] - 1) * 100:+.2f}% [{lo:+.2f}, {hi:+.2f}]",
                            "yes" if lo <= 0 <= hi else "NO",
                            r["n"],
                        ]
                    )
    if not rows:
        return ""
    return _table(["pass", "context", "L", "bias A/B - 1 [95% CI]", "CI contains 0", "quads"], rows)


def indexer_table(summary: PhaseSummary) -> str:
    """The indexer phase's own table: one sparse layer of the model, per part, context, S, arm;
    the paired stock/patched (stock rows), the pool's rebuilds/reuses and the untimed output
    check; the S = 1 check (a row at S = 1 carries its paired ratio)."""

    def agree(r):
        if r.get("selection_agreement") is not None:
            return f"{r['selection_agreement']:.0%} same"
        return "-" if r.get("parity_max_abs") is None else f"max Δ {r['parity_max_abs']:.1e}"

    rows = [
        [
            r.get("part", "indexer"),
            r.get("layer", "-"),
            r["context"],
            r["width"],
            r["arm"],
            ci(r["median_ms"], r.get("ci_low_ms"), r.get("ci_high_ms"), 3),
            ci(r.get("ratio"), r.get("ratio_low"), r.get("ratio_high"), 3, "×")
            if r["arm"] == "stock"
            else "",
            f"{r.get('pool_rebuilds', '-')}/{r.get('pool_reuses', '-')}",
            agree(r),
            r.get("outcome") or ("valid" if r.get("valid", True) else "invalid"),
        ]
        for r in summary.rows
    ]
    head = ["part", "layer", "context", "S", "arm", "median ms [95% CI]"]
    head += ["stock/patched paired [95% CI]", "pool rebuilds/reuses", "arms' outputs"]
    return _table([*head, "S=1 check"], rows)


def validity_table(events: Sequence[Event]) -> str:
    rows = []
    for v in events:
        if not isinstance(v, Validity):
            continue
        paired = ci(v.ratio, v.ratio_low, v.ratio_high, 4)
        rows.append(
            [
                v.phase,
                v.context,
                f"{v.stock_l1_ms:.3f}",
                f"{v.patched_l1_ms:.3f}",
                paired,
                f"{v.diff_pct:+.2f}%",
                v.rounds or "-",
                v.verdict.upper() if v.verdict != "valid" else "valid",
            ]
        )
    tol = events_tolerance(events)
    return _table(
        [
            "phase",
            "context",
            "stock L=1 ms",
            "patched L=1 ms",
            "paired ratio [95% CI]",
            "diff",
            "rounds",
            f"CI within ±{tol:g}%",
        ],
        rows,
    )


def events_tolerance(events: Sequence[Event]) -> float:
    return next((v.tolerance_pct for v in events if isinstance(v, Validity)), 2.0)


def invalid_contexts(events: Sequence[Event]) -> list[tuple[str, int, float, str]]:
    """(phase, context, signed diff %, outcome) of every context whose L = 1 check was not valid."""
    return [
        (v.phase, v.context, v.diff_pct, v.verdict)
        for v in events
        if isinstance(v, Validity) and not v.valid
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
        "estimate",
        "drift",
        "decode_result",
        "run_end",
    }
)


def drift_line(drifts: Sequence[DriftEvent]) -> str:
    shown = ", ".join(
        f"{d.phase} @ {d.context} round {d.round + 1} {d.change_pct:+.0f}%" for d in drifts[:12]
    )
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
        if s.kind == "sweep":
            parts.append(sweep_table(s, null="/aa-" in s.phase))
        elif s.kind in ("decode", "tune"):
            parts.append(decode_table(s))
        elif s.kind == "indexer":
            parts.append(indexer_table(s))
        if s.verdict:
            parts += ["", f"Verdict: {s.verdict}"]
        parts.append("")
    kinds = {e.phase: e.kind for e in events if isinstance(e, PhaseStart)}
    checks = [e for e in events if isinstance(e, Validity) and kinds.get(e.phase) != "indexer"]
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
    end = next((e for e in events if isinstance(e, RunEnd)), None)
    if end:
        parts.append(
            f"Run {end.status}"
            + (
                f"; left out of verdicts (L=1 check invalid or inconclusive): {', '.join(map(str, end.invalid_contexts))}"
                if end.invalid_contexts
                else ""
            )
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
    "verify_ms_median",
    "warnings",
    "valid",
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
            "validity": [v.to_dict() for v in events if isinstance(v, Validity)],
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
        if isinstance(e, Step) and kinds.get(e.phase) == "sweep":
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
