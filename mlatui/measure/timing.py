"""Timing discipline shared by every benchmark: sync points, interleaving, robust statistics."""

from __future__ import annotations

import contextlib
import gc
import math
import os
import statistics
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

L1_TOLERANCE_PCT = 2.0

_gc_lock = threading.Lock()
_gc_paused_depth = 0
_gc_was_enabled = False


def timed_gc_paused() -> bool:
    """Whether timed calls run with Python's cyclic collector paused: yes unless
    MLATUI_TIMED_GC=keep (a diagnostic). A collection that lands inside one arm's timed step
    costs that sample milliseconds the other arm's neighbour does not pay; paused, collections
    happen between samples (in the untimed settle steps and hand-overs) instead."""
    return os.environ.get("MLATUI_TIMED_GC", "pause").strip().lower() != "keep"


@contextlib.contextmanager
def gc_paused(enabled: bool = True) -> Iterator[None]:
    """Cyclic garbage collection off for the block, then back as it was. Nestable and safe
    across threads (the collector is process-wide: the outermost block restores it)."""
    global _gc_paused_depth, _gc_was_enabled
    if not enabled:
        yield
        return
    with _gc_lock:
        if _gc_paused_depth == 0:
            _gc_was_enabled = gc.isenabled()
            gc.disable()
        _gc_paused_depth += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_paused_depth -= 1
            if _gc_paused_depth == 0 and _gc_was_enabled:
                gc.enable()


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
