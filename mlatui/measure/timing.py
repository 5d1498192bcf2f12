"""Timing discipline shared by every benchmark: sync points, interleaving, robust statistics."""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

L1_TOLERANCE_PCT = 2.0


def timed_ms(step: Callable[[], object], sync: Callable[[object], None]) -> float:
    """Run `step` and `sync` its result; the wall time between the two sync points, in ms.
    The caller must have synced everything `step` depends on before calling."""
    start = time.perf_counter_ns()
    sync(step())
    return (time.perf_counter_ns() - start) / 1e6


def percentile(samples: Sequence[float], q: float) -> float:
    xs = sorted(samples)
    if not xs:
        return math.nan
    k = (len(xs) - 1) * q / 100
    lo, hi = math.floor(k), math.ceil(k)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


@dataclass(frozen=True)
class Stats:
    n: int
    median: float
    p10: float
    p90: float
    p95: float
    min: float
    max: float
    mad: float

    @classmethod
    def of(cls, samples: Sequence[float]) -> Stats:
        if not samples:
            nan = math.nan
            return cls(0, nan, nan, nan, nan, nan, nan, nan)
        med = statistics.median(samples)
        return cls(
            len(samples),
            med,
            percentile(samples, 10),
            percentile(samples, 90),
            percentile(samples, 95),
            min(samples),
            max(samples),
            statistics.median(abs(x - med) for x in samples),
        )


def l1_check(
    stock_ms: Sequence[float], patched_ms: Sequence[float], tolerance_pct: float = L1_TOLERANCE_PCT
) -> tuple[float, float, float, bool]:
    """Both arms take the identical branch at L = 1, so their medians must agree.
    Returns (stock median, patched median, |diff| % of the smaller, valid)."""
    s, p = statistics.median(stock_ms), statistics.median(patched_ms)
    diff = abs(s - p) / min(s, p) * 100 if min(s, p) > 0 else math.inf
    return s, p, diff, diff <= tolerance_pct
