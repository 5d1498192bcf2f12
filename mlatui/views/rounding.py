"""Numbers rounded to what their 95% CI supports (pure Python).

A median is printed to the decimal of the second significant digit of its CI's half-width, so
`49.299604599999995 [48.54, 51.83]` becomes `49.3 [48.5, 51.8]`; without a CI (or a zero-width
one, a single round) three significant digits are kept.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from mlatui.stream.interval import Interval

MAX_DECIMALS = 6


def _sig_decimals(x: float, digits: int) -> int:
    if x == 0 or not math.isfinite(x):
        return 0
    return max(0, min(MAX_DECIMALS, digits - 1 - math.floor(math.log10(abs(x)))))


@dataclass(frozen=True)
class Ci:
    """A median with its 95% CI (`low`/`high` None when the recording has none)."""

    median: float
    low: float | None = None
    high: float | None = None

    @classmethod
    def of(cls, interval: Interval) -> Ci:
        """An event's interval (its median alone when the recording kept no interval)."""
        if not interval.known:
            return cls(interval.median)
        return cls(interval.median, interval.low, interval.high)

    @property
    def bounds(self) -> tuple[float, float] | None:
        """(low, high) when there is a CI of positive width."""
        if self.low is None or self.high is None or not self.high > self.low:
            return None
        return self.low, self.high

    @property
    def has_ci(self) -> bool:
        return self.bounds is not None

    @property
    def decimals(self) -> int:
        if (b := self.bounds) is not None:
            return _sig_decimals((b[1] - b[0]) / 2, 2)
        return _sig_decimals(self.median, 3)

    def fmt(self, x: float | None) -> str:
        return "" if x is None else f"{x:.{self.decimals}f}"

    def text(self, unit: str = "") -> str:
        """`49.3 [48.5, 51.8]` (`unit` after the median: `1.60× [1.24, 1.74]`)."""
        out = self.fmt(self.median) + unit
        return out + (f" [{self.fmt(self.low)}, {self.fmt(self.high)}]" if self.has_ci else "")

    def cells(self) -> tuple[str, str, str]:
        """(median, low, high) as rounded strings for a CSV ('' where there is no CI)."""
        if not self.has_ci:
            return self.fmt(self.median), "", ""
        return self.fmt(self.median), self.fmt(self.low), self.fmt(self.high)

    def disjoint(self, other: Ci) -> bool:
        """The two CIs do not overlap (False when either has none)."""
        mine, theirs = self.bounds, other.bounds
        if mine is None or theirs is None:
            return False
        return mine[1] < theirs[0] or theirs[1] < mine[0]


def ci_text(ci: Ci | None, unit: str = "") -> str:
    return "–" if ci is None else ci.text(unit)


def sig(x: float | None, digits: int = 3) -> str:
    """`x` to `digits` significant digits (no CI to go by)."""
    return "–" if x is None else f"{x:.{_sig_decimals(x, digits)}f}"


def fmt_context(tokens: int) -> str:
    """A context length as every view labels it: 4096 -> 4K, 300 -> 300."""
    return f"{tokens // 1024}K" if tokens >= 1024 and tokens % 1024 == 0 else str(tokens)


def ends(interval: Interval | None) -> tuple[float | None, float | None, float | None]:
    """(median, low, high) of an event's interval; None for what it does not have."""
    if interval is None:
        return None, None, None
    if not interval.known:
        return interval.median, None, None
    return interval.median, interval.low, interval.high
