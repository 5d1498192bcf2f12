"""The forced-branch benchmark's reading of a paired ratio absorbed/materialised: which branch
was faster at a width, the largest width the absorbed one won, and an interval as its records
keep it. Shared by the benchmark that writes the records and the printer that reads them back."""

from __future__ import annotations

from collections.abc import Mapping

from mlatui.stream.interval import Interval

BRANCHES = ("absorbed", "materialised")  # the sampler's arms; the ratio is absorbed/materialised
ABSORBED_FASTER = "absorbed faster"
MATERIALISED_FASTER = "materialised faster"
TIE = "tie (within noise)"


def verdict(ratio: Interval) -> str:
    """From the paired ratio absorbed/materialised and its 95% CI."""
    if ratio.n and ratio.high < 1:
        return ABSORBED_FASTER
    if ratio.n and ratio.low > 1:
        return MATERIALISED_FASTER
    return TIE


def within_noise(ratio: Interval) -> bool:
    """The ratio's CI straddles 1: the probe was decided by its median alone."""
    return ratio.low <= 1 <= ratio.high


def crossover(ratios: Mapping[int, Interval]) -> int | None:
    """Largest width where the absorbed branch was significantly faster (None if it never was)."""
    wins = [w for w, r in ratios.items() if verdict(r) == ABSORBED_FASTER]
    return max(wins) if wins else None


def interval_dict(iv: Interval) -> dict[str, float | int]:
    return {"median": iv.median, "low": iv.low, "high": iv.high, "rounds": iv.n}


def interval_of(d: Mapping[str, float | int]) -> Interval:
    """An interval as `interval_dict` wrote it."""
    return Interval(float(d["median"]), float(d["low"]), float(d["high"]), int(d["rounds"]))
