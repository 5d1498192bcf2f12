"""The run's MBU from the dashboard's fold: whether the measured memory limit holds against what
the run's own steps read (a step above it was served from cache), and an arm pane's MBU line
(pure Python)."""

from __future__ import annotations

from mlatui.measure.bandwidth import LimitCheck
from mlatui.views.bandwidth_text import above_limit, mbu_text
from mlatui.views.dashboard_state import DashboardState
from mlatui.views.rounding import fmt_context
from mlatui.views.units import percent_text


def limit_check(state: DashboardState) -> LimitCheck | None:
    """The header's measured read limit against the most any step of the run read (the largest
    median GB/s of every estimate so far); None without a limit or without a rate."""
    bandwidth = state.header.device.bandwidth if state.header is not None else None
    limit = bandwidth.measured_read_gb_s if bandwidth else None
    rates = [
        float(r.median) for e in state.estimates.values() for r in e.rows if r.quantity == "gb_s"
    ]
    if not limit or not rates:
        return None
    return LimitCheck(float(limit), max(rates))


def mbu_line(state: DashboardState, arm: str, narrow: bool) -> str | None:
    """An arm pane's MBU at the latest sweep context, per width (`mbu`; `..` the most where the
    routing range makes it differ): `MBU @32K L=1 5.2% [4.9, 5.4] · L=2 4.1% .. 6.0%`; `MBU: a
    step read … served from cache?` where a step of the run read faster than the measured memory
    limit; None before a sweep estimate that carries it."""
    context = state.context
    if context is None:
        return None
    parts = []
    for width in sorted({w for (a, c, w) in state.sweep_ms if (a, c) == (arm, context)}):
        row = state.estimate("mbu", arm, context, width)
        if row is None:
            continue
        mbu = row.interval
        most = state.estimate("mbu_most", arm, context, width)
        text = percent_text(mbu.median * 100) if narrow else mbu_text(mbu)
        if most is not None and most.median > row.median * 1.001:
            text += f" .. {percent_text(most.median * 100)}"
        parts.append(f"L={width} {text}")
    if not parts:
        return None
    check = limit_check(state)
    if check is not None and check.contradicted:
        return "MBU: " + above_limit(check, narrow)
    return f"MBU @{fmt_context(context)} " + " · ".join(parts)
