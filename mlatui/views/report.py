"""Each phase kind's markdown table and the run's checks, from its events alone (pure Python:
used by `bench`, the TUI's export and replays on machines without MLX): the sweep's step ms and
paired ratios per width, its L = 1 checks and the A/A bias; the decode / tune tables' words; the
indexer's table. Invalid contexts (failed L = 1 check) are marked, never mixed in."""

from __future__ import annotations

from collections.abc import Sequence

from mlatui.stream.events import (
    Estimate,
    Event,
    PhaseSummary,
    PooledValidity,
    Validity,
    arm_label,
    ratio_label,
)
from mlatui.stream.phase_rows import IndexerRow, SweepRow
from mlatui.views.mdtable import ci
from mlatui.views.mdtable import table as _table
from mlatui.views.rounding import Ci
from mlatui.views.units import ms_text, ratio_text


def invalid_contexts(events: Sequence[Event]) -> list[tuple[str, int, float, str]]:
    """(phase, context, signed diff %, outcome) of every context whose L = 1 check was not valid."""
    return [
        (v.phase, v.context, v.diff_pct, v.verdict) for v in final_checks(events) if not v.valid
    ]


# The event types the summary folds: a replay keeps only these (not every step).
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
            ci(r.median_ms, r.ci_low_ms, r.ci_high_ms, 3),
            ci(r.ratio, r.ratio_low, r.ratio_high, 3, "×") if r.arm == "stock" else "",
            f"{_or_dash(r.pool_rebuilds)}/{_or_dash(r.pool_reuses)}",
            agree(r),
            r.outcome or ("valid" if r.valid else "invalid"),
        ]
        for r in summary.rows_of(IndexerRow)
    ]
    head = ["part", "layer", "context", "S", "arm", "median ms [95% CI]"]
    head += [
        f"{ratio_label(summary.phase)} paired [95% CI]",
        "pool rebuilds/reuses",
        "arms' outputs",
    ]
    return _table([*head, "S=1 check"], rows)
