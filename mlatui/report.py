"""Summaries of a run, from its events alone (pure Python: used by `bench`, the TUI's export and
replays on machines without MLX). Invalid contexts (failed L = 1 check) are marked, never mixed in."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Sequence
from typing import Any

from mlatui.events import Event, PhaseSummary, RunEnd, RunHeader, Validity


def _header(events: Sequence[Event]) -> RunHeader | None:
    return next((e for e in events if isinstance(e, RunHeader)), None)


def _fmt(v: Any, digits: int = 2) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.{digits}f}"
    return str(v)


def _table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    lines = [
        "| " + " | ".join(headers) + " |",
        "|" + "|".join("---" if i == 0 else "---:" for i in range(len(headers))) + "|",
    ]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def describe_header(h: RunHeader) -> str:
    d = h.device
    g = h.geometry or {}
    geo = (
        f"r/n/v {g.get('kv_lora_rank')}/{g.get('qk_nope_head_dim')}/{g.get('v_head_dim')}, {g.get('num_heads')} heads"
        if g
        else "geometry unknown"
    )
    th = h.thresholds or {}
    synthetic = " (acceptance SYNTHETIC: random weights)" if h.synthetic_acceptance else ""
    return (
        f"model {h.model} ({h.model_type}; {geo}; threshold T->inf {th.get('formula_inf', '-')}, policy {th.get('policy', '-')}), "
        f"draft {h.draft}{synthetic}; scenario {h.scenario.get('name')}; "
        f"device {d.get('name')} ({d.get('backend')}, blas: {d.get('blas')}); "
        f"mlx {h.mlx_version}, mlx-lm {h.mlx_lm_version}, mlatui {h.mlatui_version}, python {h.python_version}; {h.started_at}"
    )


def sweep_table(summary: PhaseSummary) -> str:
    med = {(r["context"], r["width"], r["arm"]): r for r in summary.rows}
    keys = sorted({(c, w) for c, w, _ in med})
    rows = []
    for c, w in keys:
        s, p = med.get((c, w, "stock")), med.get((c, w, "patched"))
        if not s or not p:
            continue
        ratio = s["median_ms"] / p["median_ms"] if p["median_ms"] else float("nan")
        ok = "ok" if s["valid"] else "INVALID"
        rows.append(
            [
                c,
                w,
                f"{s['median_ms']:.2f} ({s['p10_ms']:.2f}-{s['p90_ms']:.2f})",
                f"{p['median_ms']:.2f} ({p['p10_ms']:.2f}-{p['p90_ms']:.2f})",
                f"{ratio:.2f}x",
                ok,
            ]
        )
    out = _table(
        [
            "context",
            "L",
            "stock ms (p10-p90)",
            "patched ms (p10-p90)",
            "stock/patched",
            "L=1 check",
        ],
        rows,
    )
    marg = []
    for c in sorted({c for c, _ in keys}):
        vals = {}
        for arm in ("stock", "patched"):
            one, two = med.get((c, 1, arm)), med.get((c, 2, arm))
            vals[arm] = two["median_ms"] - one["median_ms"] if one and two else None
        if vals["stock"] is not None:
            valid = med[(c, 1, "stock")]["valid"]
            marg.append(
                [c, _fmt(vals["stock"]), _fmt(vals["patched"]), "ok" if valid else "INVALID"]
            )
    if marg:
        out += "\n\nMarginal cost of the second query, median(L=2) - median(L=1), ms:\n\n"
        out += _table(["context", "stock", "patched", "L=1 check"], marg)
    return out


def decode_table(summary: PhaseSummary) -> str:
    rows = []
    for r in summary.rows:
        acc = ", ".join(f"{a:.2f}" for a in r.get("acceptance_by_position") or []) or "-"
        rows.append(
            [
                r["context"],
                r["arm"],
                "plain" if r["depth"] == 0 else r["depth"],
                _fmt(r["tok_s"], 1),
                _fmt(r["vs_plain"]) + "x" if r["vs_plain"] is not None else "-",
                acc,
                _fmt(r.get("verify_ms_median")),
                _fmt(r.get("draft_ms_median")),
                "ok" if r["valid"] else "INVALID",
            ]
        )
    return _table(
        [
            "context",
            "arm",
            "depth",
            "tok/s",
            "vs plain",
            "acceptance by position",
            "verify ms",
            "draft ms",
            "L=1 check",
        ],
        rows,
    )


def indexer_table(summary: PhaseSummary) -> str:
    rows = [
        [
            r.get("part", "indexer"),
            r["context"],
            r["width"],
            r["arm"],
            _fmt(r["median_ms"], 3),
            "ok" if r.get("valid", True) else "INVALID",
        ]
        for r in summary.rows
    ]
    return _table(["part", "context", "S", "arm", "median ms", "S=1 check"], rows)


def validity_table(events: Sequence[Event]) -> str:
    rows = [
        [
            v.phase,
            v.context,
            f"{v.stock_l1_ms:.3f}",
            f"{v.patched_l1_ms:.3f}",
            f"{v.diff_pct:.2f}%",
            "ok" if v.valid else "INVALID",
        ]
        for v in events
        if isinstance(v, Validity)
    ]
    return _table(
        [
            "phase",
            "context",
            "stock L=1 ms",
            "patched L=1 ms",
            "diff",
            f"within {events_tolerance(events)}%",
        ],
        rows,
    )


def events_tolerance(events: Sequence[Event]) -> float:
    return next((v.tolerance_pct for v in events if isinstance(v, Validity)), 2.0)


def invalid_contexts(events: Sequence[Event]) -> list[tuple[str, int, float]]:
    return [
        (v.phase, v.context, v.diff_pct) for v in events if isinstance(v, Validity) and not v.valid
    ]


def summary_markdown(events: Sequence[Event]) -> str:
    h = _header(events)
    parts = ["# mlatui run summary", ""]
    if h:
        parts += [describe_header(h), ""]
    for s in (e for e in events if isinstance(e, PhaseSummary)):
        parts.append(f"## {s.phase} ({s.kind})")
        parts.append("")
        if s.kind == "sweep":
            parts.append(sweep_table(s))
        elif s.kind in ("decode", "tune"):
            parts.append(decode_table(s))
        elif s.kind == "indexer":
            parts.append(indexer_table(s))
        if s.verdict:
            parts += ["", f"Verdict: {s.verdict}"]
        parts.append("")
    if any(isinstance(e, Validity) for e in events):
        parts += ["## L = 1 validity check", "", validity_table(events), ""]
    end = next((e for e in events if isinstance(e, RunEnd)), None)
    if end:
        parts.append(
            f"Run {end.status}"
            + (
                f"; invalid contexts: {', '.join(map(str, end.invalid_contexts))}"
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
    "vs_plain",
    "acceptance_by_position",
    "verify_ms_median",
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
            if isinstance(row.get("acceptance_by_position"), list):
                row["acceptance_by_position"] = " ".join(
                    f"{a:.3f}" for a in row["acceptance_by_position"]
                )
            out.append(row)
    return out


def summary_csv(events: Sequence[Event]) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=CSV_FIELDS, extrasaction="ignore")
    w.writeheader()
    for row in summary_rows(events):
        w.writerow(row)
    return buf.getvalue()


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
