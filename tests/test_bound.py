"""Rejected by bound, the pure parts: the rule, the sampler skipping a rejected arm's calls, the
plan's segments without them, and the tune verdict counting a rejected setting as rejected."""

from __future__ import annotations

import msgspec
import pytest

from mlatui.measure.acceptance import (
    RUNTIME_SLACK,
    likely_rejected,
    rejection_text,
    speedup_bound,
)
from mlatui.measure.plans import Segment, Setting, verify_widths
from mlatui.measure.sampler import Hooks, SamplerPlan, round_schedule, sample_context
from mlatui.run.phases.decode_verdict import decode_verdict, tune_verdict
from mlatui.stream.event_base import Interval
from mlatui.stream.phase_rows import DecodeRow


def iv(median: float, low: float, high: float) -> Interval:
    return Interval(median, low, high, 6)


# -- the rule ---------------------------------------------------------------------------------


def test_the_reference_blas_stock_verify_step_cannot_win_at_any_acceptance():
    """A reference-BLAS run at 1024: plain 31 ms, stock L = 2 2.09 s."""
    b = speedup_bound(1, iv(31.3, 29.0, 33.0), iv(2086.0, 2000.0, 2150.0))
    assert b is not None and b.tokens == 2
    assert b.plain_ms == 33.0 and b.verify_ms == 2000.0  # the conservative ends of the CIs
    assert b.value == pytest.approx(2 * 33.0 / 2000.0 * RUNTIME_SLACK)
    assert b.point == pytest.approx(2 * 31.3 / 2086.0)
    assert b.rejects
    assert rejection_text(b) == (
        "rejected by bound: at most 0.05× (2 × plain ≤ 33.0 ms / verify ≥ 2.00 s, ×1.5 runtime "
        "allowance)"
    )


def test_a_cheap_verify_step_is_not_rejected_whatever_the_depth():
    for depth, verify in ((1, 54.0), (2, 86.0), (3, 100.0)):
        b = speedup_bound(depth, iv(31.0, 30.0, 32.0), iv(verify, verify * 0.95, verify * 1.05))
        assert b is not None and not b.rejects and b.value > 1


def test_the_upper_end_takes_the_ci_ends_not_the_medians():
    """Medians alone would reject (2 x 30 / 100 = 0.6); the CIs' ends (2 x 45 / 60 = 1.5) leave
    room for a win, so the setting must run."""
    b = speedup_bound(1, iv(30.0, 25.0, 45.0), iv(100.0, 60.0, 110.0), slack=1.0)
    assert b is not None and b.point == pytest.approx(0.6) and b.value == pytest.approx(1.5)
    assert not b.rejects


def test_the_paired_ratio_is_used_when_it_is_the_more_generous():
    """verify / plain paired within rounds: its CI's low end 1.25 gives 2 / 1.25 = 1.6 > the
    medians' CIs' 2 x 32 / 95 = 0.67."""
    b = speedup_bound(1, iv(31.0, 30.0, 32.0), iv(100.0, 95.0, 105.0), iv(3.2, 1.25, 3.5), 1.0)
    assert b is not None and b.value == pytest.approx(1.6) and not b.rejects
    # the shown figures give the same value
    assert b.tokens * b.plain_ms / b.verify_ms == pytest.approx(b.value)
    tight = speedup_bound(1, iv(31.0, 30.0, 32.0), iv(100.0, 95.0, 105.0), iv(3.2, 3.1, 3.3), 1.0)
    assert tight is not None and tight.value == pytest.approx(2 * 32.0 / 95.0)


def test_no_bound_without_positive_figures_or_for_plain_decode():
    assert speedup_bound(0, iv(30.0, 29.0, 31.0), iv(30.0, 29.0, 31.0)) is None
    assert speedup_bound(1, iv(30.0, 29.0, 31.0), iv(0.0, 0.0, 1.0)) is None


def test_a_forecast_expects_a_rejection_only_with_room_to_spare():
    assert likely_rejected(1, 31.0, 2086.0)
    # 2 x 31 / 100 x 1.5 = 0.93: the engine would reject it on tight CIs, a forecast does not
    assert not likely_rejected(1, 31.0, 100.0)
    assert not likely_rejected(0, 31.0, 2086.0)


# -- the sampler ------------------------------------------------------------------------------


def test_the_sampler_never_measures_a_skipped_arm_at_a_width_and_fills_its_place():
    plan = SamplerPlan((1, 2, 3), min_rounds=2, max_rounds=2, control_quads=2, settle=False)
    plan = SamplerPlan(**{**plan.__dict__, "skip": frozenset({("stock", 2)})})
    measured, warmed, filled = [], [], []

    def measure(arm: str, width: int) -> float:
        measured.append((arm, width))
        return 10.0 * width if arm == "patched" else 20.0 * width

    run = sample_context(
        plan,
        Hooks(
            measure,
            warm=lambda a, w: warmed.append((a, w)),
            on_skip=lambda a, w: filled.append((a, w)),
        ),
    )
    assert ("stock", 2) not in measured and ("stock", 2) not in warmed
    assert measured.count(("patched", 2)) == 2 * 2  # two per round: the quad keeps its half
    assert filled == [("stock", 2)] * 4  # in each skipped call's place, untimed
    assert len(measured) == plan.timed_calls()
    est = run.final
    assert ("patched", 2) in est.step_ms and ("stock", 2) not in est.step_ms
    assert 2 not in est.ratio and 3 in est.ratio  # no pair at the skipped width
    assert est.vs_l1[("patched", 2)].median == pytest.approx(2.0)
    # the order of every other call is the one without the skip
    full = [c for r in range(2) for c in round_schedule((1, 2, 3), r, control_quads=2)]
    assert measured == [(w, a)[::-1] for w, a in full if (a, w) != ("stock", 2)]


def test_the_control_width_is_never_skipped():
    with pytest.raises(ValueError, match="control width"):
        SamplerPlan((1, 2), skip=frozenset({("stock", 1)}))


def test_a_segment_without_a_rejected_arm_halves_that_widths_calls():
    seg = Segment("tune", 1024, ((1, 8), (2, 4), (3, 4)), 4, 4, 1, 8, False, ((1, "", 0),))
    one = seg.without("stock", 2)
    assert one.calls == ((1, 8), (2, 2), (3, 4)) and one.skipped == (("stock", 2),)
    assert one.arms_at(2) == ("patched",) and one.arms_at(3) == ("stock", "patched")
    both = one.without("patched", 2)
    assert both.calls == ((1, 8), (3, 4)) and both.per_round == 12
    assert msgspec.convert(msgspec.to_builtins(both), Segment) == both
    assert one.without("stock", 2) == one  # once is enough


def test_verify_steps_run_only_at_the_widths_of_the_depths_kept():
    assert verify_widths([1, 2, 3]) == (1, 2, 3, 4)
    assert verify_widths([1]) == (1, 2)
    assert verify_widths([1, 3]) == (1, 2, 4)


# -- the verdicts -----------------------------------------------------------------------------


def _row(arm: str, depth: int, kind: str = "mtp", **kw) -> DecodeRow:
    row = {
        "context": 1024,
        "arm": arm,
        "depth": depth,
        "draft_kind": kind if depth else "",
        "tok_s": 28.9 if depth == 0 else None,
        "vs_plain": 1.0 if depth == 0 else None,
        "vs_plain_low": 1.0 if depth == 0 else None,
        "vs_plain_high": 1.0 if depth == 0 else None,
        "warnings": [],
        "valid": True,
        "outcome": "valid",
        "measured": True,
        "bound": None,
    }
    return msgspec.convert(row | kw, DecodeRow)


def _rejected(arm: str, depth: int, value: float, kind: str = "mtp") -> DecodeRow:
    bound = {"tokens": depth + 1, "plain_ms": 35.0, "verify_ms": 2000.0, "value": value}
    bound |= {"point": value / 1.5, "slack": 1.5}
    return _row(arm, depth, kind, measured=False, vs_plain_high=value, bound=bound)


def _measured(arm: str, depth: int, ci: tuple[float, float, float], kind: str = "mtp") -> DecodeRow:
    m, lo, hi = ci
    return _row(arm, depth, kind, tok_s=30.0 * m, vs_plain=m, vs_plain_low=lo, vs_plain_high=hi)


def test_speculation_rejected_when_every_setting_is_rejected_by_bound():
    rows = [_row("stock", 0), _rejected("stock", 1, 0.05), _rejected("stock", 2, 0.08)]
    rows += [_rejected("stock", 1, 0.05, "draft-model")]
    verdict = tune_verdict(rows)
    assert verdict.startswith("stock @ 1024: speculation rejected, every setting by bound")
    assert "mtp d1, mtp d2, draft-model d1 rejected by bound (at most 0.08×)" in verdict
    assert "28.9 tok/s plain" in verdict


def test_rejected_by_bound_and_measured_slower_is_rejected_and_a_win_still_wins():
    slower = [_row("stock", 0), _rejected("stock", 1, 0.05), _measured("stock", 3, (0.5, 0.4, 0.6))]
    assert "stock @ 1024: speculation rejected, best mtp d3 0.50×" in tune_verdict(slower)
    unsure = [_row("stock", 0), _rejected("stock", 1, 0.05), _measured("stock", 3, (0.9, 0.8, 1.1))]
    assert "no significant winner" in tune_verdict(unsure)
    won = [
        _row("patched", 0),
        _rejected("patched", 1, 0.9),
        _measured("patched", 2, (1.3, 1.2, 1.4)),
    ]
    said = tune_verdict(won)
    assert "patched @ 1024: mtp depth 2 wins 1.30×" in said and "mtp d1 rejected by bound" in said


def test_a_decode_phase_names_its_rejected_setting():
    rows = [_row("stock", 0), _rejected("stock", 2, 0.07), _row("patched", 0)]
    assert (
        decode_verdict(rows) == "stock @ 1024 mtp depth 2: rejected by bound (at most 0.07× plain)"
    )


def test_a_setting_whose_bound_does_not_reject_is_not_counted():
    row = _rejected("stock", 1, 1.4)  # not measured, but its bound leaves room: not a rejection
    verdict = tune_verdict([_row("stock", 0), row])
    assert "rejected" not in verdict and "no usable speculative result" in verdict
    assert Setting("mtp", 1).label == "mtp d1"
