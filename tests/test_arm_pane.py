"""The arm panes say what they cannot know: a source tree's gate that mlatui cannot count shows
"not counted", never zero calls."""

from __future__ import annotations

import msgspec

from mlatui.stream.run_settings import ArmSlot, RunSettings
from mlatui.views.dashboard_state import DashboardState
from mlatui.widgets.arm import gate_line
from tests.ui_events import header


def _state(arms: dict[str, ArmSlot]) -> DashboardState:
    state = DashboardState()
    state.apply(msgspec.structs.replace(header(), settings=RunSettings(arms=arms)))
    return state


def test_an_uncounted_source_arm_says_not_counted():
    state = _state(
        {
            "stock": ArmSlot(gate="installed", label="mlx-lm"),
            "patched": ArmSlot(gate="installed", counters="no counters"),
        }
    )
    assert "not counted" in gate_line(state, "patched", False).plain
    counted = gate_line(state, "stock", False).plain
    assert "absorbed 0 · materialised 0" in counted and "not counted" not in counted
