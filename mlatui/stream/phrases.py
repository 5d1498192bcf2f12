"""Every confidence-interval text and every L = 1 check word, in one place, so a log line, a
table cell, a stderr note and the dashboard say the same thing the same way. Plain strings from
events' plain values; the engine's log lines and every printer import it (it sits below both).
Nothing here imports mlx or textual.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from mlatui.stream.event_base import Interval


def ci_text(
    median: float | None,
    low: float | None,
    high: float | None,
    digits: int = 2,
    unit: str = "",
) -> str:
    """`median[unit] [low, high]` at fixed digits; the median alone where an end is missing;
    "-" without a (finite) median."""
    if median is None or not math.isfinite(median):
        return "-"
    text = f"{median:.{digits}f}{unit}"
    if low is None or high is None:
        return text
    return f"{text} [{low:.{digits}f}, {high:.{digits}f}]"


def interval_text(interval: Interval | None, digits: int = 3, unit: str = "") -> str:
    """An event's interval as `ci_text` writes it (its median alone when no interval was kept)."""
    if interval is None:
        return "-"
    if not interval.known:
        return ci_text(interval.median, None, None, digits, unit)
    return ci_text(interval.median, interval.low, interval.high, digits, unit)


def pct_ends(interval: Interval, digits: int = 1) -> str:
    """A ratio's interval as signed percentages off 1: `[-2.3, +2.6]`."""
    low, high = (interval.low - 1) * 100, (interval.high - 1) * 100
    return f"[{low:+.{digits}f}, {high:+.{digits}f}]"


# -- the L = 1 check ------------------------------------------------------------------------

CHECK_MARKS = {
    "valid": "✓",
    "valid (pooled)": "✓p",
    "invalid": "✗",
    "inconclusive": "?",
    "pending": "…",
}
TOLERANCE_RULE = "95% CI must lie inside ±{tolerance:g}%"


def check_mark(verdict: str, pooled: bool = False) -> str:
    """✓ valid, ✓p valid by the pooled check, ✗ invalid, ? inconclusive, … pending."""
    if verdict == "valid" and pooled:
        return CHECK_MARKS["valid (pooled)"]
    return CHECK_MARKS.get(verdict, CHECK_MARKS["invalid"])


def check_word(verdict: str) -> str:
    """The outcome as a table cell: `valid` plain, anything else shouted."""
    return verdict if verdict == "valid" else verdict.upper()


def check_not_passed(where: Iterable[str], tolerance_pct: float = 2.0) -> str:
    """The one line a headless run ends with when some L = 1 check did not pass."""
    return (
        f"L=1 check not passed (the paired L=1 ratio's 95% CI is not inside ±{tolerance_pct:g}%): "
        + ", ".join(where)
        + "; those contexts are left out of every verdict"
    )


def left_out_of_verdicts(contexts: Iterable[int]) -> str:
    return (
        f"left out of verdicts (L=1 check invalid or inconclusive): {', '.join(map(str, contexts))}"
    )
