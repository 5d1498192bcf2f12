"""The dashboard's export (`e`, `replay --dump`): markdown and CSV of what the dashboard knows,
at any moment of a run (pure Python, from DashboardState alone).

Both carry the run metadata, the verdict strip, the L = 1 checks, the marginal cost of the
second query, and one table per phase (sweep and tune/decode never share a table; the CSV has a
`table` column to filter on). Numbers are rounded to what their CI supports (mlatui.views.rounding).
"""

from __future__ import annotations

from typing import Any

from mlatui.config.phase_kind import Pass
from mlatui.measure.bound import rejection_text
from mlatui.measure.plans import Setting
from mlatui.stream.events import ARMS, DecodeResult, Validity, arm_label, ratio_label
from mlatui.stream.phrases import check_mark
from mlatui.views.dashboard_state import DashboardState
from mlatui.views.l1_figures import l1_figures
from mlatui.views.mdtable import csv_text, table
from mlatui.views.phase_views import Table, view_of
from mlatui.views.report import drift_line
from mlatui.views.report_decode import SHARE_HEAD, rule_text, share_text
from mlatui.views.report_indexer import indexer_table
from mlatui.views.report_sweep import inversion_note, pooled_note
from mlatui.views.rounding import Ci, ci_text, sig
from mlatui.views.run_meta import PATCH_QUESTION, header_fields, header_lines, is_patch_review
from mlatui.views.run_tables import Cell, Quantity, check, decode_cells, sweep_cells, sweep_phases
from mlatui.views.units import ratio_text
from mlatui.views.verdict_strip import verdict_line

CSV_COLUMNS = (
    "table",
    "phase",
    "kind",
    "context",
    "width",
    "arm",
    "quantity",
    "median",
    "low",
    "high",
    "n",
    "rounds",
    "check",
    "text",
    "draft",
)


def _by(cells: list[Cell], quantity: Quantity) -> dict[tuple[int, int, str], Cell]:
    return {(c.context, c.width, c.arm): c for c in cells if c.quantity == quantity}


def checks_in_order(state: DashboardState) -> list[tuple[tuple[str, int], Validity]]:
    """The L = 1 checks by phase (in run order), then context: as the dashboard lists them."""
    order = {p: i for i, p in enumerate(state.phase_kinds)}
    return sorted(
        state.validity.items(), key=lambda kv: (order.get(kv[0][0], len(order)), kv[0][1])
    )


def _status(state: DashboardState) -> str:
    if state.status == "running" and state.phase.name:
        p = state.phase
        return f"running (phase {p.index + 1}/{p.total_phases} {p.name}: {p.done}/{p.total})"
    return state.status + (f" ({state.error})" if state.error else "")


def _phases(state: DashboardState) -> list[tuple[str, str]]:
    return list(state.phase_kinds.items())


# -- markdown -----------------------------------------------------------------------------------


def _slot_names(phases) -> tuple[str, str, str]:
    """Column names of the two arm slots over several phases: 'stock', 'patched' and their
    ratio, or 'A', 'B' when every phase is an A/A pass (the phase column says what ran)."""
    if phases and all(Pass.of(p).null for p in phases):
        return "A", "B", "A/B"
    return "stock", "patched", "stock/patched"


def _l1_table(state: DashboardState) -> str:
    """Per (phase, context) its own paired L = 1 ratio, the check and its basis (own, or pooled);
    then a row per pooled check, and what each pooled."""
    rows = []
    notes: list[str] = []  # rows whose L = 1 figures are not step times say what they are
    for (phase, context), v in checks_in_order(state):
        paired = Ci.of(v.ratio) if v.ratio is not None else None
        c = check(state, phase, context)
        kind = state.phase_kinds.get(phase, "")
        f = l1_figures(v, kind, state.decode_results, phase, context)
        star = " *" if f.per_token else ""
        if f.per_token and f.note not in notes:
            notes.append(f.note)
        rows.append(
            [
                phase,
                context,
                sig(f.stock_ms) + star,
                sig(f.patched_ms) + star,
                ratio_text(paired),
                f"{v.diff_pct:+.1f}%",
                v.rounds or "–",
                f"{c.mark} {v.verdict}",
                v.basis.value,
            ]
        )
    pooled = sorted(state.pooled.values(), key=lambda p: p.t)
    for p in pooled:
        mark = check_mark(p.outcome)
        rows.append(
            [
                f"{p.phase} (pooled)",
                f"{len(p.contexts)} contexts",
                "–",
                "–",
                ratio_text(p.ratio),
                f"{(p.ratio.median - 1) * 100:+.1f}%",
                p.rounds,
                f"{mark} {p.outcome}",
                "pooled",
            ]
        )
    tol = next(iter(state.validity.values())).tolerance_pct if state.validity else 2.0
    a, b, pair = _slot_names([phase for phase, _ in state.validity])
    head = ["phase", "context", f"{a} L=1 ms", f"{b} L=1 ms", f"paired {pair} [95% CI]"]
    out = table([*head, "diff", "rounds", f"CI within ±{tol:g}%", "basis"], rows)
    out += "".join(f"\n\n\\* L=1 ms {note}." for note in notes)
    return out + "".join("\n\n" + pooled_note(p) for p in pooled)


def _marginal_table(state: DashboardState) -> str:
    phases = sweep_phases(state)
    rows = []
    for phase in phases:
        marg = _by(sweep_cells(state, phase), Quantity.MARGINAL_MS)
        for context in sorted({c for c, _, _ in marg}):
            s, p = marg.get((context, 2, "stock")), marg.get((context, 2, "patched"))
            cells = [context, ci_text(s.ci if s else None), ci_text(p.ci if p else None)]
            c = check(state, phase, context)
            rows.append(([phase] if len(phases) > 1 else []) + cells + [f"{c.mark} {c}"])
    a, b, _ = _slot_names(phases)
    head = ["context", f"{a} Δ2 ms [95% CI]", f"{b} Δ2 ms [95% CI]"]
    return table((["phase"] if len(phases) > 1 else []) + head + ["L=1 check"], rows)


def _sweep_table(state: DashboardState, phase: str) -> str:
    cells = sweep_cells(state, phase)
    step, ratio = _by(cells, Quantity.STEP_MS), _by(cells, Quantity.RATIO)
    rows = []
    for context, width in sorted({(c, w) for c, w, _ in step}):
        s, p = step.get((context, width, "stock")), step.get((context, width, "patched"))
        r = ratio.get((context, width, ""))
        rounds = next((x.rounds for x in (s, p) if x and x.rounds), None)
        c = check(state, phase, context)
        rows.append(
            [
                context,
                width,
                ci_text(s.ci if s else None),
                ci_text(p.ci if p else None),
                ci_text(r.ci if r else None, "×"),
                rounds or "–",
                f"{c.mark} {c}",
            ]
        )
    a, b = (arm_label(arm, phase) for arm in ARMS)
    pair = ratio_label(phase)
    head = ["context", "L", f"{a} ms [95% CI]", f"{b} ms [95% CI]"]
    return table([*head, f"{pair} paired [95% CI]", "rounds", "L=1 check"], rows)


def _positions(values) -> str:
    return " ".join("–" if v is None else f"{v:.2f}" for v in values) or "–"


def _decode_row(state: DashboardState, r: DecodeResult) -> list:
    c = check(state, r.phase, r.context)
    if r.tok_s is None:  # rejected by bound: no blocks ran
        said = rejection_text(r.bound) if r.bound is not None else "not measured"
        return [
            r.context,
            arm_label(r.arm, r.phase),
            Setting(r.draft_kind, r.depth).label,
            "not measured",
            said,
            "–",
            "–",
            "–",
            "–",
            sig(r.verify_ms_median),
            f"{c.mark} {c}",
            "; ".join(r.warnings) or "–",
        ]
    tok = Ci.of(r.tok_s)
    vs = Ci.of(r.vs_plain) if r.vs_plain is not None else None
    return [
        r.context,
        arm_label(r.arm, r.phase),
        Setting(r.draft_kind, r.depth).label,
        tok.text(),
        ci_text(vs, "×") if r.depth else "1",
        _positions(r.acceptance_conditional or r.acceptance_by_position) if r.depth else "–",
        "–" if r.mean_accepted is None else f"{r.mean_accepted:.2f}/{r.depth}",
        rule_text(r.acceptance_rule, r.sampling.get("temperature")) if r.depth else "–",
        share_text(r.distinct_4gram_share, r.distinct_4gram_share_across),
        sig(r.verify_ms_median),
        f"{c.mark} {c}",
        "; ".join(r.warnings) or "–",
    ]


def _decode_table(state: DashboardState, phase: str) -> str:
    acc = "acceptance (synthetic)" if state.synthetic else "acceptance"
    kinds = list(state.draft_kinds)

    def order(r: DecodeResult) -> tuple:  # plain first, then each setting, both arms each
        kind = kinds.index(r.draft_kind) if r.draft_kind in kinds else len(kinds)
        return (r.context, r.depth > 0, kind, r.depth, ARMS.index(r.arm) if r.arm in ARMS else 2)

    mine = sorted((r for r in state.decode_results if r.phase == phase), key=order)
    rows = [_decode_row(state, r) for r in mine]
    head = ["context", "arm", "draft", "tok/s [95% CI]", "vs plain [95% CI]"]
    head += [f"{acc} P(i ∣ 1..i-1)", "accepted / verify", "acceptance rule", SHARE_HEAD]
    head += ["verify ms", "L=1 check"]
    return table([*head, "warnings (left out of verdicts)"], rows)


def _phase_section(state: DashboardState, phase: str, kind: str) -> list[str]:
    summary = next((s for s in state.summaries if s.phase == phase), None)
    body = ""
    table = view_of(kind).table
    if table is Table.SWEEP:
        body = _sweep_table(state, phase)
    elif table is Table.DECODE:
        body = _decode_table(state, phase)
    elif summary is not None:
        body = indexer_table(summary)
    running = summary is None and state.status == "running" and phase == state.phase.name
    out = [f"## Phase {phase} ({kind})" + (" — in progress" if running else ""), "", body]
    if summary is not None and summary.verdict:
        out += ["", f"Verdict: {summary.verdict}"]
    note = inversion_note(summary) if summary is not None and table is Table.SWEEP else None
    if note:
        out += ["", f"Note: {note}"]
    return out + [""]


def summary_markdown(state: DashboardState) -> str:
    lines = ["# mlatui run summary", ""]
    if state.header is not None:
        lines += header_lines(state.header)
    lines += [f"- status: {_status(state)}"]
    lines += ["", f"**Verdict:** {verdict_line(state)}", ""]
    if state.validity:
        question = (
            f"{PATCH_QUESTION} valid = no measurable change, paired ratio 1 ± 2%; invalid = it does"
            if state.header is not None and is_patch_review(state.header.settings)
            else "both arms take the same branch: paired ratio 1 ± 2%"
        )
        lines += [f"## L = 1 check ({question})", ""]
        lines += [_l1_table(state), ""]
    if any(c.quantity == Quantity.MARGINAL_MS for c in sweep_cells(state)):
        lines += ["## Marginal cost of a second query (L=2 − L=1, median over rounds)", ""]
        lines += [_marginal_table(state), ""]
    for phase, kind in _phases(state):
        lines += _phase_section(state, phase, kind)
    if state.drifts:
        lines += [drift_line(state.drifts), ""]
    left_out = sorted({c for (_, c), v in state.validity.items() if not v.valid})
    if left_out and state.status != "running":
        lines.append(
            "Left out of verdicts (L=1 check invalid or inconclusive): "
            + ", ".join(map(str, left_out))
        )
    return "\n".join(lines).rstrip() + "\n"


# -- CSV ----------------------------------------------------------------------------------------


def _cell_row(table_name: str, kind: str, cell: Cell, state: DashboardState) -> dict:
    median, low, high = cell.ci.cells()
    return {
        "table": table_name,
        "phase": cell.phase,
        "kind": kind,
        "context": cell.context,
        "width": cell.width,
        "arm": cell.arm,
        "quantity": cell.quantity.value,
        "median": median,
        "low": low,
        "high": high,
        "n": "" if cell.n is None else cell.n,
        "rounds": "" if cell.rounds is None else cell.rounds,
        "check": check(state, cell.phase, cell.context).value,
        "draft": cell.draft_kind,
    }


def csv_rows(state: DashboardState) -> list[dict]:
    """Tidy rows: table is meta | verdict | l1_check | l1_pooled | marginal | sweep | decode |
    indexer;
    `width` is L in sweep rows and the draft depth (0 = plain) in decode rows."""
    rows: list[dict] = []
    if state.header is not None:
        rows += [
            {"table": "meta", "quantity": f.key, "text": f.value}
            for f in header_fields(state.header)
        ]
    rows.append({"table": "meta", "quantity": "status", "text": _status(state)})
    rows.append({"table": "verdict", "text": verdict_line(state)})
    for (phase, context), v in checks_in_order(state):
        base: dict[str, Any] = {"table": "l1_check", "phase": phase}
        base["kind"] = state.phase_kinds.get(phase, "")
        base |= {"context": context, "width": 1, "rounds": v.rounds or ""}
        base["check"] = check(state, phase, context).value
        f = l1_figures(v, base["kind"], state.decode_results, phase, context)
        quantity = "token_ms" if f.per_token else "step_ms"  # per token of plain blocks
        for arm, ms in zip(ARMS, (f.stock_ms, f.patched_ms), strict=True):
            rows.append(base | {"arm": arm, "quantity": quantity, "median": sig(ms, 4)})
        if v.ratio is not None:
            m, lo, hi = Ci.of(v.ratio).cells()
            rows.append(base | {"quantity": "ratio", "median": m, "low": lo, "high": hi})
    for p in sorted(state.pooled.values(), key=lambda p: p.t):
        m, lo, hi = Ci.of(p.ratio).cells()
        rows.append(
            {"table": "l1_pooled", "phase": p.phase, "kind": state.phase_kinds.get(p.phase, "")}
            | {"width": 1, "quantity": "ratio", "median": m, "low": lo, "high": hi}
            | {"n": p.quads, "rounds": p.rounds, "check": p.outcome, "text": pooled_note(p)}
        )
    for phase in sweep_phases(state):
        for cell in sweep_cells(state, phase):
            if cell.quantity == Quantity.MARGINAL_MS:
                rows.append(_cell_row("marginal", "sweep", cell, state))
    for phase, kind in _phases(state):
        table = view_of(kind).table
        if table is Table.SWEEP:
            for cell in sweep_cells(state, phase):
                if cell.quantity != Quantity.MARGINAL_MS:
                    rows.append(_cell_row("sweep", kind, cell, state))
        elif table is Table.DECODE:
            for cell in decode_cells(state):
                if cell.phase == phase:
                    rows.append(_cell_row("decode", kind, cell, state))
        else:
            summary = next((s for s in state.summaries if s.phase == phase), None)
            for r in summary.rows if summary else ():
                row = {"table": kind, "phase": phase, "kind": kind, "arm": r.get("arm", "")}
                row |= {"context": r.get("context", ""), "width": r.get("width", "")}
                row |= {
                    "quantity": f"{r.get('part', kind)}_ms",
                    "median": sig(r.get("median_ms"), 4),
                    "low": sig(r.get("ci_low_ms"), 4),
                    "high": sig(r.get("ci_high_ms"), 4),
                    "n": r.get("n", ""),
                    "rounds": r.get("rounds", ""),
                    "text": r.get("layer", ""),
                }
                outcome = r.get("outcome") or ("valid" if r.get("valid", True) else "invalid")
                rows.append(row | {"check": outcome})
    for result in state.decode_results:
        if result.rejected_by_bound and result.bound is not None:
            phase = result.phase
            rows.append(
                {"table": "decode", "phase": phase, "kind": state.phase_kinds.get(phase, "")}
                | {"context": result.context, "width": result.depth, "arm": result.arm}
                | {"quantity": "rejected_by_bound", "high": sig(result.bound.value, 3)}
                | {"text": rejection_text(result.bound), "draft": result.draft_kind}
            )
        shares = (
            ("distinct_4gram_share", result.distinct_4gram_share),
            ("distinct_4gram_share_across", result.distinct_4gram_share_across),
        )
        for quantity, share in shares:
            if share is not None:
                phase = result.phase
                rows.append(
                    {"table": "decode", "phase": phase, "kind": state.phase_kinds.get(phase, "")}
                    | {"context": result.context, "width": result.depth, "arm": result.arm}
                    | {"quantity": quantity, "median": sig(share, 3), "draft": result.draft_kind}
                )
        if result.warnings:
            phase = result.phase
            rows.append(
                {"table": "decode", "phase": phase, "kind": state.phase_kinds.get(phase, "")}
                | {"context": result.context, "width": result.depth, "arm": result.arm}
                | {"quantity": "warnings", "text": "; ".join(result.warnings)}
                | {"draft": result.draft_kind}
            )
    return rows


def summary_csv(state: DashboardState) -> str:
    return csv_text(CSV_COLUMNS, csv_rows(state), extras="raise")
