"""The verdict strip: one line for the header, `replay --dump` and the exported markdown."""

from __future__ import annotations

import ui_events

from mlatui.stream.events import DecodeResult, PhaseStart, Validity
from mlatui.views.dashboard_state import DashboardState
from mlatui.views.report import summary_markdown
from mlatui.views.verdict_strip import Tone, verdict_line, verdict_parts


def _result(arm, depth, vs, lo, hi, context=2048, warnings=()):
    return DecodeResult(
        1.0,
        "tune",
        arm,
        context,
        depth,
        64,
        1.0,
        50.0 * vs,
        (),
        20.0,
        None,
        45.0,
        55.0,
        vs,
        lo,
        hi,
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
    assert "patched spec wins ×1.65 [1.52-1.79] (d2 @ 2K)" in line
    assert "stock spec rejected (slower at 2K)" in line
    assert "L=1 ✓ 1/1" in line
    tones = {p.text.split(" ")[0]: p.tone for p in verdict_parts(s)}
    assert tones["patched"] is Tone.GOOD and tones["stock"] is Tone.BAD


def test_a_warned_result_and_an_unsure_context_never_make_the_verdict():
    flagged = _result("patched", 3, 3.1, 2.9, 3.3, warnings=["barely speculated: 4% of 256"])
    s, _ = _tune(extra=[flagged])
    assert "×3.10" not in verdict_line(s) and "×1.65" in verdict_line(s)
    s, _ = _tune(valid=False)
    line = verdict_line(s)
    assert line.startswith("tune: no verdict (L=1 check not valid at 2K)") and "wins" not in line
    assert "L=1 ✓ 0/1 ? 1" in line


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
    assert "patched ×1.65 (d2 @ 2K)" in verdict_line(s, 60)
    md = summary_markdown(events)
    assert f"**Verdict:** {verdict_line(s)}" in md
