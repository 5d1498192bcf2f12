"""Axis arithmetic for the character plots: compact tick labels and a linear axis' top. Pure
functions of plain numbers (the log axes' ticks are widgets.plot's)."""

from __future__ import annotations

import math


def fmt_tick(value: float) -> str:
    """Tick values compactly: 0.05, 0.5, 5, 50, 500, 5k, 50k, 500k, 5M."""
    if value <= 0:
        return "0"
    for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if value >= scale:
            return f"{value / scale:g}{suffix}"
    return f"{value:.6g}"


def nice_ceiling(value: float) -> float:
    """The next value >= `value` with two significant digits (a linear axis' top: 272 -> 280)."""
    if value <= 0:
        return 1.0
    exp = math.floor(math.log10(value)) - 1
    step = 10.0**exp
    return math.ceil(value / step - 1e-9) * step
