"""What the headless benchmarks print on stdout, from their records alone (pure: a record file
prints the same tables again on any machine)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mlatui.measure.indexer_records import IndexerRecord
from mlatui.stream.phrases import CiStyle, ci_text
from mlatui.views.mdtable import env_line, fmt, num, table


def indexer_report(
    records: Sequence[IndexerRecord],
    skipped: Sequence[tuple[str, int]] = (),
    max_seconds: float | None = None,
) -> str:
    """`mlatui bench indexer`'s stdout up to the records' path: the settings line, the table, the
    verdict lines, each part's S = 1 note, and what the time limit left undecided."""
    first = records[0].settings
    out = [
        f"# mlatui bench indexer\n\n{env_line(records[0].env)}, dtype {first['dtype']}, "
        f"rounds {first['min_rounds']} (up to {first['max_rounds']} while the S=1 check is "
        f"inconclusive), warm-up {first['warmup']}; {first['order']}; medians over rounds, "
        f"{first['estimators'].removeprefix('median over rounds with ')}\n",
        summary_table(records),
        "",
    ]
    out += [f"- {line}" for line in verdict(records)]
    out += [
        f"- {r.bench} T={r.context}: {r.note}" for r in records if r.width == 1 and r.arm == "stock"
    ]
    out += [f"- {line}" for line in undecided_lines(records, skipped, max_seconds)]
    return "\n".join(out) + "\n"


def _ci(median: float | None, low: float | None, high: float | None, digits: int = 3) -> str:
    return ci_text(median, low, high, digits, style=CiStyle.PAREN)


def summary_table(records: Sequence[IndexerRecord]) -> str:
    """One row per (bench, context, S): each arm's median over rounds with its 95% CI, the paired
    stock/patched with its CI, patched S over patched S=1 (paired within rounds), the S=1 check."""
    by = {(r.bench, r.context, r.width, r.arm): r for r in records}
    rows = []
    for bench, context, width in sorted({(r.bench, r.context, r.width) for r in records}):
        s, p = by[(bench, context, width, "stock")], by[(bench, context, width, "patched")]
        rows.append(
            (
                bench,
                context,
                width,
                _ci(s.median_ms, s.ci_low_ms, s.ci_high_ms),
                _ci(p.median_ms, p.ci_low_ms, p.ci_high_ms),
                _ci(s.ratio, s.ratio_low, s.ratio_high, 2 if width > 1 else 4),
                _ci(p.vs_s1, p.vs_s1_low, p.vs_s1_high, 2) if width > 1 else "1",
                s.n_rounds,
                s.outcome if s.outcome == "valid" else s.outcome.upper(),
            )
        )
    return table(
        (
            "bench",
            "context",
            "S",
            "stock ms (95% CI)",
            "patched ms (95% CI)",
            "stock/patched paired (95% CI)",
            "patched / patched S=1 (95% CI)",
            "rounds",
            "S=1 check",
        ),
        rows,
        cell=num,
    )


def verdict(records: Sequence[IndexerRecord]) -> list[str]:
    """The issue's bar, on contexts whose S=1 check is valid: patched S=2..4 within 1.5x of its
    S=1 (the CI's upper end decides), and stock S=2 grows with the context."""
    lines = []
    idx = {(r.context, r.width, r.arm): r for r in records if r.bench == "indexer"}
    contexts = sorted({c for c, _, _ in idx})
    for c in contexts:
        one = idx.get((c, 1, "stock"))
        if one is None or not one.valid:
            outcome = one.outcome if one else "missing"
            lines.append(f"T={c}: excluded, S=1 check {outcome}")
            continue
        for w in (2, 3, 4):
            r = idx.get((c, w, "patched"))
            if r is None or r.vs_s1 is None or r.vs_s1_low is None or r.vs_s1_high is None:
                continue
            ok = "ok" if r.vs_s1_high <= 1.5 else ("OVER 1.5x" if r.vs_s1_low > 1.5 else "unsure")
            lines.append(
                f"T={c} S={w}: patched {_ci(r.vs_s1, r.vs_s1_low, r.vs_s1_high, 2)}x of S=1 ({ok})"
            )
    s2 = [
        idx[(c, 2, "stock")]
        for c in contexts
        if (c, 2, "stock") in idx and idx[(c, 1, "stock")].valid
    ]
    if len(s2) > 1:
        grows = all(b.ci_low_ms > a.ci_high_ms for a, b in zip(s2, s2[1:], strict=False))
        trend = ", ".join(
            f"{r.context}: {_ci(r.median_ms, r.ci_low_ms, r.ci_high_ms, 2)} ms" for r in s2
        )
        lines.append(
            f"stock S=2 by context: {trend} ({'grows' if grows else 'does NOT clearly grow'})"
        )
    return lines


def undecided_lines(
    records: Sequence[IndexerRecord],
    skipped: Sequence[tuple[str, int]],
    max_seconds: float | None,
) -> list[str]:
    """What the time limit left: the parts never run, the S = 1 checks it stopped undecided."""
    lines = []
    by_part: dict[str, list[int]] = {}
    for part, context in skipped:
        by_part.setdefault(part, []).append(context)
    for part, contexts in by_part.items():
        lines.append(
            f"time limit {max_seconds:g} s: {part} not run at T={', '.join(map(str, contexts))} "
            "(raise --max-seconds, or pass fewer --contexts)"
        )
    unsure = [
        r for r in records if r.width == 1 and r.arm == "stock" and r.outcome == "inconclusive"
    ]
    if unsure and max_seconds is not None:
        where = ", ".join(f"{r.bench} T={r.context} ({r.n_rounds} rounds)" for r in unsure)
        lines.append(f"S=1 check undecided at {where}: more rounds (--max-seconds) may decide it")
    return lines


def observer_table(rows: Sequence[dict[str, Any]]) -> str:
    """`mlatui bench observer`'s table: each mode's verify-shaped step times against headless."""
    head = ["mode", "arm", "n", "median ms", "p95 ms", "median / headless", "p95 / headless"]
    return table(
        head,
        (
            [r["mode"], r["arm"], r["n"], fmt(r["median_ms"]), fmt(r["p95_ms"])]
            + [fmt(r["median_ratio"], 3), fmt(r["p95_ratio"], 3)]
            for r in rows
        ),
    )
