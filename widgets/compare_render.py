"""Pure renderers of `mlatui compare`: a Comparison -> rich Text, sized to the space given."""

from __future__ import annotations

import textwrap
from dataclasses import dataclass

from rich.text import Text

from mlatui.stream.events import ARMS
from mlatui.stream.phase_rows import Quantity
from mlatui.views.compare import (
    SECTIONS,
    TITLES,
    Comparison,
    Run,
    checks_text,
    ratio_text,
    width_label,
)
from mlatui.views.units import Ci, ci_text, fmt_context
from mlatui.views.verdict_strip import verdict_parts

from . import palette
from .palette import GREY_TEXT, SeriesLook, Status, series_look, status_style
from .plot import LogLogPlot, log_log_axes
from .render import strip_lines

PLOT_GREY = palette.GREY
COLUMN_STYLES = {"A": "", "B": "italic"}  # the table's A and B columns


def _short(value: str, n: int) -> str:
    value = value.split(" (/")[0]  # library paths are for the export, not the screen
    return value if len(value) <= n else value[: n - 1] + "…"


def _differing(a: str, b: str, n: int) -> tuple[str, str]:
    """Both values as short as they can be while still showing how they differ: when their
    names match (`openblas` and `openblas`), the paths after them, from where they part."""
    sa, sb = _short(a, n), _short(b, n)
    if sa != sb or a == b:
        return sa, sb
    pa, pb = a.removeprefix(sa).strip(" ()"), b.removeprefix(sb).strip(" ()")
    start = 0
    while start < min(len(pa), len(pb)) and pa[start] == pb[start]:
        start += 1
    start = pa.rfind("/", 0, start) + 1  # from the first directory that differs
    return (f"{sa} …{pa[start:]}"[: n + 20], f"{sb} …{pb[start:]}"[: n + 20])


def run_label(run: Run) -> str:
    h = run.header
    return f"{run.label} {run.name} ({h.model} · {h.device.name})"


def header_text(cmp: Comparison, width: int) -> Text:
    t = Text(overflow="ellipsis", no_wrap=True)
    t.append(" mlatui ", style="bold reverse")
    t.append(" COMPARE ", style="bold")
    for i, run in enumerate(cmp.runs):
        t.append(" vs " if i else " ")
        t.append(series_look(2 * i).filled + series_look(2 * i + 1).filled + " ", style="bold")
        t.append(run_label(run), style="bold")
    t.append("\n")
    t.append("differs ", style="bold reverse")
    if not cmp.differing:
        t.append(f" {cmp.likeness}", style="dim")
    used = 9
    for i, f in enumerate(cmp.differing):
        a, b = _differing(f.a, f.b, 26)
        size = 3 + len(f.label) + len(a) + len(b) + 4
        left = len(cmp.differing) - i
        if i and used + size > width - (12 if left > 1 else 0):
            t.append(f" · +{left} more (e exports all)", style="dim")
            break
        used += size
        t.append(" · " if i else " ")
        t.append(f"{f.label} ", style="bold")
        t.append(a, style="yellow")
        t.append(" → ")
        t.append(b, style="yellow")
    t.append("\n")
    # whole values (the line ends in … where the screen is narrower), library paths left out
    same = " · ".join(f"{f.label} {f.value.split(' (/')[0]}" for f in cmp.same if f.key != "schema")
    t.append(f"same: {same}", style="dim")
    return t


def verdicts_text(cmp: Comparison, width: int, dark: bool = True) -> Text:
    """Each run's verdict strip (mlatui.views.verdict_strip: as its replay and export say it),
    on two lines each where one cannot hold it whole: a part is shortened, never cut."""
    lines = [
        line
        for run in cmp.runs
        for line in strip_lines(
            verdict_parts(run.state),
            f"{run.label} verdict ",
            width,
            dark,
            (2,),
            "no result in this recording",
        )
    ]
    return Text("\n", no_wrap=True).join(lines)


# -- the key figure of both runs -------------------------------------------------------------


def marginal_points(run: Run, arm: str) -> list[tuple[int, Ci, bool]]:
    """(context, marginal ms with CI, valid) as the run's dashboard draws them."""
    return [
        (c, Ci(m, lo, hi), not run.state.sweep_invalid(c))
        for c, m, lo, hi in run.state.marginal_ci(arm)
    ]


def series_looks(cmp: Comparison, dark: bool = True) -> dict[tuple[str, str], SeriesLook]:
    """Each (run, arm)'s marker shape and colour: A's stock ● and patched ▲, B's ■ and ◆."""
    return {
        (run.label, arm): series_look(2 * i + j, dark)
        for i, run in enumerate(cmp.runs)
        for j, arm in enumerate(ARMS)
    }


def plot_text(cmp: Comparison, width: int, height: int, dark: bool = True) -> Text:
    """Marginal cost of the 2nd query vs context, log-log, on plotext's canvas (widgets.plot):
    both arms of both runs, each its own marker shape and colour; whiskers are 95% CIs; grey,
    hollow points failed the L = 1 check. Run B's points sit a column right of A's."""
    series = [(run, arm, marginal_points(run, arm)) for run in cmp.runs for arm in ARMS]
    if width < 30 or height < 9:
        return Text("(too small: enlarge the terminal)", style="dim")
    drawn = [(r, a, [p for p in pts if p[1].median > 0]) for r, a, pts in series]
    dropped = sum(len(pts) for _, _, pts in series) - sum(len(pts) for _, _, pts in drawn)
    values = [
        v
        for _, _, pts in drawn
        for _, ci, _ in pts
        for v in (ci.median, ci.low, ci.high)
        if v is not None and v > 0
    ]
    if not values:
        return Text("no marginal cost in either recording (no sweep with L = 1 and 2)", style="dim")
    contexts = sorted({c for _, _, pts in drawn for c, _, _ in pts})
    axes = log_log_axes(values, contexts, width, height - len(cmp.runs) - 1)
    looks = series_looks(cmp, dark)
    plot = LogLogPlot(axes)
    for run, arm, pts in drawn:  # lines through the valid points
        dx = 1 if run.label == "B" else 0
        valid = [(c, ci.median) for c, ci, ok in pts if ok]
        plot.line([c for c, _ in valid], [m for _, m in valid], looks[run.label, arm].colour, dx)
    for run, arm, pts in drawn:  # CI whiskers, then the markers on top
        dx = 1 if run.label == "B" else 0
        for c, ci, ok in pts:
            if (bounds := ci.bounds) is not None and bounds[0] > 0:
                plot.whisker(c, *bounds, looks[run.label, arm].colour if ok else PLOT_GREY, dx)
    for run, arm, pts in drawn:
        dx = 1 if run.label == "B" else 0
        look = looks[run.label, arm]
        for c, ci, ok in pts:
            glyph, colour = (look.filled, look.colour) if ok else (look.hollow, PLOT_GREY)
            plot.marker(c, ci.median, glyph, colour, "bold" if ok else "", dx)
    t = Text(no_wrap=True, overflow="crop")
    rows = plot.rows()
    if len(rows[-1].plain) + 18 <= width:
        rows[-1].append("  context (tokens)", style="dim")
    t.append_text(Text("\n").join(rows))
    for run in cmp.runs:
        t.append("\n")
        t.append(run_label(run) + ": ", style="bold")
        for arm in ARMS:
            look = looks[run.label, arm]
            t.append(f"{look.filled} {arm} ", style=look.style)
    t.append("\n")
    note = "Δ ms vs context, log-log, lower is better · │ 95% CI · grey: L=1 check not valid"
    if dropped:
        note += f" · {dropped} point(s) ≤ 0 not drawn"
    t.append(note if len(note) <= width else note[: width - 1] + "…", style="dim")
    return t


# -- the table -------------------------------------------------------------------------------


FROZEN_CELLS = 18  # ctx, L/d and arm: they stay in place while the table scrolls sideways
NOTE = (
    "B/A: ratio of medians (range from the CI ends) · ≠ CIs apart · ✓ valid ✓p valid (pooled) "
    "✗ invalid ? inconclusive … undecided (L=1 check, A then B) · grey rows are in no verdict"
)


@dataclass(frozen=True)
class TableLine:
    text: Text
    row: bool  # a row of figures (its first FROZEN_CELLS stay put); else a title or a note


def table_lines(cmp: Comparison, dark: bool = True) -> list[TableLine]:
    """The shared figures, a section per quantity: ctx, width and arm, then A and B with their
    CIs (each in its own run's colour for the arm, as in the figure), B/A and its ≠ in one
    column, the L = 1 checks."""
    out: list[TableLine] = []
    if not cmp.rows:
        out.append(
            TableLine(
                Text(
                    "No figure of one run matches one of the other.",
                    style=status_style(Status.WARN, dark, bold=True),
                ),
                False,
            )
        )
    if not cmp.shared_contexts:
        for run in cmp.runs:
            ctx = ", ".join(map(fmt_context, run.state.contexts())) or "none"
            out.append(TableLine(Text(f"{run.label} sweep contexts: {ctx}", style="dim"), False))
    looks = series_looks(cmp, dark)
    ratios = {id(r): ratio_text(r).removesuffix(" ≠") for r in cmp.rows}
    ratio_w = max([3, *map(len, ratios.values())])
    ci_w = max([21, *(len(ci_text(c, "×")) for r in cmp.rows for c in (r.a, r.b))])
    for q in SECTIONS:
        rows = cmp.section(q)
        if not rows:
            continue
        unit = "×" if q in (Quantity.RATIO, Quantity.VS_PLAIN) else ""
        out.append(TableLine(Text(TITLES[q], style="bold"), False))
        wl = (
            ""
            if q == Quantity.MARGINAL_MS
            else ("L" if q in (Quantity.STEP_MS, Quantity.RATIO) else "d")
        )
        head = f"{'ctx':>5} {wl:>3} {'arm':<7}  {'A [95% CI]':>{ci_w}} {'B [95% CI]':>{ci_w}}  "
        out.append(TableLine(Text(f"{head}{'B/A':<{ratio_w}} ≠ A B", style="dim"), True))
        for r in rows:
            out.append(TableLine(_row_text(r, unit, (ratios[id(r)], ratio_w, ci_w), looks), True))
        out.append(TableLine(Text(), False))
    out.extend(TableLine(Text(line, style="dim"), False) for line in textwrap.wrap(NOTE, 76))
    return out


def _row_text(r, unit: str, widths: tuple[str, int, int], looks) -> Text:
    ratio, ratio_w, ci_w = widths
    style = "" if r.valid else GREY_TEXT
    w = "" if r.quantity == Quantity.MARGINAL_MS else width_label(r)
    t = Text(f"{fmt_context(r.context):>5} {w:>3} ", style=style)
    t.append(f"{r.arm or 's/p':<7}  ", style=style or "bold")
    for run in "AB":
        look = looks.get((run, r.arm)) if r.arm else None
        colour = look.style if look is not None and r.valid else style
        cell = ci_text(r.a if run == "A" else r.b, unit)
        t.append(
            f"{cell:>{ci_w}}" + (" " if run == "A" else "  "),
            style=f"{colour} {COLUMN_STYLES[run]}".strip(),
        )
    t.append(f"{ratio:<{ratio_w}} ", style="bold" if r.differs and r.valid else style)
    t.append("≠" if r.differs else " ", style="bold" if r.valid else style)
    t.append(f" {checks_text(r)}", style=style)
    return t


SYMBOLS = (  # (glyph, meaning): the `?` screen's Symbols page
    ("● ▲", "run A: stock, patched (the figure's markers, each series its own colour, A's "
     "figures in the table in these colours)"),
    ("■ ◆", "run B: stock, patched (B's table column in italics, in B's colours)"),
    ("│", "95% CI"),
    ("Δ2", "marginal cost of a 2nd query (L=2 − L=1, ms)"),
    ("B/A", "ratio of the medians, [lo, hi] from the CI ends; ≠ where the CIs do not overlap"),
    ("s/p", "stock / patched, paired"),
    ("d1 d2 …", "draft depth"),
    ("✓ ✓p ✗ ? …", "L=1 check (A then B): valid, valid by the pooled check, invalid, "
     "inconclusive, pending"),
    ("grey", "a row in no verdict"),
)  # fmt: skip
