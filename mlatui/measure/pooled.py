"""The L = 1 check pooled over a run's contexts, and how it may decide a context. Pure Python.

At L = 1 both arms take the same branch at every context (the patch changes only the L >= 2
gates), so "the patched arm's L = 1 step costs the same as stock's" is one hypothesis for the
whole run and every context's L = 1 quads are evidence for it. The pooled check is the
per-context check's estimator (median over A B B A quads of the quad-sum ratio stock/patched)
over all of them, with a percentile bootstrap stratified by context: each resample draws, within
every context, as many whole rounds as that context has (rounds share a device regime; contexts
differ in level and in how many rounds they got, so none may crowd out another). Same three
outcomes, same tolerance (`control_outcome`).

It is used conservatively (`decide`): a context valid or invalid on its own stays so; an
inconclusive one becomes valid (basis pooled) only when the pooled check is valid AND its own CI
contains 1.00, so a context showing a difference of its own is never waved through.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from mlatui.measure.estimates import (
    BOOTSTRAP_RESAMPLES,
    CONFIDENCE,
    ESTIMATORS,
    Interval,
    Outcome,
    Timing,
    control_outcome,
    quad_ratios_by_round,
)
from mlatui.stream.events import Basis

POOLED_ESTIMATOR = ESTIMATORS["ratio"] + ", over the L = 1 quads of every context together"
POOLED_CI_METHOD = (
    f"{CONFIDENCE:.0%} percentile bootstrap stratified by context (within each context its "
    f"rounds resampled whole, as many as it has), {BOOTSTRAP_RESAMPLES} resamples, seeded"
)
MIN_CONTEXTS = 2  # one context alone is its own check


@dataclass(frozen=True)
class PooledCheck:
    ratio: Interval  # n: quads over every context
    outcome: Outcome
    contexts: tuple[int, ...]
    rounds: int  # summed over the contexts
    tolerance_pct: float


def stratified_bootstrap_median(
    strata: Sequence[Sequence[Sequence[float]]],
    seed: int,
    resamples: int = BOOTSTRAP_RESAMPLES,
) -> Interval:
    """Median of every value of every block of every stratum, with a percentile bootstrap that
    resamples blocks (rounds) with replacement within each stratum (context), keeping each
    stratum's size. `n` is the number of values."""
    clean = [
        [blk for blk in ([v for v in b if math.isfinite(v)] for b in s) if blk] for s in strata
    ]
    clean = [s for s in clean if s]
    xs = [v for s in clean for b in s for v in b]
    if not xs:
        return Interval(math.nan, math.nan, math.nan, 0)
    med = statistics.median(xs)
    if all(len(s) == 1 for s in clean):  # one round per context: nothing to resample
        return Interval(med, med, med, len(xs))
    rng = random.Random(seed)
    draws = sorted(
        statistics.median([v for s in clean for b in rng.choices(s, k=len(s)) for v in b])
        for _ in range(resamples)
    )
    tail = (1 - CONFIDENCE) / 2
    lo = draws[int(math.floor(tail * (len(draws) - 1)))]
    hi = draws[int(math.ceil((1 - tail) * (len(draws) - 1)))]
    return Interval(med, lo, hi, len(xs))


def pooled_check(
    by_context: Mapping[int, Sequence[Timing]],
    arms: Sequence[str],
    control_width: int,
    seed: int,
    tolerance_pct: float,
    resamples: int = BOOTSTRAP_RESAMPLES,
) -> PooledCheck | None:
    """The pooled L = 1 check from each context's control timings (rounds numbered within a
    context; a context's several sampler runs renumbered apart). None below MIN_CONTEXTS
    contexts with complete quads."""
    strata = {
        c: rounds
        for c, ts in sorted(by_context.items())
        if (rounds := quad_ratios_by_round(ts, arms, control_width))
    }
    if len(strata) < MIN_CONTEXTS:
        return None
    ratio = stratified_bootstrap_median(list(strata.values()), seed, resamples)
    return PooledCheck(
        ratio,
        control_outcome(ratio, tolerance_pct),
        tuple(strata),
        sum(len(r) for r in strata.values()),
        tolerance_pct,
    )


def decide(
    own: Outcome, own_low: float | None, own_high: float | None, pooled: Outcome | None
) -> tuple[Outcome, Basis]:
    """A context's check after the pooled one: only an inconclusive context whose own CI
    contains 1.00 can become valid (pooled), and only when the pooled check is valid."""
    if own is not Outcome.INCONCLUSIVE or pooled is not Outcome.VALID:
        return own, Basis.OWN
    if own_low is None or own_high is None or not own_low <= 1.0 <= own_high:
        return own, Basis.OWN
    return Outcome.VALID, Basis.POOLED
