"""Axis arithmetic for the character plots: 1-2-5 log ticks, compact labels, even thinning.

Pure functions of plain numbers; the plots in widgets.figure and widgets.stepchart use them.
"""

from __future__ import annotations

import math

MANTISSAS = (1, 2, 5)


def fmt_tick(value: float) -> str:
    """1-2-5 values compactly: 0.05, 0.5, 5, 50, 500, 5k, 50k, 500k, 5M."""
    if value <= 0:
        return "0"
    for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if value >= scale:
            return f"{value / scale:g}{suffix}"
    return f"{value:.6g}"


def ticks_125(low: float, high: float) -> list[float]:
    """Every 1-2-5 value from the largest one <= low to the smallest one >= high (low, high > 0),
    so the ticks always bracket the data (at least two ticks)."""
    if low <= 0 or high <= 0:
        raise ValueError("a log axis needs positive bounds")
    low, high = min(low, high), max(low, high)
    out: list[float] = []
    exp = math.floor(math.log10(low)) - 1
    while True:
        for m in MANTISSAS:
            v = float(f"{m}e{exp}")
            if v <= low * (1 + 1e-9):
                out = [v]
            elif not out:
                continue
            else:
                out.append(v)
                if v >= high * (1 - 1e-9):
                    return out
        exp += 1


def thin_evenly(ticks: list[float], rows: list[int], min_gap: int = 2) -> list[float]:
    """Keep every k-th tick (k = 1, 2 (1, 5, 20, 100 ...), then whole decades: 3, 6, 9, ...) for
    the smallest k whose kept ticks lie at least `min_gap` rows apart; decades anchor them."""
    if len(ticks) <= 1:
        return list(ticks)
    decades = [i for i, v in enumerate(ticks) if _mantissa(v) == 1] or [0]
    for k in (1, 2, *range(3, 3 * len(ticks) + 1, 3)):
        start = decades[0] % k if k > 1 else 0
        keep = list(range(start, len(ticks), k))
        kept_rows = [rows[i] for i in keep]
        if all(abs(a - b) >= min_gap for a, b in zip(kept_rows, kept_rows[1:], strict=False)):
            return [ticks[i] for i in keep]
    return [ticks[decades[0]]]


def _mantissa(v: float) -> int:
    return round(v / 10 ** math.floor(math.log10(v) + 1e-9))


def log_position(value: float, low: float, high: float, cells: int) -> int:
    """The cell (0 .. cells-1) of `value` on a log axis from low to high."""
    if cells <= 1 or high <= low:
        return 0
    value = min(max(value, low), high)
    f = (math.log(value) - math.log(low)) / (math.log(high) - math.log(low))
    return round(f * (cells - 1))


def nice_ceiling(value: float) -> float:
    """The next value >= `value` with two significant digits (a linear axis' top: 272 -> 280)."""
    if value <= 0:
        return 1.0
    exp = math.floor(math.log10(value)) - 1
    step = 10.0**exp
    return math.ceil(value / step - 1e-9) * step


def spread_labels(positions: list[int], labels: list[str], width: int) -> list[int]:
    """Indices of the labels to print, centred on their positions, without overlap: every one,
    else every 2nd, 3rd, ... (evenly), always starting from the first."""
    n = len(labels)
    for k in range(1, n + 1):
        keep = list(range(0, n, k))
        if _fits([positions[i] for i in keep], [labels[i] for i in keep], width):
            return keep
    return [0] if n else []


def label_start(position: int, label: str, width: int) -> int:
    """Where a label centred on `position` starts, kept inside 0 .. width."""
    return max(0, min(width - len(label), position - (len(label) - 1) // 2))


def _fits(positions: list[int], labels: list[str], width: int) -> bool:
    end = -1
    for p, s in zip(positions, labels, strict=True):
        start = label_start(p, s, width)
        if start <= end or start + len(s) > width:
            return False
        end = start + len(s)
    return True
