"""An arm pane's MBU line, from the dashboard's fold (pure Python)."""

from __future__ import annotations

from mlatui.stream.interval import Interval
from mlatui.views.bandwidth_text import mbu_text
from mlatui.views.dashboard_state import DashboardState
from mlatui.views.rounding import fmt_context, sig


def mbu_line(state: DashboardState, arm: str, narrow: bool) -> str | None:
    """An arm pane's MBU at the latest sweep context, per width (`mbu`; `..` the most where the
    routing range makes it differ): `MBU @32K L=1 5.2% [4.9, 5.4] · L=2 4.1% .. 6.0%`; None
    before a sweep estimate that carries it."""
    context = state.context
    if context is None:
        return None
    parts = []
    for width in sorted({w for (a, c, w) in state.sweep_ms if (a, c) == (arm, context)}):
        row = state.estimate("mbu", arm, context, width)
        if row is None:
            continue
        mbu = Interval(row["median"], row["low"], row["high"], row["n"])
        most = state.estimate("mbu_most", arm, context, width)
        text = f"{sig(mbu.median * 100, 2)}%" if narrow else mbu_text(mbu)
        if most is not None and most["median"] > row["median"] * 1.001:
            text += f" .. {sig(most['median'] * 100, 2)}%"
        parts.append(f"L={width} {text}")
    if not parts:
        return None
    return f"MBU @{fmt_context(context)} " + " · ".join(parts)
