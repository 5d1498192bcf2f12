"""The L = 1 pane: which contexts failed the check (its summary, first, so it never scrolls
away), then per (phase, context) both arms' L = 1 figures, the check and the sweep's marginal
costs. Pure: DashboardState -> rich Text, sized to the width given."""

from __future__ import annotations

from rich.text import Text

from mlatui.config.phase_kind import Pass, rules_for
from mlatui.stream.events import ARMS, Validity
from mlatui.stream.phrases import check_mark
from mlatui.views.dashboard_state import DashboardState
from mlatui.views.summary import Check, l1_figures
from mlatui.views.units import fmt_context, ms_text, ratio_text
from mlatui.views.verdict_strip import is_null_run

from .header import wrap_parts
from .palette import GREY_TEXT, Status, status_style


def check_style(check: str, dark: bool = True) -> str:
    """An L = 1 check's mark in its status colour (widgets.palette): ✓ valid, ✓p valid by the
    pooled check, ? inconclusive, ✗ invalid."""
    statuses: dict[str, Status] = {
        Check.VALID: Status.GOOD,
        Check.POOLED: Status.POOLED,
        Check.INCONCLUSIVE: Status.WARN,
    }
    status = statuses.get(check, Status.BAD)
    return status_style(status, dark, bold=status in (Status.BAD, Status.WARN))


def validity_summary(state: DashboardState, dark: bool = True) -> Text | None:
    """One line: which contexts failed the L = 1 check (left out of every verdict)."""
    if not state.validity:
        return None
    invalid = sorted({c for (_, c), v in state.validity.items() if v.verdict == "invalid"})
    unsure = sorted({c for (_, c), v in state.validity.items() if v.verdict == "inconclusive"})
    pooled = sorted({c for (_, c), v in state.validity.items() if v.valid and v.pooled})
    tol = next(iter(state.validity.values())).tolerance_pct
    t = Text()
    if invalid:
        t.append(
            f"✗ invalid {', '.join(map(fmt_context, invalid))}",
            style=check_style(Check.INVALID, dark),
        )
    if unsure:
        t.append(" · " if invalid else "")
        unsure_text = f"? inconclusive {', '.join(map(fmt_context, unsure))}"
        t.append(unsure_text, style=check_style(Check.INCONCLUSIVE, dark))
    if invalid or unsure:
        t.append(" · left out, greyed", style="dim")
    else:
        t.append(f"✓ every checked context valid (±{tol:g}%)", style=check_style(Check.VALID, dark))
    p = state.latest_pooled
    if p is not None:
        t.append(" · ")
        figure = ratio_text(p.ratio)
        if pooled:
            where = ", ".join(map(fmt_context, pooled))
            t.append(
                f"✓p {where} by the pooled check {figure}", style=check_style(Check.POOLED, dark)
            )
        else:
            t.append(f"pooled check {figure} {p.outcome}", style="dim")
    return t


def _phase_short(phase: str) -> str:
    """Five characters: 'sweep'; an A/A pass keeps its variant ('sw·st', 'sw·pa')."""
    variant = Pass.of(phase).variant
    return f"{phase[:2]}·{variant[:2]}" if variant else phase[:5]


def validity_text(state: DashboardState, width: int, dark: bool = True) -> Text:
    """The summary first (it must not scroll away), then per (phase, context) both arms' L = 1
    medians, the check, and the sweep's marginal costs."""
    t = Text(no_wrap=True, overflow="ellipsis")
    summary = validity_summary(state, dark)
    if summary is not None:  # wrapped between its parts, never cut
        parts = list(summary.split(" · ", include_separator=False))
        for line in wrap_parts(parts, width, 2):
            t.append_text(line)
            t.append("\n")
    a, b = ("A", "B") if is_null_run(state) else ("stock", "patched")  # A/A: one variant
    checked = {c for (_, c) in state.validity}
    order = {p: i for i, p in enumerate(state.phase_kinds)}
    rows: list[tuple[tuple[str, int], Validity | None]] = [*state.validity.items()]
    rows += [((state.phase.name, c), None) for c in state.contexts() if c not in checked]
    rows.sort(key=lambda row: (order.get(row[0][0], len(order)), row[0][1]))
    paired = [_paired(v, dark) for _, v in rows]
    paired_w = max([len(f"paired {a}/{b}"), *(len(text) for text, _ in paired)])
    lead = 6 + 5 + 6 + 1 + len(b) + 2
    if lead + paired_w > width:  # no room for the ratio and its CI: the check's mark alone
        paired = [(text.split(" ")[0], style) for text, style in paired]
        paired_w = len("check")
    with_d2 = lead + paired_w + 1 + 8 + 1 + len(b) <= width  # Δ2 is the key figure's too
    what = f"paired {a}/{b}" if paired_w > len("check") else "check"
    head = f"{'phase':<6}{'ctx':>5} {a:>5} {b:>{len(b)}}  {what:<{paired_w}}"
    t.append(head + (f" {'Δ2 ' + a:>8} {b:>{len(b)}}" if with_d2 else ""), style="bold")
    notes: list[str] = []
    for ((phase, c), v), (said, style) in zip(rows, paired, strict=True):
        s1 = state.l_median("stock", c, 1)
        p1 = state.l_median("patched", c, 1)
        short = _phase_short(phase)
        if v is not None:  # a check decided on plain blocks: their time per token, said so
            kind = state.phase_kinds.get(phase, "")
            f = l1_figures(v, kind, state.decode_results, phase, c)
            s1, p1 = f.stock_ms, f.patched_ms
            if f.per_token:
                short = f"{short[:5]}*"
                notes += [] if f.note in notes else [f.note]
        row_style = GREY_TEXT if v is not None and not v.valid else ""
        t.append("\n")
        t.append(
            f"{short:<6}{fmt_context(c):>5} {ms_text(s1):>5} {ms_text(p1):>{len(b)}}  ",
            style=row_style,
        )
        t.append(f"{said:<{paired_w}}", style=style)
        if with_d2:
            ms, mp = (phase_marginal(state, phase, arm, c) for arm in ARMS)
            t.append(f" {ms_text(ms):>8} {ms_text(mp):>{len(b)}}", style=row_style)
    t.append("\n")
    t.append(
        "L=1 ms · paired: median of per-round ratios [95% CI]",
        style="dim",
    )
    for note in notes:
        t.append("\n")
        t.append(f"* L=1 {note}", style="dim")
    return t


def _paired(v: Validity | None, dark: bool = True) -> tuple[str, str]:
    """The check's mark and the paired L = 1 ratio with its CI, as every table writes it."""
    if v is None:
        return "…", "dim"
    check = Check.POOLED if v.valid and v.pooled else v.verdict
    mark, style = check_mark(v.verdict, v.valid and v.pooled), check_style(check, dark)
    return (f"{mark} {ratio_text(v.ratio)}" if v.ratio is not None else mark), style


def phase_marginal(state: DashboardState, phase: str, arm: str, context: int) -> float | None:
    """The marginal cost Δ2 that `phase` measured at `context` (an A/A run's two passes each
    have their own); a recording without per-phase estimates falls back to the sweep's."""
    if not rules_for(state.phase_kinds.get(phase, "sweep")).model_widths:
        return None
    e = state.estimates.get((phase, context))
    if e is not None:
        for r in e.rows:
            if (r.quantity, r.arm, r.width) == ("marginal_ms", arm, 2):
                return float(r.median)
        return None
    return dict(state.marginal(arm)).get(context)
