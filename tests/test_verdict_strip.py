"""The verdict strip: one line for the header, `replay --dump` and the exported markdown."""

from __future__ import annotations

import msgspec
import ui_events

from mlatui.stream.event_base import Interval
from mlatui.stream.events import DecodeResult, PhaseStart, Validity
from mlatui.views.dashboard_state import DashboardState
from mlatui.views.verdict_strip import Tone, verdict_line, verdict_parts
from tests.summaries import markdown as summary_markdown


def _result(arm, depth, vs, lo, hi, context=2048, warnings=()):
    return DecodeResult(
        1.0,
        "tune",
        arm,
        context,
        depth,
        64,
        1.0,
        Interval(50.0 * vs, 45.0, 55.0, 4),
        (),
        20.0,
        None,
        Interval(vs, lo, hi, 4),
        warnings=tuple(warnings),
    )


def _tune(valid=True, extra=()):
    events = [
        ui_events.header(),
        PhaseStart(0.5, "tune", "tune", 0, 1, 10),
        Validity(
            0.9, "tune", 2048, 10.0, 10.0, 0.1, 2.0, valid, "valid" if valid else "inconclusive"
        ),
        _result("stock", 0, 1.0, 1.0, 1.0),
        _result("patched", 0, 1.0, 1.0, 1.0),
        _result("stock", 1, 0.62, 0.55, 0.70),
        _result("stock", 2, 0.71, 0.60, 0.80),
        _result("patched", 1, 1.31, 1.20, 1.42),
        _result("patched", 2, 1.65, 1.52, 1.79),
        *extra,
    ]
    s = DashboardState()
    s.apply_all(events)
    return s, events


def test_best_significant_win_and_rejection_with_cis():
    s, _ = _tune()
    line = verdict_line(s)
    assert "patched spec wins 1.65× [1.52, 1.79] (d2 @ 2K)" in line
    assert "stock spec rejected (slower at 2K)" in line
    assert "L=1 ✓ 1/1" in line
    tones = {p.text.split(" ")[0]: p.tone for p in verdict_parts(s)}
    assert tones["patched"] is Tone.GOOD and tones["stock"] is Tone.BAD


def test_a_warned_result_and_an_unsure_context_never_make_the_verdict():
    flagged = _result("patched", 3, 3.1, 2.9, 3.3, warnings=["barely speculated: 4% of 256"])
    s, _ = _tune(extra=[flagged])
    assert "3.10×" not in verdict_line(s) and "1.65×" in verdict_line(s)
    s, _ = _tune(valid=False)
    line = verdict_line(s)
    assert line.startswith("tune: no verdict (L=1 check not valid at 2K)") and "wins" not in line
    assert "L=1 ✓ 0/1 ? 1" in line and "moved" not in line
    from mlatui.stream.events import DriftEvent

    for rnd in (3, 7):  # a host whose level jumped between rounds: the strip says so
        s.apply(DriftEvent(9.0, "tune", 2048, rnd, 30.0, 45.0, 50.0))
    line = verdict_line(s, 200)
    assert line.startswith(
        "tune: no verdict (L=1 check not valid at 2K; device drift in 2 steps)"
    ), line


def test_not_significant_is_said_so():
    # an arm whose only results have CIs straddling 1 says "no significant gain"
    s2 = DashboardState()
    s2.apply_all(
        [
            e
            for e in _tune()[1]
            if not (getattr(e, "arm", "") == "patched" and getattr(e, "depth", 0))
        ]
    )
    s2.apply(_result("patched", 1, 1.04, 0.97, 1.10))
    assert "patched no significant gain" in verdict_line(s2)


def test_short_forms_fit_narrow_screens_and_markdown_carries_the_same_line():
    s, events = _tune()
    assert len(verdict_line(s, 60)) <= 60
    assert verdict_line(s, 60) == "stock rejected · patched 1.65× [1.52, 1.79] @ 2K · L=1 ✓ 1/1"
    md = summary_markdown(events)
    assert f"**Verdict:** {verdict_line(s)}" in md


def _pooled_state(decided=(1024, 2048, 4096, 8192), outcome="valid"):
    """Five sweep contexts: 512 valid on its own, the others inconclusive alone and then, for
    those in `decided`, valid by the pooled check (a Validity with basis pooled replaces them)."""
    from mlatui.stream.events import Basis, PooledValidity

    events = [ui_events.header(), PhaseStart(0.5, "sweep", "sweep", 0, 1, 10)]
    own = {512: (True, "valid", 1.001, 0.995, 1.008)}
    own |= {c: (False, "inconclusive", 1.004, 0.97, 1.03) for c in (1024, 2048, 4096, 8192)}
    checks = {}
    for c, (valid, outcome_own, m, lo, hi) in own.items():
        checks[c] = Validity(
            1.0, "sweep", c, 10.0, 10.0, 0.1, 2.0, valid, outcome_own, Interval(m, lo, hi, 6), 6
        )
        events.append(checks[c])
    undecided = tuple(c for c in (1024, 2048, 4096, 8192) if c not in decided)
    contexts = (512, 1024, 2048, 4096, 8192)
    events.append(
        PooledValidity(
            2.0, "sweep", contexts, 30, 90, Interval(1.003, 0.994, 1.011, 90), 2.0, outcome, "est", "ci",
            tuple(decided), undecided,
        )
    )  # fmt: skip
    for c in decided:
        v = checks[c]
        events.append(
            msgspec.structs.replace(v, t=2.0, valid=True, outcome="valid", basis=Basis.POOLED)
        )
    s = DashboardState()
    s.apply_all(events)
    return s, events


def test_pooled_contexts_are_counted_apart_from_valid_ones_with_the_pooled_figure():
    s, _ = _pooled_state()
    part = next(p for p in verdict_parts(s) if p.text.startswith("L=1"))
    assert part.text == "L=1 ✓ 1/5 ✓p 4/5 (pooled 1.0030× [0.9940, 1.0110], 5 contexts)"
    assert part.forms[1] == "L=1 ✓ 1/5 ✓p 4/5" and part.tone is Tone.GOOD
    assert part.short == "L=1 ✓ 1/5 ✓p 4/5"  # the counts at every width, never another form
    s, _ = _pooled_state(decided=(1024,))
    part = next(p for p in verdict_parts(s) if p.text.startswith("L=1"))
    assert part.text == "L=1 ✓ 1/5 ✓p 1/5 ? 3 (pooled 1.0030× [0.9940, 1.0110], 5 contexts)"
    assert part.tone is Tone.WARN


def test_a_pooled_check_that_did_not_pass_is_shown_with_its_outcome():
    s, _ = _pooled_state(decided=(), outcome="inconclusive")
    part = next(p for p in verdict_parts(s) if p.text.startswith("L=1"))
    assert part.text == "L=1 ✓ 1/5 ? 4 (pooled 1.0030× [0.9940, 1.0110], 5 contexts: inconclusive)"


def test_a_speculative_win_at_a_pooled_context_says_so():
    from mlatui.stream.events import Basis

    pooled = Validity(
        1.5,
        "tune",
        2048,
        10.0,
        10.0,
        0.1,
        2.0,
        True,
        "valid",
        Interval(1.0, 0.97, 1.03, 6),
        6,
        Basis.POOLED,
    )
    s, _ = _tune(valid=False, extra=(pooled,))
    assert "patched spec wins 1.65× [1.52, 1.79] (d2 @ 2K, L=1 ✓p)" in verdict_line(s)
    assert "L=1 ✓ 0/1 ✓p 1/1" in verdict_line(s)


def test_the_bench_report_lists_each_check_once_with_its_basis_and_the_pooled_row():
    from mlatui.views.summary import invalid_contexts

    _, events = _pooled_state(decided=(1024, 2048, 4096))
    md = summary_markdown(events)
    table = md.split("## L = 1 check")[1].split("\n## ")[0]
    rows = [line for line in table.splitlines() if line.startswith("| sweep")]
    assert len(rows) == 6  # five contexts, each once (its last check), and the pooled row
    assert rows[0].endswith("| ✓ valid | own |") and rows[1].endswith("| ✓p valid | pooled |")
    assert rows[4].endswith("| ? inconclusive | own |")
    assert rows[5].startswith("| sweep (pooled) | 5 contexts |")
    assert "1.0030× [0.9940, 1.0110]" in rows[5] and rows[5].endswith("| 30 | ✓ valid | pooled |")
    assert "Valid (pooled) at 1024, 2048, 4096" in table and "Still inconclusive at 8192" in table
    assert invalid_contexts(events) == [("sweep", 8192, 0.1, "inconclusive")]


def test_the_export_marks_pooled_checks_and_keeps_them_in_verdicts():
    from tests.summaries import csv_rows
    from tests.summaries import markdown as export_markdown

    s, _ = _pooled_state(decided=(1024, 2048, 4096))
    md = export_markdown(s)
    assert "| sweep | 1024 |" in md and "✓p valid | pooled |" in md
    assert "| sweep (pooled) | 5 contexts |" in md
    assert (
        "Pooled L = 1 check after sweep: est; ci; contexts 512, 1024, 2048, 4096, 8192 "
        "(30 rounds, 90 quads): valid." in md
    )
    checks = {r["context"]: r["check"] for r in csv_rows(s) if r["table"] == "l1_check"}
    assert checks[512] == "valid" and checks[1024] == "valid (pooled)"
    assert checks[8192] == "inconclusive"
    pooled = [r for r in csv_rows(s) if r["table"] == "l1_pooled"]
    assert len(pooled) == 1 and pooled[0]["check"] == "valid" and pooled[0]["n"] == 90


def test_rejected_by_bound_counts_as_rejected_and_a_warned_arm_says_why_it_has_no_verdict():
    """The stock arm's settings rejected by bound (no tok/s, the bound as the upper end) and the
    patched arm's results all warned: stock is rejected by bound, patched has no verdict."""
    from mlatui.stream.events import SpeedupBound

    bound = SpeedupBound(2, 31.0, 2000.0, 0.05, 0.03, 1.5)
    events = [
        ui_events.header(),
        PhaseStart(0.5, "tune", "tune", 0, 1, 10),
        Validity(0.9, "tune", 2048, 10.0, 10.0, 0.1, 2.0, True, "valid"),
        _result("stock", 0, 1.0, 1.0, 1.0),
        _result("patched", 0, 1.0, 1.0, 1.0),
        msgspec.structs.replace(
            _result("stock", 1, 1.0, None, 0.05),
            tokens=0,
            tok_s=None,
            vs_plain=None,
            measured=False,
            bound=bound,
        ),
        _result("patched", 1, 1.3, 1.2, 1.4, warnings=("looping text: 31% distinct 4-grams",)),
    ]
    s = DashboardState()
    s.apply_all(events)
    line = verdict_line(s)
    assert line.startswith(
        "stock spec rejected (by bound at 2K) · patched: no verdict (every result warned at 2K)"
    ), line
    assert "wins" not in line


def test_a_negative_marginal_cost_gets_no_ratio():
    """Under load a Δ2 median can come out below 0 (L = 2 cheaper than L = 1 by noise): the
    strip shows both figures but no "(-46×)" ratio."""
    from mlatui.stream.events import Estimate
    from mlatui.stream.phase_rows import EstimateRow, Quantity

    def row(q, arm, w, m):
        return EstimateRow(quantity=Quantity(q), arm=arm, width=w, median=m, low=m, high=m, n=4)

    rows = [
        row("step_ms", "stock", 1, 10.0),
        row("step_ms", "stock", 2, 9.0),
        row("step_ms", "patched", 1, 10.0),
        row("step_ms", "patched", 2, 10.2),
        row("marginal_ms", "stock", 2, -1.0),
        row("marginal_ms", "patched", 2, 0.2),
    ]
    s = DashboardState()
    s.apply_all(
        [
            ui_events.header(),
            PhaseStart(0.0, "sweep", "sweep", 0, 1, 8, (4096,)),
            Estimate(1.0, "sweep", 4096, 4, True, "valid", tuple(rows), 0, {}),
            Validity(
                1.1,
                "sweep",
                4096,
                10.0,
                10.0,
                0.1,
                2.0,
                True,
                "valid",
                Interval(1.0, 0.99, 1.01, 4),
                4,
            ),
        ]
    )
    line = verdict_line(s)
    assert "Δ2 @ 4K: -1.00 vs 0.200 ms" in line and "×" not in line


def test_parts_shorten_one_step_at_a_time_pooled_suffix_first_never_the_ci_or_the_d2_ms():
    """The shipped demo from 230 columns down to 60: the pooled suffix goes first; every width
    keeps the speedup's CI, both Δ2 figures and the same L = 1 counts."""
    from pathlib import Path

    from mlatui.stream.recorder import read_recording

    rec = read_recording(Path(__file__).parents[1] / "scenarios" / "demo.jsonl")
    s = DashboardState()
    s.apply_all([rec.header, *rec.events])
    widest = verdict_line(s)
    assert "(pooled 1.0107× [0.9986, 1.0177], 4 contexts)" in widest
    lines = {w: verdict_line(s, w) for w in range(60, 240, 10)}
    for w, line in lines.items():
        assert "1.124× [1.009, 1.157]" in line and "252 vs 14.0 ms" in line, (w, line)
        assert ("(pooled" in line) == (len(widest) <= w), (w, line)
    assert "L=1 ✓ 2/5 ✓p 3/5" in lines[160] and len(lines[160]) <= 160
    assert all(line.endswith("L=1 ✓ 2/5 ✓p 3/5") for w, line in lines.items() if w < len(widest))
