"""One arm's column: its step-time bars (shared scale, per width and context), the medians at
the latest context, acceptance, tok/s and gate calls. Text lines come first; the chart takes the
rows that are left, so nothing below it falls off a short pane."""

from __future__ import annotations

from dataclasses import dataclass, replace

from rich.text import Text

from mlatui.config.phase_kind import Pass
from mlatui.measure.plans import PLAIN, Setting
from mlatui.stream.events import ARMS
from mlatui.views.dashboard_state import DashboardState
from mlatui.views.dashboard_views import StepChart, step_chart
from mlatui.views.run_meta import slot_name, slot_words
from mlatui.views.summary import acceptance_of, limit_check
from mlatui.views.units import (
    above_limit,
    bound_ratio,
    fmt_context,
    mbu_text,
    median_text,
    most_suffix,
    percent_text,
    ratio_text,
)
from mlatui.views.verdict_strip import is_null_run, winner

from .palette import Status, series_look, status_style
from .stepchart import chart_lines, medians_text, scale_text

NARROW = 56
ARM_TITLES = {"stock": "stock · mlx-lm as installed", "patched": "patched · gate L ≤ L*"}


def arm_title(state: DashboardState, arm: str) -> str:
    """The pane's title: what runs in this slot. In an A/A run both slots run one variant, the
    pass's (stock, then patched), so a title naming the other would misread every figure."""
    if not is_null_run(state):
        settings = state.header.settings if state.header else None
        words = slot_words(settings, arm)
        if words is None or slot_name(settings, arm) == arm:
            return ARM_TITLES.get(arm, arm)
        return f"{slot_name(settings, arm)} · {words}"
    variant = Pass.of(state.phase.name or "").variant
    return f"{'AB'[ARMS.index(arm)]} · A/A: both arms {variant or 'the same variant'}"


def chart_for(state: DashboardState) -> StepChart | None:
    return step_chart(
        state.steps, tuple(state.arms), state.is_invalid, state.step_median, state.swept
    )


def acceptance_line(state: DashboardState, arm: str, narrow: bool, dark: bool = True) -> Text:
    """The acceptance of the setting both panes show (mlatui.views.summary.acceptance_of): the
    same setting side by side, never each arm's latest."""
    figures = acceptance_of(state, arm)
    acc = list(figures.conditional) if figures is not None else []
    line = Text()
    line.append("acceptance" if not narrow else "accept", style="bold")
    if figures is not None:  # the kind only beside another: one kind is the header's `draft`
        several = len(state.draft_kinds) > 1
        setting = figures.setting
        line.append(f" {setting.label}" if several else f" d{setting.depth}")
    if state.synthetic:
        line.append(" (synthetic)", style=status_style(Status.WARN, dark))
    line.append(" P(i∣<i): " if not narrow else ": ")
    cells = ("–" if x is None else f"{x:.0%}" for x in acc)
    line.append("  ".join(f"{i + 1}:{c}" for i, c in enumerate(cells)) if acc else "–")
    if figures is not None and figures.mean_accepted is not None:
        mean, depth = figures.mean_accepted, figures.setting.depth
        line.append(f"  ā {mean:.2f}/{depth}" if not narrow else f" ā{mean:.2f}")
    return line


def rule_line(state: DashboardState, arm: str, narrow: bool, dark: bool = True) -> Text | None:
    """Under the acceptance: the rule that decided it (exact match or rejection sampling, at
    which temperature) and how much the emitted text repeats itself (looping text is easy to
    draft, whatever the draft), from DashboardState; None before the first speculative block."""
    a, figures = state.arms[arm], acceptance_of(state, arm)
    rep = state.text_repeat(arm, figures.setting if figures is not None else None)
    said = figures.rule if figures is not None else ""
    if not said and rep is None:
        return None
    line = Text("  ")
    if said:
        rule = "exact match" if said == "exact-match" else "rejection sampling"
        if narrow:
            rule = rule.split()[0]
        line.append(rule + (f", T={a.temperature:g}" if a.temperature else ", greedy"), style="dim")
    if rep is not None and rep.within is not None:
        line.append(" · " if said else "", style="dim")
        live = "~" if rep.live else ""
        # the share across blocks only when it is what loops (a loop longer than a block)
        lower = rep.across if rep.looping and rep.across is not None else None
        lower = lower if lower is not None and lower < rep.within else None
        if narrow:
            text = f"4g {live}{rep.within:.0%}" + (f"/{lower:.0%}" if lower is not None else "")
        else:
            text = f"text {live}{rep.within:.0%} distinct 4-grams"
            text += f" ({lower:.0%} across blocks)" if lower is not None else ""
        line.append(text, style="dim")
        if rep.looping:
            line.append(
                " looping" if not narrow else " !", style=status_style(Status.WARN, dark, True)
            )
    return line


@dataclass(frozen=True)
class TokSLayout:
    """How the tok/s lines wrap: settings to `width` (narrow without a width, or `one_a_line`:
    one a line), never inside one; with several draft kinds, a kind's name alone on its line
    where its first setting would not fit beside it, or `kind_alone`."""

    narrow: bool
    width: int | None = None
    one_a_line: bool = False
    kind_alone: bool = False


def tok_s_lines(
    state: DashboardState, arm: str, layout: TokSLayout, dark: bool = True
) -> list[Text]:
    """Plain decode, then every depth's tok/s and paired speedup with its 95% CI (the figure
    the verdict judges: a speedup counts when its CI lies above 1), the verdict's pick marked
    ★; with several draft kinds, one line per kind, named; wrapped as `layout` says."""
    narrow, width = layout.narrow, layout.width
    one_a_line, kind_alone = layout.one_a_line, layout.kind_alone
    a = state.arms[arm]
    best = winner(state, arm)
    chosen = None if best is None else Setting(best.draft_kind, best.depth)
    lines: list[Text] = []
    line = Text()
    line.append("tok/s", style="bold")
    if a.counts_context is not None:
        line.append(f" @ {fmt_context(a.counts_context)}", style="bold")
    plain = a.plain_tok_s or a.plain_live
    live = a.plain_tok_s is None and plain is not None
    line.append(f" plain {tok_s_text(a, PLAIN, plain, live)}" if plain else " plain –")
    by_kind: dict[str, list] = {}
    for setting, figures, bound in a.decode_lines():
        by_kind.setdefault(setting.kind, []).append((setting, figures, bound))
    several = len(by_kind) > 1
    for kind, settings in by_kind.items():
        indent = "  "
        if several:
            lines.append(line)
            line = Text("  ")
            line.append(kind, style="bold")
        for i, (setting, figures, bound) in enumerate(settings):
            chosen_best = best if setting == chosen else None
            chunk = _setting_text(a, setting, figures, bound, chosen_best, dark)
            first_of_kind = several and i == 0
            fits = width is not None and line.cell_len + 3 + chunk.cell_len <= width
            alone = one_a_line or narrow and width is None
            if not first_of_kind and (alone or width is not None and not fits):
                lines.append(line)
                line = Text(indent)
            elif not first_of_kind:
                line.append(" │ ")
            elif kind_alone or width is not None and line.cell_len + 1 + chunk.cell_len > width:
                lines.append(line)  # the kind's name alone: its settings whole below it
                indent = "    "
                line = Text(indent)
            else:
                line.append(" ")
            line.append_text(chunk)
    lines.append(line)
    return lines


def tok_s_text(a, setting: Setting, tok_s: float, live: bool) -> str:
    """A measured tok/s as the tables round it (the `263` of `263 [244, 282]`); a running
    estimate, which has no CI yet, to three significant digits after `~`."""
    if live:
        return "~" + median_text(tok_s)
    result = a.results.get(setting)
    return median_text(result.tok_s if result is not None and result.tok_s else tok_s)


def _setting_text(a, setting: Setting, figures, bound, best, dark: bool = True) -> Text:
    """`d1 37.1 1.12× [1.01, 1.16] ★`, or `d1 bound ≤ 0.70×` for a setting rejected by bound;
    a running estimate's ratio has no CI yet, so it is not shown (its tok/s is, marked ~)."""
    t = Text(f"d{setting.depth} ")
    if figures is None:  # rejected by bound: no tok/s was measured
        t.append(
            f"bound {bound_ratio(bound.value)}" if bound else "–",
            style=status_style(Status.BAD, dark, bold=True),
        )
        return t
    tok_s, live = figures
    t.append(tok_s_text(a, setting, tok_s, live))
    result = a.results.get(setting)
    vs = result.vs_plain if result is not None else None
    if vs is not None and vs.median and vs.known:
        status = Status.GOOD if vs.low > 1 else Status.BAD if vs.high < 1 else Status.WARN
        t.append(" " + ratio_text(vs), style=status_style(status, dark, bold=True))
        if best and best.context == a.counts_context:
            t.append(" ★", style=status_style(Status.GOOD, dark, bold=True))
    return t


def mbu_line(state: DashboardState, arm: str, narrow: bool) -> str | None:
    """The MBU at the latest sweep context, per width (`mbu`; `..` the most where the routing
    range makes it differ): `MBU @32K L=1 5.2% [4.9, 5.4] · L=2 4.1% .. 6.0%`; `MBU: a step read
    … served from cache?` where a step of the run read faster than the measured memory limit;
    None before a sweep estimate that carries it."""
    context = state.context
    if context is None:
        return None
    parts = []
    for width in sorted({w for (a, c, w) in state.sweep_ms if (a, c) == (arm, context)}):
        row = state.estimate("mbu", arm, context, width)
        if row is None:
            continue
        most = state.estimate("mbu_most", arm, context, width)
        text = percent_text(row.median * 100) if narrow else mbu_text(row.interval)
        parts.append(
            f"L={width} {text}{most_suffix(row.median, None if most is None else most.median)}"
        )
    if not parts:
        return None
    check = limit_check(state)
    if check is not None and check.contradicted:
        return "MBU: " + above_limit(check, narrow)
    return f"MBU @{fmt_context(context)} " + " · ".join(parts)


def gate_line(state: DashboardState, arm: str, narrow: bool) -> Text:
    a = state.arms[arm]
    line = Text()
    line.append("gate calls " if not narrow else "", style="bold")
    slot = state.header.settings.arms.get(arm) if state.header else None
    if slot is not None and slot.counters:  # a source tree's own gate: zeros would be false
        line.append("not counted (a source tree's own gate)", style="dim")
        return line
    line.append(f"absorbed {a.absorbed_calls:,} · materialised {a.materialised_calls:,}")
    return line


OPTIONAL = (2, 4)  # the rule and MBU sections: left out before the bars are
MIN_CHART_ROWS = 3  # the scale, one panel's row, the context labels


def arm_sections(
    state: DashboardState, arm: str, width: int, dark: bool = True
) -> list[list[Text]]:
    """The lines under the chart, in sections (medians, acceptance, rule, tok/s, MBU, gate
    calls); a section an arm lacks is empty. Where one arm's settings wrap, both list one
    setting a line, so each setting faces itself."""
    narrow = width < NARROW
    chart = chart_for(state)
    medians = None
    if chart:  # the long form where both arms' fit their panes, else the short one in both
        long = all(medians_text(chart, a, False).cell_len <= width for a in chart.panels)
        medians = medians_text(chart, arm, not long)
    rule = rule_line(state, arm, narrow, dark)
    mbu = mbu_line(state, arm, narrow)
    arms = [a for a in ARMS if a in state.arms]
    layout = TokSLayout(narrow, width)
    one = len({len(tok_s_lines(state, a, layout)) for a in arms}) > 1
    layout = replace(layout, one_a_line=one)
    alone = len({len(tok_s_lines(state, a, layout)) for a in arms}) > 1
    tok_s = tok_s_lines(state, arm, replace(layout, kind_alone=alone), dark)
    return [
        [medians] if medians is not None else [],
        [acceptance_line(state, arm, narrow, dark)],
        [rule] if rule is not None else [],
        tok_s,
        [Text(mbu)] if mbu else [],
        [gate_line(state, arm, narrow)],
    ]


def aligned_below(
    state: DashboardState, arm: str, width: int, height: int, dark: bool = True
) -> list[Text]:
    """This arm's lines under the chart, each section padded to the longest of both arms', so
    a row of one pane faces the same row of the other; the rule and MBU lines leave (in both)
    when the bars would have no room."""
    others = [a for a in ARMS if a in state.arms and a != arm]
    mine = arm_sections(state, arm, width, dark)
    theirs = [arm_sections(state, a, width) for a in others]
    sizes = [max([len(sec), *(len(t[k]) for t in theirs)]) for k, sec in enumerate(mine)]
    if height - sum(sizes) < MIN_CHART_ROWS:
        sizes = [0 if k in OPTIONAL else n for k, n in enumerate(sizes)]
    lines: list[Text] = []
    for k, section in enumerate(mine):
        section = section[: sizes[k]]
        lines.extend(section + [Text() for _ in range(sizes[k] - len(section))])
    return lines


def arm_text(state: DashboardState, arm: str, width: int, height: int, dark: bool = True) -> Text:
    """The scale, the bars in the rows left, then the figures; on a pane too short for the
    figures, their head stays and the last row says how many more `z` shows."""
    narrow = width < NARROW
    colour = series_look(ARMS.index(arm) if arm in ARMS else 0, dark).style  # as in the key figure
    chart = chart_for(state)
    below = aligned_below(state, arm, width, height, dark)
    top = [scale_text(chart, narrow)] if chart else [Text("waiting for timed steps…", style="dim")]
    rows = height - len(top) - len(below)
    if chart and rows == MIN_CHART_ROWS - 2:  # room for bars without the scale's heading
        top, rows = [], rows + 1
    bars = chart_lines(chart, arm, width, rows, colour) if chart else []
    if chart and not bars:  # no room for the bars: no heading above nothing
        top = []
    lines = [*top, *bars, *below]
    if len(lines) > height > 0:
        more = len(lines) - height + 1
        lines = [*lines[: height - 1], Text(f"… {more} more line(s): z zooms", style="dim")]
    t = Text(no_wrap=True, overflow="ellipsis")
    t.append_text(Text("\n").join(lines))
    return t
