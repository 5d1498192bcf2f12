"""The decode / tune phase tables (pure Python)."""

from __future__ import annotations

from typing import Any

from mlatui.measure.bound import rejection_text
from mlatui.measure.plans import Setting
from mlatui.stream.events import PhaseSummary, SpeedupBound, arm_label
from mlatui.views.mdtable import check as _check
from mlatui.views.mdtable import ci
from mlatui.views.mdtable import fmt as _fmt
from mlatui.views.mdtable import table as _table


def _positions(values: Any) -> str:
    if not values:
        return "-"
    return " ".join("–" if v is None else f"{v:.2f}" for v in values)


RULE_WORDS = {"exact-match": "exact match", "rejection-sampling": "rejection sampling"}


def rule_text(rule: str, temperature: float | None) -> str:
    """The acceptance rule and the sampling it ran under ("rejection sampling, T=0.8",
    "exact match, greedy"); "–" for plain decode and recordings without a rule."""
    if not rule:
        return "–"
    words = RULE_WORDS.get(rule, rule)
    if temperature is None:
        return words
    return f"{words}, " + (f"T={temperature:g}" if temperature else "greedy")


def share_text(within: float | None, across: float | None) -> str:
    """The distinct-4-gram shares of a result's text: within its blocks (pooled) / across them."""
    if within is None:
        return "–"
    return f"{within:.0%}" + (f" / {across:.0%}" if across is not None else "")


SHARE_HEAD = "distinct 4-grams (block / across)"


def decode_table(summary: PhaseSummary, default_kind: str = "") -> str:
    """Per context, arm and setting: tok/s and the speedup over plain decode (medians over
    rounds, 95% CIs; the speedup paired within rounds), acceptance three ways and the rule that
    decided it, the text's distinct-4-gram shares (looping text is easy to draft), verify ms from
    the synced steps, the L = 1 check, and the guards' warnings (warned results are in no verdict).
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
                [
                    r["context"],
                    arm_label(r["arm"], summary.phase),
                    setting,
                    "not measured",
                    said,
                    "-",
                    "-",
                    "-",
                    "–",
                    "–",
                ]
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
                arm_label(r["arm"], summary.phase),
                Setting(r.get("draft_kind") or default_kind, r["depth"]).label,
                ci(r["tok_s"], r.get("tok_s_low"), r.get("tok_s_high"), 1),
                ci(r.get("vs_plain"), r.get("vs_plain_low"), r.get("vs_plain_high"), unit="x")
                if r["depth"]
                else "1",
                _positions(r.get("acceptance_conditional")),
                _positions(r.get("acceptance_by_position")),
                "-" if mean is None else f"{mean:.2f}/{r['depth']}",
                rule_text(r.get("acceptance_rule") or "", r.get("temperature"))
                if r["depth"]
                else "–",
                share_text(r.get("distinct_4gram_share"), r.get("distinct_4gram_share_across")),
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
            "acceptance rule",
            SHARE_HEAD,
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
