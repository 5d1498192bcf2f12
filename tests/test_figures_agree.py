"""Every shipped recording through every surface that shows its figures (the summary markdown
that `bench`, `replay --dump` and the `e` export print, the export's CSV, the verdict strip, both
arm panes, the L = 1 pane, the key figure, `compare`): each ratio a person can read is one of the
run summary's, printed by the one formatter, with its CI; the verdict's Δ2 figures and L = 1
counts are the tables'; both arm panes show the same settings. The engine's own log lines are
not a surface of the summary (they are what the engine said)."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import pytest

from mlatui.stream.recorder import read_recording
from mlatui.views import export
from mlatui.views.compare import Run, compare, compare_markdown
from mlatui.views.dashboard_state import DashboardState
from mlatui.views.rounding import fmt_context
from mlatui.views.summary import RunSummary, summarize
from mlatui.views.units import ms_text, ratio_text
from mlatui.widgets.arm import arm_text
from mlatui.widgets.render import marginal_plot, verdict_lines
from mlatui.widgets.validity_pane import validity_text
from tests import replay_dumps

RECORDINGS = replay_dumps.recordings()
WIDTHS = (80, 120, 160, 220)
PANE_WIDTHS = (38, 58, 78, 108)  # an arm pane's inner width at those screen widths
RATIO_WITH_CI = re.compile(r"\d+(?:\.\d+)?× \[\d+(?:\.\d+)?, \d+(?:\.\d+)?\]")
# a ratio's figure without its CI; bounds (`≤ 0.69×`, `at most 0.69×`) are bounds, not estimates
BARE_RATIO = re.compile(r"(?<!≤ )(?<!at most )(?<![\d.])\d+(?:\.\d+)?×(?! \[)")


@cache
def folded(recording: Path) -> tuple[DashboardState, RunSummary]:
    rec = read_recording(recording)
    state = DashboardState()
    state.apply_all([rec.header, *rec.events])
    return state, summarize(state)


def summary_ratios(s: RunSummary) -> set[str]:
    """Every ratio of the summary as the one formatter prints it."""
    found = [c.validity.ratio for c in s.checks] + [p.ratio for p in s.pooled]
    for phase in s.phases:
        found += [x for r in phase.sweep for x in (r.ratio, r.vs_l1)]
        found += [r.result.vs_plain for r in phase.decode]
    return {ratio_text(x) for x in found if x is not None}


def screens(state: DashboardState) -> dict[str, str]:
    """What the dashboard's panes show at each size (the log pane aside)."""
    out = {}
    for width, pane in zip(WIDTHS, PANE_WIDTHS, strict=True):
        out[f"verdict@{width}"] = "\n".join(t.plain for t in verdict_lines(state, width - 10))
        for arm in ("stock", "patched"):
            out[f"{arm}@{pane}"] = arm_text(state, arm, pane, 30).plain
        out[f"l1@{pane}"] = validity_text(state, pane).plain
        out[f"figure@{pane}"] = marginal_plot(state, pane, 20).plain
    return out


def surfaces(recording: Path) -> dict[str, str]:
    state, s = folded(recording)
    runs = [Run(label, recording, state) for label in "AB"]
    return {
        "markdown": export.summary_markdown(s),
        "csv": export.summary_csv(s),
        "compare": compare_markdown(compare(*runs)),
        **screens(state),
    }


@pytest.mark.parametrize("recording", RECORDINGS, ids=lambda p: p.name)
def test_every_ratio_shown_is_the_summarys_with_its_ci(recording):
    _, s = folded(recording)
    ratios = summary_ratios(s)
    for name, text in surfaces(recording).items():
        if name == "csv":  # numbers in cells
            continue
        if name == "compare":  # both verdicts; its own B/A column is a range of CI ends
            text = "\n".join(x for x in text.splitlines() if x.startswith(("- A:", "- B:")))
        for shown in RATIO_WITH_CI.findall(text):
            assert shown in ratios, (name, shown)
        bare = BARE_RATIO.findall(text)
        assert not bare, (name, bare, text)


@pytest.mark.parametrize("recording", RECORDINGS, ids=lambda p: p.name)
def test_the_verdicts_figures_are_the_tables(recording):
    state, s = folded(recording)
    line = export.verdict_text(s)
    for width in WIDTHS:  # the L = 1 counts read the same at every width
        counts = re.search(r"L=1 ✓ \d+/\d+(?: ✓p \d+/\d+)?(?: \? \d+)?(?: ✗ \d+)?", line)
        if counts:
            screen = "\n".join(t.plain for t in verdict_lines(state, width - 10))
            assert counts.group(0) in screen.replace("\n", " "), (width, screen)
    d2 = re.search(r"Δ2 @ (\S+): (\S+) vs (\S+) ms", line)
    if d2:
        at, stock, patched = d2.groups()
        rows = [m for m in s.marginal if fmt_context(m.context) == at]
        assert any(
            (ms_text(m.stock.median), ms_text(m.patched.median)) == (stock, patched)
            for m in rows
            if m.stock and m.patched
        ), (line, rows)
    checks = s.checks
    if checks and "L=1 ✓" in line:
        own = sum(c.check.value == "valid" for c in checks)
        assert f"L=1 ✓ {own}/{len(checks)}" in line


@pytest.mark.parametrize("recording", RECORDINGS, ids=lambda p: p.name)
def test_both_arm_panes_list_the_same_settings(recording):
    state, _ = folded(recording)
    for pane in PANE_WIDTHS:
        shown = {}
        for arm in ("stock", "patched"):
            text = arm_text(state, arm, pane, 30).plain
            accepted = re.search(r"^accept(?:ance)? (\S+(?: d\d)?)", text, re.M)
            shown[arm] = accepted.group(1) if accepted else None
        assert shown["stock"] == shown["patched"], (pane, shown)


def test_the_gpu_demos_end_says_each_figure_one_way():
    """scenarios/demo-gpu.jsonl at its end, where the figures used to disagree."""
    from mlatui.widgets.header import thresholds_short
    from mlatui.widgets.render import memory_text, phase_text

    state, s = folded(replay_dumps.ROOT / "scenarios" / "demo-gpu.jsonl")
    line = export.verdict_text(s)
    assert "Δ2 @ 24K: 8.43 vs 1.12 ms ·" in line and "(8×)" not in line  # no ratio without a CI
    assert "168–169@24K" in thresholds_short(state.header.thresholds, state.context)
    progress = phase_text(state, 160).plain  # a completed run: its bar full, its steps said
    assert "985 steps of 1024 planned" in progress and "░" not in progress
    assert "peak active" in memory_text(state, 78).plain  # MLX's peak counts active memory only
    assert export.summary_markdown(s).count("1.153× [1.097, 1.206]") == 2  # table row, verdict
