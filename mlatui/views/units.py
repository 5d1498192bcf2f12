"""One formatter per unit, for every surface (verdict, panes, key figure, tables, exports,
`replay --dump`, `compare`): the same quantity prints the same string wherever it is shown.

- a ratio with its 95% CI: `1.153× [1.097, 1.206]` (rounded to what the CI supports,
  mlatui.views.rounding); a ratio without a CI is not printed, except a bound (`≤ 0.69×`);
- a median shown without its CI (tok/s beside its speedup): as its CI rounds it, the `263` of
  `263 [244, 282]` (three significant digits where there is no CI);
- milliseconds: three significant digits (`8.43`, `10.8`, `264`);
- a share without its CI: two significant digits, `7.9%`;
- bytes: `2.8 GB`.
"""

from __future__ import annotations

from mlatui.stream.interval import Interval
from mlatui.views.rounding import Ci, sig

RATIO = "×"


def _ci(x: Ci | Interval) -> Ci:
    return Ci.of(x) if isinstance(x, Interval) else x


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
