"""Every figure a person can read agrees with `replay --dump`'s.

The screen: every shipped event recording (tests.replay_dumps.recordings(): scenarios/demo*,
docs/data, the kept fixtures) replayed to its end in the real app at 80x24, 100x34, 120x40,
160x50 and 220x60, read off the composed screen on every page and view the keys reach
(tests/ui_screen.py). Each figure shown is the RunSummary's (mlatui/views/summary.py, the fold
`replay --dump` prints: tests/test_replay_dumps.py holds the dump to it), printed by the one
formatter of its unit (mlatui/views/units.py): the verdict strip is the summary's verdict parts,
the arm panes' medians, tok/s, speedups, bounds, acceptance and MBU its sweep and decode rows,
the key figure's labels its marginal costs (or MBU), the L = 1 table its checks; the events
pane writes every ratio in the one format. A pane that computed or rounded a figure of its own
fails here. No row is cut without an ellipsis.
The default run takes a diagonal (each size at least once); `-m slow` the whole matrix.

The printers: the summary markdown (`bench`, `replay --dump`, the `e` export) and `compare`
print each ratio with its CI, the summary's."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import pytest

from mlatui.stream.recorder import read_recording
from mlatui.stream.sources import ReplaySource
from mlatui.views import export
from mlatui.views.compare import Run, compare, compare_markdown
from mlatui.views.dashboard_state import DashboardState
from mlatui.views.key_figure import FigureView
from mlatui.views.summary import Check, RunSummary, summarize
from mlatui.views.units import (
    Ci,
    bound_ratio,
    bytes_text,
    fmt_context,
    mbu_cell,
    median_text,
    ms_text,
    percent_text,
    ratio_text,
)
from mlatui.widgets.app import MlatuiApp
from mlatui.widgets.validity_pane import _phase_short
from tests import replay_dumps
from tests.ui_screen import Screen, cut_lines, every_view
from tests.ui_settled import settled

RECORDINGS = replay_dumps.recordings()
SIZES = [(80, 24), (100, 34), (120, 40), (160, 50), (220, 60)]
# the default run: the four recordings of the snapshot tests and the H100 MBU run, each size once
DIAGONAL = {
    ("demo.jsonl", (80, 24)),
    ("demo-gpu.jsonl", (100, 34)),
    ("ui_aa_finished.jsonl.gz", (120, 40)),
    ("h100-mbu-long-context.jsonl.gz", (160, 50)),
    ("ui_tune_only.jsonl.gz", (220, 60)),
}
NUMBER = r"\d+(?:\.\d+)?"
RATIO_WITH_CI = re.compile(rf"{NUMBER}× \[{NUMBER}, {NUMBER}\]")
# a ratio's figure without its CI; bounds (`≤ 0.69×`, `at most 0.69×`) are bounds, not estimates
BARE_RATIO = re.compile(r"(?<!≤ )(?<!at most )(?<![\d.])\d+(?:\.\d+)?×(?! \[)")
MARKS = {
    Check.VALID: "✓",
    Check.POOLED: "✓p",
    Check.INCONCLUSIVE: "?",
    Check.INVALID: "✗",
    Check.PENDING: "…",
}


@cache
def folded(recording: Path) -> tuple[DashboardState, RunSummary]:
    rec = read_recording(recording)
    state = DashboardState()
    state.apply_all([rec.header, *rec.events])
    return state, summarize(state)


# -- what each pane shows, against the summary ------------------------------------------------


def _cut(text: str) -> bool:
    return text.endswith("…")


def verdict_problems(rows: list[str], s: RunSummary) -> list[str]:
    """The verdict strip is the summary's verdict parts, each in one of its forms, in order;
    the phase line says the summary's steps."""
    at = next((i for i, r in enumerate(rows) if r.lstrip().startswith("verdict ")), None)
    if at is None:
        return ["header: no verdict line"]
    lead = len(rows[at]) - len(rows[at].lstrip()) + len("verdict ") + 1
    lines = [rows[at].lstrip().removeprefix("verdict").strip()]
    for row in rows[at + 1 :]:
        if not row.startswith(" " * lead) or not row.strip():
            break
        lines.append(row.strip())
    shown = " · ".join(lines)
    if not s.verdict:
        return [] if shown == "no result yet" else [f"verdict: {shown!r}, the summary has none"]
    if not _forms_match(shown, [p.forms for p in s.verdict]):
        return [f"verdict: {shown!r} is not {[p.forms for p in s.verdict]}"]
    phase = next((r for r in rows if r.lstrip().startswith("phase ")), None)
    if phase is not None and s.progress.steps_text not in phase:
        return [f"phase line: {phase!r} does not say {s.progress.steps_text!r}"]
    return []


def _forms_match(text: str, parts: list[tuple[str, ...]]) -> bool:
    if not parts:
        return text == ""
    for form in parts[0]:
        rest = text.removeprefix(form)
        if rest == text:
            continue
        if len(parts) == 1 and rest == "":
            return True
        if rest.startswith(" · ") and _forms_match(rest[3:], parts[1:]):
            return True
    return False


def _decode_rows(s: RunSummary, arm: str, context: str | None):
    return [
        r.result
        for p in s.phases
        for r in p.decode
        if r.result.arm == arm and (context is None or fmt_context(r.result.context) == context)
    ]


def _sweep_rows(s: RunSummary, phase: str | None):
    phases = [p for p in s.phases if p.sweep and (phase is None or p.name == phase)]
    return [r for p in phases for r in p.sweep]


def arm_problems(rows: list[str], arm: str, s: RunSummary) -> list[str]:
    """Medians, acceptance, tok/s, speedups, bounds and MBU of one arm pane."""
    out: list[str] = []
    lines = [r.strip() for r in rows]
    scale = next((m for r in lines if (m := re.match(r"(\S+) (?:step ms, bars|ms) 0–", r))), None)
    phase = scale.group(1) if scale else None
    sweep = _sweep_rows(s, phase)
    for line in lines:
        if m := re.match(r"@ (\S+) median(?: over rounds)? (.*?)(?: ms)?$", line):
            cells = re.findall(rf"L=?(\d+) ({NUMBER}|–)", m.group(2))
            for width, shown in cells[:-1] if _cut(line) else cells:  # the last one cut: …
                want = {
                    ms_text(getattr(r, arm).median)
                    for r in sweep
                    if fmt_context(r.context) == m.group(1) and r.width == int(width)
                    if getattr(r, arm) is not None
                } | {  # a decode phase's bars are its verify steps: the tables' verify ms
                    ms_text(r.verify_ms_median)
                    for r in _decode_rows(s, arm, m.group(1))
                    if (phase is None or r.phase == phase.split(":")[0])  # no heading: any
                    and r.depth == int(width) - 1
                    and r.verify_ms_median
                }
                if shown not in want:
                    out.append(f"{arm} median @ {m.group(1)} L={width}: {shown} not in {want}")
        elif line.startswith("MBU @"):
            out += _mbu_problems(line, arm, sweep)
    out += _acceptance_problems(lines, arm, s)
    out += _tok_s_problems(lines, arm, s)
    return out


def _mbu_problems(line: str, arm: str, sweep) -> list[str]:
    head, _, cells = line.partition(" ")[2].partition(" ")
    out = []
    for cell in cells.split(" · "):
        m = re.match(r"L=(\d+) (.*)", cell)
        if not m or _cut(cell):
            continue
        width, shown = int(m.group(1)), m.group(2)
        want = set()
        for r in sweep:
            if fmt_context(r.context) != head.removeprefix("@") or r.width != width:
                continue
            mbu, most = r.mbu.get(arm), r.mbu_most.get(arm)
            if mbu is None:
                continue
            want.add(mbu_cell(mbu, most))
            short = percent_text(mbu.median * 100)
            if most is not None and most.median > mbu.median * 1.001:
                short += f" .. {percent_text(most.median * 100)}"
            want.add(short)
        if shown not in want:
            out.append(f"{arm} MBU {head} L={width}: {shown!r} not in {want}")
    return out


def _acceptance_problems(lines: list[str], arm: str, s: RunSummary) -> list[str]:
    line = next((x for x in lines if re.match(r"accept(ance)?\b", x)), None)
    figures = next((a for a in s.acceptance if a.arm == arm), None)
    if line is None or _cut(line):
        return []
    cells = re.findall(r"(\d+):(\d+%|–)", line)
    mean = re.search(rf"ā ?({NUMBER})", line)
    want_cells = (
        [(str(i + 1), "–" if x is None else f"{x:.0%}") for i, x in enumerate(figures.conditional)]
        if figures is not None
        else []
    )
    out = []
    if cells != want_cells:
        out.append(f"{arm} acceptance {cells} is not the summary's {want_cells}")
    if figures is not None and figures.mean_accepted is not None:
        if not mean or mean.group(1) != f"{figures.mean_accepted:.2f}":
            out.append(f"{arm} ā in {line!r} is not {figures.mean_accepted:.2f}")
        kinds = {r.result.draft_kind for p in s.phases for r in p.decode if r.result.depth}
        said = figures.setting.label if len(kinds) > 1 else f"d{figures.setting.depth}"
        if f" {said} " not in f"{line} " and f" {said}:" not in line:
            out.append(f"{arm} acceptance {line!r} is not of {said}")
    return out


SETTING = re.compile(
    rf"d(\d+) (?:bound (≤ {NUMBER}×)|(~?{NUMBER}|–)(?: ({NUMBER}× \[{NUMBER}, {NUMBER}\]))?)"
)


def _tok_s_problems(lines: list[str], arm: str, s: RunSummary) -> list[str]:
    start = next((i for i, x in enumerate(lines) if x.startswith("tok/s")), None)
    if start is None:
        return []
    head = re.match(r"tok/s(?: @ (\S+))? plain (\S+)", lines[start])
    if head is None:
        return [f"{arm} tok/s line {lines[start]!r}"]
    rows = _decode_rows(s, arm, head.group(1))
    out = []
    plain = head.group(2)
    if not plain.startswith("~") and plain != "–" and not _cut(plain):
        want = {median_text(r.tok_s) for r in rows if r.depth == 0}
        if plain not in want:
            out.append(f"{arm} plain tok/s {plain} not in {want}")
    kinds = sorted({r.draft_kind for r in rows if r.depth}, key=len, reverse=True)
    kind = kinds[0] if len(kinds) == 1 else None
    for line in lines[start + 1 :]:
        if not line or line.startswith(("MBU", "gate calls", "absorbed", "not counted", "…")):
            break
        named = next((k for k in kinds if line == k or line.startswith(k + " ")), None)
        if named is not None:
            kind, line = named, line[len(named) :]
        for m in SETTING.finditer(line):
            depth, bound, tok_s, ratio = int(m.group(1)), m.group(2), m.group(3), m.group(4)
            mine = [r for r in rows if r.depth == depth and r.draft_kind == kind]
            where = f"{arm} {kind} d{depth}"
            if bound is not None:
                if bound not in {bound_ratio(r.bound.value) for r in mine if r.bound}:
                    out.append(f"{where}: bound {bound} is not the summary's")
                continue
            if tok_s and not tok_s.startswith("~") and tok_s != "–":
                if tok_s not in {median_text(r.tok_s) for r in mine}:
                    out.append(f"{where}: {tok_s} tok/s not in {[str(r.tok_s) for r in mine]}")
            if ratio is not None and ratio not in {ratio_text(r.vs_plain) for r in mine}:
                out.append(f"{where}: {ratio} is not the summary's speedup")
    return out


def figure_problems(rows: list[str], view: FigureView, s: RunSummary) -> list[str]:
    """Every value written beside a point is one of the summary's, as the one formatter writes
    it: a marginal cost (ms) or, in the MBU view, an L = 2 step's MBU."""
    axis = next((r.index("┤") for r in rows if "┤" in r), None)
    if axis is None:
        return []
    if view is FigureView.MBU:
        want = {
            percent_text(ci.median * 100)
            for r in _sweep_rows(s, None)
            if r.width == 2
            for ci in r.mbu.values()
        }
    else:
        want = {
            ms_text(ci.median) for r in s.marginal for ci in (r.stock, r.patched) if ci is not None
        }
    out = []
    for row in rows:
        if len(row) <= axis or row[axis] not in "┤│":
            if "└" in row:
                break
            continue
        for m in re.finditer(rf"(?<![\w.]){NUMBER}%?", row[axis + 1 :]):
            if m.group(0) not in want:
                out.append(f"key figure ({view.value}): {m.group(0)} not in {sorted(want)}")
    return out


CHECK_ROW = re.compile(
    rf"(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(✓p|✓|\?|✗|…)"
    rf"(?: ({NUMBER}× \[{NUMBER}, {NUMBER}\]))?(?:\s+(\S+)\s+(\S+))?$"
)


def validity_problems(rows: list[str], s: RunSummary) -> list[str]:
    """Each row of the L = 1 table is the summary's check (both arms' L = 1 figures, the mark,
    the paired ratio) and marginal costs; the pooled check's figure is the summary's."""
    checks: dict[tuple[str, str], list] = {}
    for c in s.checks:
        short = _phase_short(c.phase)
        short = f"{short[:5]}*" if c.figures.per_token else short
        checks.setdefault((short, fmt_context(c.context)), []).append(c)
    pooled = {ratio_text(p.ratio) for p in s.pooled}
    out = []
    for row in (r.strip() for r in rows):
        if "pooled check" in row:
            out += [
                f"pooled {x} not in {pooled}" for x in RATIO_WITH_CI.findall(row) if x not in pooled
            ]
            continue
        m = CHECK_ROW.match(row)
        if m is None or _cut(row) or m.group(5) == "…":
            continue
        short, ctx, s1, p1, mark, ratio, d2s, d2p = m.groups()
        found = checks.get((short, ctx))
        if not found:
            out.append(f"L=1 row {row!r}: no such check in the summary")
            continue
        want = set()
        for c in found:
            marg = next(
                (x for x in s.marginal if (x.phase, x.context) == (c.phase, c.context)), None
            )
            d2 = (
                (ms_text(marg.stock.median if marg.stock else None),
                 ms_text(marg.patched.median if marg.patched else None))
                if marg is not None
                else ("–", "–")
            )  # fmt: skip
            cells = (ms_text(c.figures.stock_ms), ms_text(c.figures.patched_ms), MARKS[c.check])
            paired = ratio_text(c.validity.ratio) if c.validity.ratio is not None else None
            want.add((*cells, paired if ratio else None, *(d2 if d2s else (None, None))))
        if (s1, p1, mark, ratio, d2s, d2p) not in want:
            out.append(f"L=1 row {row!r} is not {want}")
    return out


def memory_problems(rows: list[str], s: RunSummary) -> list[str]:
    m = s.memory
    if m is None:
        return []
    want = (
        f"active {bytes_text(m.mlx_active_bytes)} · cache {bytes_text(m.mlx_cache_bytes)}"
        f" · peak active {bytes_text(m.mlx_peak_bytes)}"
    )
    line = next((r.strip() for r in rows if r.strip().startswith("active ")), None)
    if line is None or _cut(line) or line == want:
        return []
    return [f"memory: {line!r} is not {want!r}"]


def same_settings_problems(screen: Screen) -> list[str]:
    """Both arm panes, where both are shown, give the acceptance of one setting."""
    said = {}
    for arm in ("arm-stock", "arm-patched"):
        line = next(
            (r.strip() for r in screen.rows.get(arm, []) if re.match(r"accept", r.strip())), None
        )
        if line is not None:
            said[arm] = re.match(r"accept(?:ance)? (\S+(?: d\d)?)", line)
    if len(said) < 2 or not all(said.values()):
        return []
    shown = {arm: m.group(1) for arm, m in said.items() if m}
    return [] if len(set(shown.values())) == 1 else [f"the arm panes' settings differ: {shown}"]


# the forms a ratio or a CI had before the one format: `0.40x`, `[0.36-0.46]`, `(95% CI 1.1-1.2)`
OLD_RATIO = re.compile(rf"(?<![\w.]){NUMBER}x\b")
OLD_CI = re.compile(rf"\[{NUMBER}-{NUMBER}\]|\(95% CI {NUMBER}-{NUMBER}\)|\({NUMBER}–{NUMBER}\)")


# Recorded sentences whose ratio has no CI to give: the budget's story forecast (the probe's
# L = 2 / L = 1 medians, run/budget.py, with its criteria `at 4×`, `within 1.5×`) and a
# schema-1 sweep's last line (recorded before the sampler kept CIs). Only these may stand bare.
FORECAST = re.compile(
    rf"at {NUMBER}× its L = 1 step|within {NUMBER}×;|\(stock {NUMBER}×, patched {NUMBER}×\)"
    rf"|ms vs patched {NUMBER} ms \({NUMBER}×\)"
)


def log_problems(rows: list[str], log) -> list[str]:
    """The events pane writes each ratio as every other pane does, `1.12× [1.01, 1.16]` (or a
    bound, `at most 0.70×`): the rows shown (a wrapped sentence joined again) and all it holds."""
    out = []
    shown, kept = " ".join(r.strip() for r in rows), log.content().plain
    for where, text in (("shown", shown), ("kept", kept)):
        text = re.sub(r"\s+", " ", text)
        found = [*OLD_RATIO.findall(text), *OLD_CI.findall(text)]
        found += BARE_RATIO.findall(FORECAST.sub("", text))
        out += [f"events ({where}): {x!r} is not `1.12× [1.01, 1.16]`" for x in found]
    return out


def screen_problems(screen: Screen, s: RunSummary) -> list[str]:
    out = same_settings_problems(screen)
    for pane_id, rows in screen.rows.items():
        pane = screen.panes[pane_id]
        if pane_id == "header":
            out += verdict_problems(rows, s)
        elif pane_id.startswith("arm-"):
            out += arm_problems(rows, pane.arm, s)  # type: ignore[union-attr]
        elif pane_id == "marginal":
            out += figure_problems(rows, pane.view, s)  # type: ignore[union-attr]
        elif pane_id == "validity":
            out += validity_problems(rows, s)
        elif pane_id == "memory":
            out += memory_problems(rows, s)
        elif pane_id == "log":
            out += log_problems(rows, pane)
        if pane_id != "log":
            text = "\n".join(rows)
            out += [f"{pane_id}: a ratio without its CI: {x}" for x in BARE_RATIO.findall(text)]
    return [f"{screen.name}: {p}" for p in out]


@pytest.mark.parametrize(
    ("path", "size"),
    [
        pytest.param(
            path,
            size,
            id=f"{path.name.split('.')[0]}-{size[0]}x{size[1]}",
            marks=() if (path.name, size) in DIAGONAL else pytest.mark.slow,
        )
        for path in RECORDINGS
        for size in SIZES
    ],
)
async def test_every_figure_on_screen_is_the_dumps(tmp_path, path, size):
    _, s = folded(path)
    app = MlatuiApp(ReplaySource(path, speed=4096.0), mode="replay", ui_hz=20, out_dir=tmp_path)
    problems: list[str] = []
    async with app.run_test(size=size) as pilot:
        await settled(pilot)
        assert summarize(app.dash) == s  # the app folded what `replay --dump` folds
        async for screen in every_view(pilot):
            problems += screen_problems(screen, s)
            problems += [f"{screen.name}: cut {c}" for c in cut_lines(app)]
    assert problems == []


# -- the printers -------------------------------------------------------------------------------


def summary_ratios(s: RunSummary) -> set[str]:
    """Every ratio of the summary as the one formatter prints it."""
    found = [c.validity.ratio for c in s.checks] + [p.ratio for p in s.pooled]
    for phase in s.phases:
        found += [x for r in phase.sweep for x in (r.ratio, r.vs_l1)]
        found += [r.result.vs_plain for r in phase.decode]
    return {ratio_text(x) for x in found if x is not None}


@pytest.mark.parametrize("recording", RECORDINGS, ids=lambda p: p.name)
def test_every_printed_ratio_is_the_summarys_with_its_ci(recording):
    state, s = folded(recording)
    ratios = summary_ratios(s)
    runs = [Run(label, recording, state) for label in "AB"]
    compared = compare_markdown(compare(*runs))
    surfaces = {
        "markdown": export.summary_markdown(s),
        # both verdicts; its own B/A column is a range of CI ends
        "compare": "\n".join(x for x in compared.splitlines() if x.startswith(("- A:", "- B:"))),
    }
    for name, text in surfaces.items():
        for shown in RATIO_WITH_CI.findall(text):
            assert shown in ratios, (name, shown)
        bare = BARE_RATIO.findall(text)
        assert not bare, (name, bare, text)


@pytest.mark.parametrize("recording", RECORDINGS, ids=lambda p: p.name)
def test_the_verdicts_figures_are_the_tables(recording):
    _, s = folded(recording)
    line = export.verdict_text(s)
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


def test_a_tok_s_shown_alone_is_rounded_as_its_ci_rounds_it():
    assert median_text(Ci(263.49, 244.1, 282.3)) == "263"  # 263 [244, 282] in the tables
    assert median_text(Ci(144.52, 137.5, 151.1)) == "144.5"
    assert median_text(37.14) == "37.1"  # a running estimate: no CI yet


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
