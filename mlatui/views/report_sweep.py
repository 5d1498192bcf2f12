"""The sweep's markdown tables: step ms and paired ratios per width, L = 1 checks, A/A bias."""

from __future__ import annotations

from collections.abc import Sequence

from mlatui.config.phase_kind import Pass
from mlatui.stream.events import (
    ARMS,
    DecodeResult,
    Event,
    PhaseStart,
    PhaseSummary,
    PooledValidity,
    Validity,
    arm_label,
)
from mlatui.stream.phrases import check_word
from mlatui.views.l1_figures import l1_figures
from mlatui.views.mdtable import check as _check
from mlatui.views.mdtable import ci
from mlatui.views.mdtable import fmt as _fmt
from mlatui.views.mdtable import table as _table
from mlatui.views.rounding import Ci, ends
from mlatui.views.units import ratio_text


def sweep_table(summary: PhaseSummary) -> str:
    """Per context and width: each arm's step ms and the paired stock/patched ratio, medians over
    rounds with 95% bootstrap CIs; then the marginal cost of the second query per arm. An A/A
    pass names its slots A and B (`arm_label`) and its ratio A/B."""
    med = {(r["context"], r["width"], r["arm"]): r for r in summary.rows}
    keys = sorted({(c, w) for c, w, _ in med})
    if keys and "ratio" not in next(iter(med.values())):
        return _legacy_sweep_table(summary)
    null = Pass.of(summary.phase).null
    a, b = (arm_label(arm, summary.phase) for arm in ARMS)
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
            "A/B paired [95% CI]" if null else f"{a}/{b} paired [95% CI]",
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
    finals = [e for e in events if isinstance(e, Estimate) and e.final and Pass.of(e.phase).null]
    for e in finals:
        for r in e.rows:
            if r["quantity"] == "ratio":
                rows.append(
                    [
                        e.phase.rsplit("/", 1)[1],
                        e.context,
                        r["width"],
                        ratio_text(Ci(r["median"], r["low"], r["high"])),
                        "yes" if r["low"] <= 1 <= r["high"] else "NO",
                        r["n"],
                    ]
                )
    from mlatui.measure.multiplicity import CELL_ALPHA, judge_estimates

    judged = judge_estimates(finals)
    if judged is None:
        return ""
    verdict = "consistent with no arm difference" if judged.consistent else "a harness difference"
    return (
        _table(["pass", "context", "L", "A/B paired [95% CI]", "CI contains 1", "quads"], rows)
        + f"\n\n{judged.excluded} of {judged.cells} 95% CIs exclude 1. With no arm difference "
        f"each does so with {CELL_ALPHA:.0%} chance: {judged.excluded} or more of {judged.cells} "
        f"in {judged.chance:.0%} of A/A runs (binomial; cells of one context share rounds, so a "
        f"guide): **{verdict}**."
    )


def final_checks(events: Sequence[Event]) -> list[Validity]:
    """Each (phase, context)'s L = 1 check as it ended: a pooled decision replaces the own one
    (in the order the checks were first made)."""
    out: dict[tuple[str, int], Validity] = {}
    for v in events:
        if isinstance(v, Validity):
            out[(v.phase, v.context)] = v
    return list(out.values())


def validity_table(events: Sequence[Event]) -> str:
    """Per (phase, context) its own paired L = 1 ratio and the check, with its basis (own, or
    pooled: decided by the pooled check); then a row per pooled check and what it was."""
    rows = []
    kinds = {e.phase: e.kind for e in events if isinstance(e, PhaseStart)}
    results = [e for e in events if isinstance(e, DecodeResult)]
    notes: list[str] = []  # rows whose L = 1 figures are not step times say what they are
    for v in final_checks(events):
        paired = ci(*ends(v.ratio), digits=4)
        f = l1_figures(v, kinds.get(v.phase, ""), results, v.phase, v.context)
        star = " *" if f.per_token else ""
        if f.per_token and f.note not in notes:
            notes.append(f.note)
        rows.append(
            [
                v.phase,
                v.context,
                ("-" if f.stock_ms is None else f"{f.stock_ms:.3f}") + star,
                ("-" if f.patched_ms is None else f"{f.patched_ms:.3f}") + star,
                paired,
                f"{v.diff_pct:+.2f}%",
                v.rounds or "-",
                check_word(v.verdict),
                v.basis.value,
            ]
        )
    pooled = [e for e in events if isinstance(e, PooledValidity)]
    for p in pooled:
        rows.append(pooled_row(p, 4))
    tol = events_tolerance(events)
    null = bool(rows) and all(Pass.of(str(r[0])).null for r in rows)  # slots A, B: see the phase
    out = _table(
        [
            "phase",
            "context",
            "A L=1 ms" if null else "stock L=1 ms",
            "B L=1 ms" if null else "patched L=1 ms",
            "paired ratio [95% CI]",
            "diff",
            "rounds",
            f"CI within ±{tol:g}%",
            "basis",
        ],
        rows,
    )
    out += "".join(f"\n\n\\* L=1 ms {note}." for note in notes)
    return out + "".join("\n\n" + pooled_note(p) for p in pooled)


def pooled_row(p: PooledValidity, digits: int) -> list:
    """A pooled check as a row of the L = 1 table (its contexts in the context column)."""
    return [
        f"{p.phase} (pooled)",
        f"{len(p.contexts)} contexts",
        "-",
        "-",
        ci(*ends(p.ratio), digits=digits),
        f"{(p.ratio.median - 1) * 100:+.2f}%",
        p.rounds,
        check_word(p.outcome),
        "pooled",
    ]


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


def events_tolerance(events: Sequence[Event]) -> float:
    return next((v.tolerance_pct for v in events if isinstance(v, Validity)), 2.0)


def inversion_note(summary: PhaseSummary) -> str | None:
    """The line a run gets when, at a context whose L = 1 check passed, an arm's L = 2 step is
    significantly cheaper than its own L = 1 step (paired within rounds: the CI of L=2/L=1
    lies below 1), so a reader does not take it for a measuring fault."""
    found = []
    for r in summary.rows:
        high = r.get("vs_l1_high")
        if r["width"] != 2 or not r.get("valid") or high is None or not high < 1:
            continue
        one = next(
            (
                o
                for o in summary.rows
                if (o["context"], o["width"], o["arm"]) == (r["context"], 1, r["arm"])
            ),
            None,
        )
        ms = f", {r['median_ms']:.2f} vs {one['median_ms']:.2f} ms" if one else ""
        found.append(
            f"{arm_label(r['arm'], summary.phase)} at T={r['context']}: L=2/L=1 "
            f"{ci(r['vs_l1'], r['vs_l1_low'], r['vs_l1_high'])}{ms}"
        )
    if not found:
        return None
    return (
        "plain decode is slower than a 2-query verify here: the runtime's L = 1 path costs more "
        f"than its L = 2 step ({'; '.join(found)}, paired within rounds). Both arms take the "
        "runtime's own L = 1 branch, so this is the runtime's cost, not a measuring fault."
    )
