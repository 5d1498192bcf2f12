"""The decode / tune phase tables (pure Python)."""

from __future__ import annotations

from typing import Any

from mlatui.measure.bound import rejection_text
from mlatui.measure.plans import Setting
from mlatui.stream.events import PhaseSummary, SpeedupBound
from mlatui.views.mdtable import check as _check
from mlatui.views.mdtable import ci
from mlatui.views.mdtable import fmt as _fmt
from mlatui.views.mdtable import table as _table


def _positions(values: Any) -> str:
    if not values:
        return "-"
    return " ".join("–" if v is None else f"{v:.2f}" for v in values)


def decode_table(summary: PhaseSummary, default_kind: str = "") -> str:
    """Per context, arm and setting: tok/s and the speedup over plain decode (medians over
    rounds, 95% CIs; the speedup paired within rounds), acceptance three ways, verify ms from the
    synced steps, the L = 1 check, and the guards' warnings (warned results are in no verdict).
    `default_kind`: the draft kind of rows recorded before they carried one (schema < 4)."""
    if summary.rows and "tok_s_low" not in summary.rows[0]:
        return _legacy_decode_table(summary)
    rows = []
    for r in summary.rows:
        mean = r.get("mean_accepted")
        if r.get("measured") is False:  # rejected by bound: no blocks ran, no tok/s
            b = r.get("bound")
            said = rejection_text(SpeedupBound(**b)) if b else "not measured"
            setting = Setting(r.get("draft_kind") or default_kind, r["depth"]).label
            rows.append(
                [r["context"], r["arm"], setting, "not measured", said, "-", "-", "-"]
                + [
                    _fmt(r.get("verify_ms_median")),
                    _check(r),
                    "; ".join(r.get("warnings") or []) or "-",
                ]
            )
            continue
        rows.append(
            [
                r["context"],
                r["arm"],
                Setting(r.get("draft_kind") or default_kind, r["depth"]).label,
                ci(r["tok_s"], r.get("tok_s_low"), r.get("tok_s_high"), 1),
                ci(r.get("vs_plain"), r.get("vs_plain_low"), r.get("vs_plain_high"), unit="x")
                if r["depth"]
                else "1",
                _positions(r.get("acceptance_conditional")),
                _positions(r.get("acceptance_by_position")),
                "-" if mean is None else f"{mean:.2f}/{r['depth']}",
                _fmt(r.get("verify_ms_median")),
                _check(r),
                "; ".join(r.get("warnings") or []) or "-",
            ]
        )
    return _table(
        [
            "context",
            "arm",
            "draft",
            "tok/s [95% CI]",
            "vs plain [95% CI]",
            "acceptance P(i ∣ 1..i-1) by position",
            "acceptance P(i) by position",
            "accepted / verify",
            "verify ms",
            "L=1 check",
            "warnings (left out of verdicts)",
        ],
        rows,
    )


def _legacy_decode_table(summary: PhaseSummary) -> str:
    """Recordings before schema 3: one tok/s per setting, no CIs."""
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
                _check(r),
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
            "L=1 check",
        ],
        rows,
    )
