"""The L = 1 table's figures are step times: a tune with no draft decides its check on plain
blocks, and its row shows their time per token, marked and said, never a block time beside the
sweep's step times."""

from __future__ import annotations

from mlatui.stream.events import DecodeResult, Interval, PhaseStart, Validity
from mlatui.views.dashboard_state import DashboardState
from mlatui.widgets.validity_pane import validity_text
from tests.summaries import csv as summary_csv
from tests.summaries import markdown as summary_markdown
from tests.ui_events import header


def _state(depths: tuple[int, ...]) -> DashboardState:
    state = DashboardState()
    state.apply(header())
    state.apply(PhaseStart(0.1, "sweep", "sweep", 0, 2, 8, (2048,)))
    state.apply(Validity(1.0, "sweep", 2048, 4.03, 4.05, -0.5, 2.0, True, "valid"))
    state.apply(PhaseStart(1.1, "tune", "tune", 1, 2, 8, (2048,)))
    for arm in ("stock", "patched"):
        for depth in depths:
            state.apply(
                DecodeResult(
                    t=2.0,
                    phase="tune",
                    arm=arm,
                    context=2048,
                    depth=depth,
                    tokens=96,
                    seconds=0.4,
                    tok_s=Interval(240.0, 230.0, 250.0, 8),
                    block_tokens=12,
                )
            )
    state.apply(Validity(3.0, "tune", 2048, 46.7, 46.9, -0.4, 2.0, True, "valid"))
    return state


def test_a_check_on_plain_blocks_shows_its_time_per_token():
    state = _state((0,))
    screen = validity_text(state, 100).plain
    row = next(line for line in screen.splitlines() if line.startswith("tune*"))
    assert "3.89" in row and "46.7" not in screen  # 46.7 / 12
    assert "per token of 12-token plain-decode blocks" in screen
    md = summary_markdown(state)
    assert "3.89 *" in md and "per token of 12-token plain-decode blocks" in md
    assert "token_ms" in summary_csv(state)


def test_a_check_on_verify_steps_keeps_its_step_times():
    state = _state((0, 1))
    screen = validity_text(state, 100).plain
    assert "46.7" in screen and "per token" not in screen and "token_ms" not in summary_csv(state)
