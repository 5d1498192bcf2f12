"""An arm's step times as bars from 0 on the scale both arms share: one small multiple per width
(L), one segment per context inside it, labelled; greyed where the L = 1 check failed."""

from __future__ import annotations

from rich.text import Text

from mlatui.views.dashboard_views import Panel, StepChart, priority_widths
from mlatui.views.units import fmt_context, ms_text

from .palette import GREY_TEXT
from .plot import nice_ceiling

BLOCKS = " ▁▂▃▄▅▆▇█"
MIN_SEGMENT = 2


def scale_text(chart: StepChart, narrow: bool) -> Text:
    top = ms_text(nice_ceiling(chart.scale_ms))
    t = Text()
    t.append(f"{chart.phase} ", style="bold")
    t.append(f"step ms, bars 0–{top}" if not narrow else f"ms 0–{top}")
    t.append(" same scale both arms" if not narrow else " both arms", style="dim")
    return t


def medians_text(chart: StepChart, arm: str, narrow: bool) -> Text:
    t = Text()
    what = "median over rounds" if chart.over_rounds and not narrow else "median"
    t.append(f"@ {fmt_context(chart.latest_context)} {what} ", style="bold")
    cells = [
        f"L{w} {ms_text(ms)}" if narrow else f"L={w} {ms_text(ms)}"
        for w, ms in sorted(chart.medians.get(arm, {}).items())
    ]
    t.append((" " if narrow else " · ").join(cells) or "–")
    if not narrow and cells:
        t.append(" ms")
    return t


def shown_contexts(chart: StepChart, cols: int) -> tuple[int, ...]:
    """The latest contexts whose segments are each at least MIN_SEGMENT cells wide."""
    contexts = chart.contexts
    while contexts and (cols - (len(contexts) - 1)) // len(contexts) < MIN_SEGMENT:
        contexts = contexts[1:]
    return contexts


def _bars(
    samples: tuple[float, ...], seg_w: int, rows: int, scale: float, per_sample: int
) -> list[str]:
    """Rows (top first) of `seg_w` columns: the latest samples, `per_sample` columns each."""
    vals = [v for v in samples[-(seg_w // per_sample) :] for _ in range(per_sample)]
    levels = [max(1, round(v / scale * rows * 8)) if v > 0 else 0 for v in vals]
    out = []
    for row in range(rows - 1, -1, -1):
        cells = "".join(BLOCKS[max(0, min(8, lvl - row * 8))] for lvl in levels)
        out.append(cells.ljust(seg_w))
    return out


def chart_lines(chart: StepChart, arm: str, width: int, rows: int, colour: str) -> list[Text]:
    """`rows` lines: the panels (widths by priority when rows are short), then the context
    labels; empty when fewer than 2 rows are given."""
    if rows < 2 or arm not in chart.panels:
        return []
    widths = priority_widths(chart.widths, rows - 1)
    panels: list[Panel] = [p for p in chart.panels[arm] if p.width in widths]
    gutter = max(len(f"L={w}") for w in widths) + 1
    cols = width - gutter
    contexts = shown_contexts(chart, cols)
    if not contexts or not panels:
        return []
    seg_w = (cols - (len(contexts) - 1)) // len(contexts)
    scale = nice_ceiling(chart.scale_ms)
    height = (rows - 1) // len(panels)  # equal heights: one scale for every panel
    gaps = min(len(panels) - 1, rows - 1 - height * len(panels))  # blank rows between panels
    most = max((len(s.samples) for p in panels for s in p.segments), default=1)
    per_sample = max(1, seg_w // max(1, most))
    lines: list[Text] = []
    for k, panel in enumerate(panels):
        if 0 < k <= gaps:
            lines.append(Text())
        segs = {s.context: s for s in panel.segments}
        cols_by_row = [Text() for _ in range(height)]
        for j, c in enumerate(contexts):
            seg = segs[c]
            style = GREY_TEXT if seg.greyed else colour
            for r, cells in enumerate(_bars(seg.samples, seg_w, height, scale, per_sample)):
                if j:
                    cols_by_row[r].append(" ")
                cols_by_row[r].append(cells, style=style)
        for r, body in enumerate(cols_by_row):
            label = f"L={panel.width}" if r == height - 1 else ""
            line = Text(f"{label:<{gutter}}", style="bold" if label else "")
            line.append_text(body)
            lines.append(line)
    labels = Text(" " * gutter, style="dim")
    for j, c in enumerate(contexts):
        name = fmt_context(c)[:seg_w]
        labels.append(("" if j == 0 else " ") + name.ljust(seg_w), style="dim")
    lines.append(labels)
    return lines
