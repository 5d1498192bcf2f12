"""An A/A judged as a whole: the count of CIs excluding 1 against what chance alone gives."""

from __future__ import annotations

import random

import msgspec
import pytest
import ui_events

from mlatui.measure.estimates import binomial_tail, judge_null
from mlatui.stream.events import Estimate, PhaseStart
from mlatui.stream.phase_rows import EstimateRow, Quantity
from mlatui.views.dashboard_state import DashboardState
from mlatui.views.export import null_bias_table
from mlatui.views.summary import summarize
from mlatui.views.verdict_strip import Tone, verdict_line, verdict_parts


def test_binomial_tail_by_hand():
    assert binomial_tail(0, 24, 0.05) == 1.0
    assert binomial_tail(25, 24, 0.05) == 0.0
    assert binomial_tail(1, 24, 0.05) == pytest.approx(1 - 0.95**24)  # 0.708
    p2 = 1 - 0.95**24 - 24 * 0.05 * 0.95**23
    assert binomial_tail(2, 24, 0.05) == pytest.approx(p2)  # 0.339
    assert binomial_tail(3, 24, 0.05) == pytest.approx(0.1159, abs=1e-4)


def test_a_perfect_harness_passes_the_count_and_a_biased_one_fails_it():
    """Simulated A/As of 24 cells: with each CI covering 1 in 95% of runs, the run-level
    judgement calls a harness difference in at most ~5% of runs; with a bias that pushes a
    third of the cells outside, in nearly all."""
    rng = random.Random(0)

    def runs(p_out: float) -> float:
        bad = 0
        for _ in range(2000):
            k = sum(rng.random() < p_out for _ in range(24))
            bad += not judge_null(k, 24).consistent
        return bad / 2000

    assert runs(0.05) <= 0.06
    assert runs(0.33) >= 0.97  # P(k <= 3 | 24 cells at 1/3) = 1.6%
    assert judge_null(3, 24).consistent and not judge_null(5, 24).consistent


def _null_state(outside: int, cells: int = 12):
    header = ui_events.header()
    header = msgspec.structs.replace(
        header, settings=msgspec.structs.replace(header.settings, null=True)
    )
    rows = []
    for i in range(cells):
        lo, hi = (1.01, 1.05) if i < outside else (0.98, 1.02)
        rows.append(
            EstimateRow(
                quantity=Quantity.RATIO, arm="stock", width=1 + i % 3, median=(lo + hi) / 2,
                low=lo, high=hi, n=8,
            )
        )  # fmt: skip
    events = [
        header,
        PhaseStart(0.5, "sweep/aa-stock", "sweep", 0, 1, 10),
        Estimate(1.0, "sweep/aa-stock", 512, 8, True, "valid", tuple(rows[:6])),
        Estimate(2.0, "sweep/aa-stock", 1024, 8, True, "valid", tuple(rows[6:])),
    ]
    s = DashboardState()
    s.apply_all(events)
    return s, events


def test_the_strip_of_an_aa_run_counts_cells_and_never_shows_a_speedup_or_a_ratio():
    s, events = _null_state(outside=1)
    line = verdict_line(s)
    assert line.startswith("A/A: 11/12 CIs contain 1 (1 outside: as chance allows, P(≥1) = 0.46)")
    assert "Δ2" not in line and "wins" not in line and "×" not in line
    assert verdict_parts(s)[0].tone is Tone.GOOD
    s, _ = _null_state(outside=4)
    assert "a harness difference" in verdict_line(s)
    assert verdict_parts(s)[0].tone is Tone.BAD
    s, _ = _null_state(outside=0)
    assert verdict_line(s).startswith("A/A: 12/12 CIs contain 1 (no arm difference)")


def test_the_bias_table_ends_with_the_run_level_judgement():
    s, _ = _null_state(outside=1)
    table = null_bias_table(summarize(s).null_finals)
    assert "1 of 12 95% CIs exclude 1" in table
    assert "in 46% of A/A runs" in table and "**consistent with no arm difference**" in table
    s, _ = _null_state(outside=4)
    assert "**a harness difference**" in null_bias_table(summarize(s).null_finals)
