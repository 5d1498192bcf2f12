"""The one printer of a run's summary (mlatui.views.summary.RunSummary): the markdown that
`bench` prints, the `e` export writes and `replay --dump` prints, and the export's CSV, at any
moment of a run (pure Python).

Both carry the run metadata, the verdict strip, the L = 1 checks (with the pooled check's note),
the marginal cost of the second query, one table per phase (sweep and tune/decode never share a
table; the indexer's parts have their own; the CSV has a `table` column to filter on) and an A/A
run's harness bias. Numbers are rounded to what their CI supports (mlatui.views.units); invalid
contexts (failed L = 1 check) are marked, never mixed in.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mlatui.config.phase_kind import Pass
from mlatui.measure.acceptance import rejection_text
from mlatui.measure.plans import Setting
from mlatui.stream.event_base import Interval
from mlatui.stream.events import (
    ARMS,
    Estimate,
    PhaseSummary,
    PooledValidity,
    arm_label,
    ratio_label,
)
from mlatui.stream.phase_rows import IndexerRow, Quantity, SweepRow
from mlatui.stream.phrases import check_mark
from mlatui.stream.phrases import ci_text as fixed_ci_text
from mlatui.views.dashboard_views import Table
from mlatui.views.mdtable import csv_text, table
from mlatui.views.run_meta import PATCH_QUESTION, header_fields, header_lines, is_patch_review
from mlatui.views.summary import DecodeRow, PhaseFigures, RunSummary, drift_line
from mlatui.views.summary_doc import document, document_json
from mlatui.views.units import Ci, ci_text, mbu_cell, ms_text, ratio_text, sig
from mlatui.views.verdict_strip import parts_line

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


def null_bias_table(finals: Sequence[Estimate]) -> str:
    """A/A runs: the harness's own bias per pass, context and width (the paired A/B ratio, whose
    true value is 1), from the passes' final estimates."""
    rows = []
    for e in finals:
        for r in e.rows:
            if r.quantity == "ratio":
                rows.append(
                    [
                        e.phase.rsplit("/", 1)[1],
                        e.context,
                        r.width,
                        ratio_text(Ci(r.median, r.low, r.high)),
                        "yes" if r.low <= 1 <= r.high else "NO",
                        r.n,
                    ]
                )
    from mlatui.measure.estimates import CELL_ALPHA, judge_estimates

    judged = judge_estimates(finals)
    if judged is None:
        return ""
    verdict = "consistent with no arm difference" if judged.consistent else "a harness difference"
    return (
        table(["pass", "context", "L", "A/B paired [95% CI]", "CI contains 1", "quads"], rows)
        + f"\n\n{judged.excluded} of {judged.cells} 95% CIs exclude 1. With no arm difference "
        f"each does so with {CELL_ALPHA:.0%} chance: {judged.excluded} or more of {judged.cells} "
        f"in {judged.chance:.0%} of A/A runs (binomial; cells of one context share rounds, so a "
        f"guide): **{verdict}**."
    )


def pooled_note(p: PooledValidity) -> str:
    """What a pooled check pooled, how, and what it decided."""
    text = (
        f"Pooled L = 1 check after {p.phase}: {p.estimator}; {p.ci_method}; contexts "
        f"{', '.join(map(str, p.contexts))} ({p.rounds} rounds, {p.quads} quads): {p.outcome}."
    )
    if p.decided:
        text += (
            f" Valid (pooled) at {', '.join(map(str, p.decided))}: inconclusive alone, own CI "
            "contains 1.00."
        )
    if p.undecided:
        why = "own CI excludes 1.00" if p.valid else f"the pooled check is {p.outcome}"
        text += f" Still inconclusive at {', '.join(map(str, p.undecided))} ({why})."
    return text


def inversion_note(summary: PhaseSummary) -> str | None:
    """The line a run gets when, at a context whose L = 1 check passed, an arm's L = 2 step is
    significantly cheaper than its own L = 1 step (paired within rounds: the CI of L=2/L=1
    lies below 1), so a reader does not take it for a measuring fault."""
    found = []
    rows = summary.rows_of(SweepRow)
    for r in rows:
        high = r.vs_l1_high
        if r.width != 2 or not r.valid or high is None or r.vs_l1 is None or not high < 1:
            continue
        one = next(
            (o for o in rows if (o.context, o.width, o.arm) == (r.context, 1, r.arm)),
            None,
        )
        ms = f", {ms_text(r.median_ms)} vs {ms_text(one.median_ms)} ms" if one else ""
        ratio = ratio_text(Ci(r.vs_l1, r.vs_l1_low, r.vs_l1_high))
        found.append(f"{arm_label(r.arm, summary.phase)} at T={r.context}: L=2/L=1 {ratio}{ms}")
    if not found:
        return None
    return (
        "plain decode is slower than a 2-query verify here: the runtime's L = 1 path costs more "
        f"than its L = 2 step ({'; '.join(found)}, paired within rounds). Both arms take the "
        "runtime's own L = 1 branch, so this is the runtime's cost, not a measuring fault."
    )


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


def _or_dash(count: int | None) -> str:
    return "-" if count is None else str(count)


def _outcome(r: IndexerRow) -> str:
    return r.outcome or ("valid" if r.valid else "invalid")


def indexer_table(summary: PhaseSummary) -> str:
    """The indexer phase's own table: one sparse layer of the model, per part, context, S, arm;
    the paired stock/patched (stock rows), the pool's rebuilds/reuses and the untimed output
    check; the S = 1 check (a row at S = 1 carries its paired ratio)."""

    def agree(r: IndexerRow) -> str:
        if r.selection_agreement is not None:
            return f"{r.selection_agreement:.0%} same"
        return "-" if r.parity_max_abs is None else f"max Δ {r.parity_max_abs:.1e}"

    rows = [
        [
            r.part,
            r.layer,
            r.context,
            r.width,
            arm_label(r.arm, summary.phase),
            fixed_ci_text(r.median_ms, r.ci_low_ms, r.ci_high_ms, 3),
            fixed_ci_text(r.ratio, r.ratio_low, r.ratio_high, 3, "×") if r.arm == "stock" else "",
            f"{_or_dash(r.pool_rebuilds)}/{_or_dash(r.pool_reuses)}",
            agree(r),
            _outcome(r),
        ]
        for r in summary.rows_of(IndexerRow)
    ]
    head = ["part", "layer", "context", "S", "arm", "median ms [95% CI]"]
    head += [
        f"{ratio_label(summary.phase)} paired [95% CI]",
        "pool rebuilds/reuses",
        "arms' outputs",
    ]
    return table([*head, "S=1 check"], rows)


def _slot_names(phases) -> tuple[str, str, str]:
    """Column names of the two arm slots over several phases: 'stock', 'patched' and their
    ratio, or 'A', 'B' when every phase is an A/A pass (the phase column says what ran)."""
    if phases and all(Pass.of(p).null for p in phases):
        return "A", "B", "A/B"
    return "stock", "patched", "stock/patched"


def _l1_table(s: RunSummary) -> str:
    """Per (phase, context) its own paired L = 1 ratio, the check and its basis (own, or pooled);
    then a row per pooled check, and what each pooled."""
    rows = []
    notes: list[str] = []  # rows whose L = 1 figures are not step times say what they are
    for c in s.checks:
        v, f = c.validity, c.figures
        star = " *" if f.per_token else ""
        if f.per_token and f.note not in notes:
            notes.append(f.note)
        rows.append(
            [
                c.phase,
                c.context,
                ms_text(f.stock_ms) + star,
                ms_text(f.patched_ms) + star,
                ratio_text(v.ratio),
                f"{v.diff_pct:+.1f}%",
                v.rounds or "–",
                f"{c.check.mark} {v.verdict}",
                v.basis.value,
            ]
        )
    for p in s.pooled:
        rows.append(
            [
                f"{p.phase} (pooled)",
                f"{len(p.contexts)} contexts",
                "–",
                "–",
                ratio_text(p.ratio),
                f"{(p.ratio.median - 1) * 100:+.1f}%",
                p.rounds,
                f"{check_mark(p.outcome)} {p.outcome}",
                "pooled",
            ]
        )
    a, b, pair = _slot_names([c.phase for c in s.checks])
    head = ["phase", "context", f"{a} L=1 ms", f"{b} L=1 ms", f"paired {pair} [95% CI]"]
    out = table([*head, "diff", "rounds", f"CI within ±{s.tolerance_pct:g}%", "basis"], rows)
    out += "".join(f"\n\n\\* L=1 ms {note}." for note in notes)
    return out + "".join("\n\n" + pooled_note(p) for p in s.pooled)


def _marginal_table(s: RunSummary) -> str:
    phases = list(dict.fromkeys(m.phase for m in s.marginal))
    several = len(phases) > 1
    rows = [
        ([m.phase] if several else [])
        + [m.context, ci_text(m.stock), ci_text(m.patched), f"{m.check.mark} {m.check}"]
        for m in s.marginal
    ]
    a, b, _ = _slot_names(phases)
    head = ["context", f"{a} Δ2 ms [95% CI]", f"{b} Δ2 ms [95% CI]"]
    return table((["phase"] if several else []) + head + ["L=1 check"], rows)


def _sweep_table(phase: PhaseFigures) -> str:
    rows = [
        [
            r.context,
            r.width,
            ci_text(r.stock),
            ci_text(r.patched),
            ratio_text(r.ratio),
            (ratio_text(r.vs_l1) if r.vs_l1 is not None else "–") if r.width > 1 else "1",
            r.rounds or "–",
            r.drifting,
            f"{r.check.mark} {r.check}",
        ]
        for r in phase.sweep
    ]
    a, b = (arm_label(arm, phase.name) for arm in ARMS)
    head = ["context", "L", f"{a} ms [95% CI]", f"{b} ms [95% CI]"]
    head += [f"{ratio_label(phase.name)} paired [95% CI]", f"{b} L / L=1 [95% CI]"]
    head += ["rounds", "drifting rounds", "L=1 check"]
    if any(r.mbu or r.gb_s for r in phase.sweep):  # recordings that carry the steps' bytes
        head += [f"{a} MBU [95% CI] · GB/s", f"{b} MBU [95% CI] · GB/s"]
        for row, r in zip(rows, phase.sweep, strict=True):
            row += [mbu_cell(r.mbu.get(a), r.mbu_most.get(a), r.gb_s.get(a)) for a in ARMS]
    return table(head, rows)


def _positions(values) -> str:
    return " ".join("–" if v is None else f"{v:.2f}" for v in values) or "–"


def _decode_row(row: DecodeRow) -> list:
    r, c = row.result, row.check
    head = [r.context, arm_label(r.arm, r.phase), Setting(r.draft_kind, r.depth).label]
    if r.tok_s is None:  # rejected by bound: no blocks ran
        said = rejection_text(r.bound) if r.bound is not None else "not measured"
        return [*head, "not measured", said, *["–"] * 5, ms_text(r.verify_ms_median)] + [
            f"{c.mark} {c}",
            "; ".join(r.warnings) or "–",
        ]
    spec = r.depth > 0
    return [
        *head,
        ci_text(r.tok_s),
        ratio_text(r.vs_plain) if spec else "1",
        _positions(r.acceptance_conditional) if spec else "–",
        _positions(r.acceptance_by_position) if spec else "–",
        "–" if r.mean_accepted is None else f"{r.mean_accepted:.2f}/{r.depth}",
        rule_text(r.acceptance_rule, r.sampling.get("temperature")) if spec else "–",
        share_text(r.distinct_4gram_share, r.distinct_4gram_share_across),
        ms_text(r.verify_ms_median),
        f"{c.mark} {c}",
        "; ".join(r.warnings) or "–",
    ]


def _decode_table(s: RunSummary, phase: PhaseFigures) -> str:
    acc = "acceptance (synthetic)" if s.synthetic else "acceptance"
    head = ["context", "arm", "draft", "tok/s [95% CI]", "vs plain [95% CI]"]
    head += [f"{acc} P(i ∣ 1..i-1)", f"{acc} P(i)", "accepted / verify", "acceptance rule"]
    head += [SHARE_HEAD, "verify ms", "L=1 check"]
    return table([*head, "warnings (left out of verdicts)"], [_decode_row(r) for r in phase.decode])


def _phase_section(s: RunSummary, phase: PhaseFigures) -> list[str]:
    body = ""
    if phase.table is Table.SWEEP:
        body = _sweep_table(phase)
    elif phase.table is Table.DECODE:
        body = _decode_table(s, phase)
    elif phase.summary is not None:
        body = indexer_table(phase.summary)
    title = f"## Phase {phase.name} ({phase.kind})" + (" — in progress" if phase.running else "")
    out = [title, "", body]
    note = inversion_note(phase.summary) if phase.summary and phase.table is Table.SWEEP else None
    return out + (["", f"Note: {note}"] if note else []) + [""]


def verdict_text(s: RunSummary, width: int = 1000) -> str:
    """The verdict strip's line (each part in the longest form that fits `width`)."""
    return parts_line(s.verdict, width)


def summary_markdown(s: RunSummary) -> str:
    """The run's summary: `bench`'s stdout, the `e` export and `replay --dump` print this."""
    lines = ["# mlatui run summary", ""]
    if s.header is not None:
        lines += header_lines(s.header)
    lines += [f"- status: {s.status_text}"]
    lines += ["", f"**Verdict:** {verdict_text(s)}", ""]
    if s.checks:
        question = (
            f"{PATCH_QUESTION} valid = no measurable change, paired ratio 1 ± 2%; invalid = it does"
            if s.header is not None and is_patch_review(s.header.settings)
            else "both arms take the same branch: paired ratio 1 ± 2%"
        )
        lines += [f"## L = 1 check ({question})", "", _l1_table(s), ""]
    if s.marginal:
        lines += ["## Marginal cost of a second query (L=2 − L=1, median over rounds)", ""]
        lines += [_marginal_table(s), ""]
    for phase in s.phases:
        lines += _phase_section(s, phase)
    bias = null_bias_table(s.null_finals)
    if bias:
        lines += ["## A/A: harness bias (both arms the same variant; the true ratio is 1)", ""]
        lines += [bias, ""]
    if s.drifts:
        lines += [drift_line(s.drifts), ""]
    if s.left_out:
        lines.append(
            "Left out of verdicts (L=1 check invalid or inconclusive): "
            + ", ".join(map(str, s.left_out))
        )
    return "\n".join(lines).rstrip() + "\n"


# -- CSV ----------------------------------------------------------------------------------------


def _row(table_name: str, phase: str, kind: str, context: int, width: int, arm: str) -> dict:
    return {"table": table_name, "phase": phase, "kind": kind, "context": context} | {
        "width": width,
        "arm": arm,
    }


def _ci_cells(ci: Ci | Interval | None) -> dict:
    if ci is None:
        return {}
    median, low, high = (Ci.of(ci) if isinstance(ci, Interval) else ci).cells()
    return {"median": median, "low": low, "high": high}


def _sweep_rows(phase: PhaseFigures) -> list[dict]:
    rows = []
    for r in phase.sweep:
        check = {"rounds": "" if r.rounds is None else r.rounds, "check": r.check.value}
        figures = [
            (arm, Quantity.STEP_MS, ci) for arm, ci in zip(ARMS, (r.stock, r.patched), strict=True)
        ]
        figures += [("", Quantity.RATIO, r.ratio), (ARMS[1], Quantity.VS_L1, r.vs_l1)]
        for quantity, by_arm in ((Quantity.GB_S, r.gb_s), (Quantity.MBU, r.mbu)):
            figures += [(arm, quantity, by_arm.get(arm)) for arm in ARMS]
        figures += [(arm, Quantity.MBU_MOST, r.mbu_most.get(arm)) for arm in ARMS]
        for arm, quantity, ci in figures:
            if ci is not None:
                base = _row("sweep", phase.name, phase.kind, r.context, r.width, arm)
                rows.append(base | {"quantity": quantity.value} | _ci_cells(ci) | check)
    return rows


def _decode_rows(phase: PhaseFigures) -> list[dict]:
    rows = []
    for row in phase.decode:
        r = row.result
        base = _row("decode", phase.name, phase.kind, r.context, r.depth, r.arm)
        base |= {"check": row.check.value, "draft": r.draft_kind}
        base |= {"rounds": r.rounds or ""}
        if r.tok_s is not None:
            rows.append(base | {"quantity": "tok_s", "n": r.tokens} | _ci_cells(r.tok_s))
            if r.depth and r.vs_plain is not None:
                rows.append(base | {"quantity": "vs_plain", "n": r.tokens} | _ci_cells(r.vs_plain))
        elif r.bound is not None:
            rows.append(
                base
                | {"quantity": "rejected_by_bound", "high": sig(r.bound.value, 3)}
                | {"text": rejection_text(r.bound)}
            )
        shares = (
            ("distinct_4gram_share", r.distinct_4gram_share),
            ("distinct_4gram_share_across", r.distinct_4gram_share_across),
        )
        for quantity, share in shares:
            if share is not None:
                rows.append(base | {"quantity": quantity, "median": sig(share, 3)})
        if r.warnings:
            rows.append(base | {"quantity": "warnings", "text": "; ".join(r.warnings)})
    return rows


def _phase_rows(phase: PhaseFigures) -> list[dict]:
    """A kind shown by its own rows (the indexer's parts)."""
    rows = []
    for r in phase.summary.rows_of(IndexerRow) if phase.summary is not None else ():
        row = _row(phase.kind, phase.name, phase.kind, r.context, r.width, "")
        row |= {"arm": r.arm, "quantity": f"{r.part}_ms"}
        row |= {
            "median": sig(r.median_ms, 4),
            "low": sig(r.ci_low_ms, 4),
            "high": sig(r.ci_high_ms, 4),
            "n": r.n,
            "rounds": r.rounds,
            "text": r.layer,
        }
        rows.append(row | {"check": _outcome(r)})
    return rows


def csv_rows(s: RunSummary) -> list[dict]:
    """Tidy rows: table is meta | verdict | l1_check | l1_pooled | marginal | sweep | decode |
    indexer; `width` is L in sweep rows and the draft depth (0 = plain) in decode rows."""
    rows: list[dict] = []
    if s.header is not None:
        rows += [
            {"table": "meta", "quantity": f.key, "text": f.value} for f in header_fields(s.header)
        ]
    rows.append({"table": "meta", "quantity": "status", "text": s.status_text})
    rows.append({"table": "verdict", "text": verdict_text(s)})
    kinds = {p.name: p.kind for p in s.phases}
    for c in s.checks:
        v, f = c.validity, c.figures
        base: dict[str, Any] = _row("l1_check", c.phase, kinds.get(c.phase, ""), c.context, 1, "")
        base |= {"rounds": v.rounds or "", "check": c.check.value}
        quantity = "token_ms" if f.per_token else "step_ms"  # per token of plain blocks
        for arm, ms in zip(ARMS, (f.stock_ms, f.patched_ms), strict=True):
            rows.append(base | {"arm": arm, "quantity": quantity, "median": sig(ms, 4)})
        if v.ratio is not None:
            rows.append(base | {"quantity": "ratio"} | _ci_cells(v.ratio))
    for p in s.pooled:
        rows.append(
            {"table": "l1_pooled", "phase": p.phase, "kind": kinds.get(p.phase, "")}
            | {"width": 1, "quantity": "ratio"}
            | _ci_cells(p.ratio)
            | {"n": p.quads, "rounds": p.rounds, "check": p.outcome, "text": pooled_note(p)}
        )
    for m in s.marginal:
        for arm, ci in zip(ARMS, (m.stock, m.patched), strict=True):
            if ci is not None:
                base = _row("marginal", m.phase, kinds.get(m.phase, ""), m.context, 2, arm)
                rows.append(
                    base
                    | {"quantity": Quantity.MARGINAL_MS.value, "check": m.check.value}
                    | _ci_cells(ci)
                )
    for phase in s.phases:
        if phase.table is Table.SWEEP:
            rows += _sweep_rows(phase)
        elif phase.table is Table.DECODE:
            rows += _decode_rows(phase)
        else:
            rows += _phase_rows(phase)
    return rows


def summary_csv(s: RunSummary) -> str:
    return csv_text(CSV_COLUMNS, csv_rows(s), extras="raise")


def summary_json(s: RunSummary) -> str:
    """The summary as one JSON document (mlatui.views.summary_doc): what `bench --format json`
    and `replay --dump --format json` print."""
    return document_json(document(s))
