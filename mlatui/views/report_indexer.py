"""The indexer phase's markdown table (pure Python)."""

from __future__ import annotations

from mlatui.stream.events import PhaseSummary, arm_label, ratio_label
from mlatui.views.mdtable import ci
from mlatui.views.mdtable import table as _table


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
            arm_label(r["arm"], summary.phase),
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
    head += [
        f"{ratio_label(summary.phase)} paired [95% CI]",
        "pool rebuilds/reuses",
        "arms' outputs",
    ]
    return _table([*head, "S=1 check"], rows)
