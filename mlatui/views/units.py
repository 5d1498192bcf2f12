"""One formatter per unit, for every surface (verdict, panes, key figure, tables, exports,
`replay --dump`, `compare`): the same quantity prints the same string wherever it is shown.
Pure Python.

A median is printed to the decimal of the second significant digit of its CI's half-width, so
`49.299604599999995 [48.54, 51.83]` becomes `49.3 [48.5, 51.8]`; without a CI (or a zero-width
one, a single round) three significant digits are kept.

- a ratio with its 95% CI: `1.153× [1.097, 1.206]`; a ratio without a CI is not printed, except
  a bound (`≤ 0.69×`);
- a median shown without its CI (tok/s beside its speedup): as its CI rounds it, the `263` of
  `263 [244, 282]` (three significant digits where there is no CI);
- milliseconds: three significant digits (`8.43`, `10.8`, `264`);
- a share without its CI: two significant digits, `7.9%`;
- bytes: `2.8 GB`;
- bandwidth: effective GB/s and MBU with their CIs, and the device's limit (measured by the
  probe, published by the vendor).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from mlatui.measure.bandwidth import LimitCheck
from mlatui.stream.event_base import Interval
from mlatui.stream.run_settings import BandwidthLimit

MAX_DECIMALS = 6
RATIO = "×"


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

    def scaled(self, factor: float) -> Ci:
        """The same figure in another unit (a fraction as a percentage: `scaled(100)`)."""
        low, high = (None if x is None else x * factor for x in (self.low, self.high))
        return Ci(self.median * factor, low, high)

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


def _ci(x: Ci | Interval) -> Ci:
    return Ci.of(x) if isinstance(x, Interval) else x


def sig(x: float | None, digits: int = 3) -> str:
    """`x` to `digits` significant digits (no CI to go by)."""
    return "–" if x is None else f"{x:.{_sig_decimals(x, digits)}f}"


def fmt_context(tokens: int) -> str:
    """A context length as every view labels it: 4096 -> 4K, 300 -> 300."""
    return f"{tokens // 1024}K" if tokens >= 1024 and tokens % 1024 == 0 else str(tokens)


def ci_text(x: Ci | Interval | None, unit: str = "") -> str:
    """`49.3 [48.5, 51.8]`: a median and its 95% CI, rounded to what the CI supports."""
    return "–" if x is None else _ci(x).text(unit)


def ratio_text(x: Ci | Interval | None) -> str:
    """`1.153× [1.097, 1.206]`."""
    return ci_text(x, RATIO)


def median_text(x: Ci | Interval | float | None) -> str:
    """`263`: the median of `263 [244, 282]`, to the decimals its CI supports (a bare number,
    or a median without a CI: three significant digits)."""
    if x is None:
        return "–"
    ci = Ci(float(x)) if isinstance(x, int | float) else _ci(x)
    return ci.fmt(ci.median)


def percent_text(percent: float | None) -> str:
    """`7.9%`: a share's median alone, two significant digits (an MBU beside its point in the
    key figure, in a narrow arm pane, the most bytes' `.. 7.6%`)."""
    return "–" if percent is None else f"{sig(percent, 2)}%"


def bound_ratio(value: float) -> str:
    """A ratio's upper bound (no CI: a bound, not an estimate): `≤ 0.69×`."""
    return f"≤ {value:.2f}{RATIO}"


def ms_text(ms: float | None) -> str:
    """`8.43`, `10.8`, `264`: three significant digits (a figure without its CI)."""
    return sig(ms)


def bytes_text(n: float | None) -> str:
    """`2.8 GB`, `512.0 MB`, `12 B`."""
    if n is None:
        return "–"
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(n) >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n:.0f} B"


# -- bandwidth --------------------------------------------------------------------------------


def gb_s_text(rate: Interval | None) -> str:
    """`41.2 [39.8, 42.0]` GB/s (no unit: the column says it)."""
    return ci_text(rate)


def mbu_text(mbu: Interval | None) -> str:
    """A utilisation fraction as a percentage, `5.2% [4.9, 5.4]`."""
    return "–" if mbu is None else Ci.of(mbu.scaled(100)).text("%")


def mb_text(nbytes: int) -> str:
    return sig(nbytes / 1e6, 3)


def limit_text(bandwidth: BandwidthLimit | None) -> str:
    """`measured 2.09 GB/s read, 0.93 GB/s copy; published 3350 GB/s (NVIDIA H100 SXM)`."""
    if bandwidth is None:
        return "limit unknown"
    out = (
        f"measured {sig(bandwidth.measured_read_gb_s)} GB/s read, "
        f"{sig(bandwidth.measured_copy_gb_s)} GB/s copy"
    )
    if bandwidth.published_gb_s:
        out += f"; published {sig(bandwidth.published_gb_s, 4)} GB/s ({bandwidth.published_name})"
    return out


def limit_short(bandwidth: BandwidthLimit | None) -> str:
    """The header's short form: `mem 2.09 GB/s meas.` (`/ 3350 pub.` where known)."""
    if bandwidth is None:
        return ""
    out = f"mem {sig(bandwidth.measured_read_gb_s)} GB/s meas."
    if bandwidth.published_gb_s:
        out += f" / {sig(bandwidth.published_gb_s, 4)} pub."
    return out


def above_limit(check: LimitCheck, narrow: bool = False, said: str = "measured") -> str:
    """MBU where a step read faster than memory bandwidth: `a step read 3.91 GB/s > 1.81 GB/s
    measured: served from cache?` (narrow: `from cache? (read 3.91 > 1.81 GB/s)`)."""
    reached, limit = sig(check.reached_gb_s, 3), sig(check.limit_gb_s, 3)
    if narrow:
        return f"from cache? (read {reached} > {limit} GB/s)"
    return f"a step read {reached} GB/s > {limit} GB/s {said}: served from cache?"


def most_suffix(mbu: float, most: float | None) -> str:
    """` .. 7.6%`: the most bytes' MBU median where the routing range makes it differ from the
    fewest bytes' (`mbu`, both fractions); "" where it does not."""
    return f" .. {percent_text(most * 100)}" if most is not None and most > mbu * 1.001 else ""


def mbu_cell(mbu: Ci | None, most: Ci | None, rate: Ci | None = None) -> str:
    """A sweep row's MBU: `5.2% [4.9, 5.4]`, with `.. 7.6%` (the most bytes' median) where the
    routing range makes the two differ, and the effective rate's median: `· 174 GB/s`; a rate
    without an MBU (no limit, or one the run contradicted): `limit unknown · 174 GB/s`."""
    if mbu is None:
        return "–" if rate is None else f"limit unknown · {sig(rate.median, 3)} GB/s"
    text = mbu.scaled(100).text("%") + most_suffix(
        mbu.median, None if most is None else most.median
    )
    return text + (f" · {sig(rate.median, 3)} GB/s" if rate is not None else "")
