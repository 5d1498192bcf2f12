"""The sweep's markdown tables: step ms and paired ratios per width, L = 1 checks, A/A bias."""

from __future__ import annotations

from collections.abc import Sequence

from mlatui.stream.events import (
    Estimate,
    Event,
    PhaseSummary,
    PooledValidity,
    Validity,
    arm_label,
)
from mlatui.views.mdtable import table as _table
from mlatui.views.rounding import Ci
from mlatui.views.units import ms_text, ratio_text


def null_bias_table(finals: Sequence[Estimate]) -> str:
    """A/A runs: the harness's own bias per pass, context and width (the paired A/B ratio, whose
    true value is 1), from the passes' final estimates."""
    rows = []
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
        ms = f", {ms_text(r['median_ms'])} vs {ms_text(one['median_ms'])} ms" if one else ""
        ratio = ratio_text(Ci(r["vs_l1"], r["vs_l1_low"], r["vs_l1_high"]))
        found.append(
            f"{arm_label(r['arm'], summary.phase)} at T={r['context']}: L=2/L=1 {ratio}{ms}"
        )
    if not found:
        return None
    return (
        "plain decode is slower than a 2-query verify here: the runtime's L = 1 path costs more "
        f"than its L = 2 step ({'; '.join(found)}, paired within rounds). Both arms take the "
        "runtime's own L = 1 branch, so this is the runtime's cost, not a measuring fault."
    )
