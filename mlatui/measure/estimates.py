"""Paired estimates with confidence intervals, from the sampler's rounds.

Every figure is a median over rounds of a per-round quantity, with a seeded 95% percentile
bootstrap interval over rounds, so a replay of a recording reproduces it exactly:

- step ms of an arm at a width: the mean of that arm's samples at that width in the round;
- stock/patched at a width: per A B B A quad, the sum of its stock samples over the sum of its
  patched samples (a linear drift within the quad cancels); the median is over all quads of the
  width, so the L = 1 control's several quads per round each count. On the H200 the device
  switches clock regimes (~20 -> ~38 ms at L = 1) within a fraction of a second, inside rounds:
  a quad that straddles a switch is an outlier the median ignores, where a per-round sum
  absorbed it;
- marginal cost of an arm: its round mean at L = 2 minus its round mean at L = 1.

Medians of blocks measured at different times are never compared.

The bootstrap's resampled medians, drawn in arrays: the same numbers, in the same order, as
`random.Random(seed).choices` followed by `statistics.median` per resample (a replay of a recording
reproduces every interval to the bit), about fifty times faster than the loop in Python.

`random.Random` and numpy's legacy `RandomState` are the same Mersenne Twister and build a double
from two 32-bit words the same way, so the Python generator's state, copied into a RandomState,
gives the same uniforms; `choices` picks `population[floor(u * n)]`, which the arrays do too.

The L = 1 check pooled over a run's contexts, and how it may decide a context.

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

An A/A run judged as a whole: how many of its cells' 95% CIs may exclude 1 by chance alone.

With both arms the same variant, each cell's 95% CI excludes the true ratio 1 in 5% of runs of a
correct harness. Over the default sweep's 24 cells that is 1.2 cells on average, and a run with
every CI containing 1 is the exception (0.95^24 = 29% of runs), not the rule. So an A/A is read
as a count: k of n CIs exclude 1, and the chance of k or more under no arm difference (binomial;
cells that share a context share rounds, so this is a guide, not an exact test). Below 5%, the
harness itself makes a difference between the arms.
"""

from __future__ import annotations

import math
import random
import statistics
import threading
import zlib
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

import numpy as np
import numpy.typing as npt

from mlatui.stream.event_base import Interval
from mlatui.stream.events import ARMS, Basis, Estimate

BOOTSTRAP_RESAMPLES = 2000
INTERIM_RESAMPLES = 200  # the per-round estimates a live view shows; decisions and finals use 2000
CONFIDENCE = 0.95
DRIFT_STEP = 0.10  # a round-to-round change of the L = 1 level larger than this is a drift event

ESTIMATORS = {
    "step_ms": "median over rounds of the arm's per-round mean",
    "ratio": "median over A B B A quads of the quad-sum ratio stock/patched",
    "marginal_ms": "median over rounds of the arm's per-round mean(L=2) - mean(L=1)",
    "vs_l1": "median over rounds of the arm's per-round mean(L) / mean(L=1) (flat = 1)",
}
CI_METHOD = (
    f"{CONFIDENCE:.0%} percentile bootstrap over rounds (ratios: rounds resampled whole, median "
    f"over their quads), {BOOTSTRAP_RESAMPLES} resamples ({INTERIM_RESAMPLES} before the final "
    "estimate), seeded"
)


class Outcome(StrEnum):
    VALID = "valid"
    INVALID = "invalid"
    INCONCLUSIVE = "inconclusive"


@dataclass(frozen=True)
class Timing:
    """One timed step: round index, width, arm, milliseconds, and when (run seconds)."""

    round: int
    width: int
    arm: str
    ms: float
    t: float = 0.0


def stable_seed(*parts: object) -> int:
    return zlib.crc32("/".join(map(str, parts)).encode())


def _percentile_interval(median: float, draws: Iterable[float], n: int) -> Interval:
    """`median` with the CONFIDENCE percentile interval of the bootstrap's `draws`."""
    ordered = sorted(draws)
    tail = (1 - CONFIDENCE) / 2
    low = ordered[int(math.floor(tail * (len(ordered) - 1)))]
    high = ordered[int(math.ceil((1 - tail) * (len(ordered) - 1)))]
    return Interval(median, low, high, n)


def bootstrap_median(
    values: Sequence[float], seed: int, resamples: int = BOOTSTRAP_RESAMPLES
) -> Interval:
    """Median with a seeded percentile bootstrap interval."""
    xs = [v for v in values if math.isfinite(v)]
    n = len(xs)
    if n == 0:
        return Interval(math.nan, math.nan, math.nan, 0)
    med = statistics.median(xs)
    if n == 1:
        return Interval(med, med, med, 1)
    return _percentile_interval(med, resampled_medians(xs, seed, resamples), n)


def bootstrap_median_blocks(
    blocks: Sequence[Sequence[float]], seed: int, resamples: int = BOOTSTRAP_RESAMPLES
) -> Interval:
    """Median of all values with a block bootstrap: rounds are resampled whole, with all their
    quads, because quads of one round share its device regime and are not independent. `n` is
    the number of values (quads)."""
    blocks = [[v for v in b if math.isfinite(v)] for b in blocks]
    blocks = [b for b in blocks if b]
    xs = [v for b in blocks for v in b]
    if not xs:
        return Interval(math.nan, math.nan, math.nan, 0)
    med = statistics.median(xs)
    if len(blocks) == 1:
        return bootstrap_median(xs, seed, resamples)
    return _percentile_interval(med, resampled_block_medians(blocks, seed, resamples), len(xs))


def control_outcome(ratio: Interval, tolerance_pct: float) -> Outcome:
    """The L = 1 check: both arms take the same branch, so the paired ratio must be 1 within the
    tolerance. Valid: the whole CI inside; invalid: wholly outside; otherwise inconclusive."""
    lo_bound, hi_bound = 1 - tolerance_pct / 100, 1 + tolerance_pct / 100
    if ratio.n == 0 or not math.isfinite(ratio.median):
        return Outcome.INCONCLUSIVE
    if lo_bound <= ratio.low and ratio.high <= hi_bound:
        return Outcome.VALID
    if ratio.high < lo_bound or ratio.low > hi_bound:
        return Outcome.INVALID
    return Outcome.INCONCLUSIVE


@dataclass(frozen=True)
class Drift:
    round: int
    t: float
    before_ms: float
    after_ms: float

    @property
    def change_pct(self) -> float:
        return (self.after_ms / self.before_ms - 1) * 100


@dataclass
class ContextEstimates:
    rounds: int
    step_ms: dict[tuple[str, int], Interval] = field(default_factory=dict)  # (arm, width)
    ratio: dict[int, Interval] = field(default_factory=dict)  # width -> stock/patched
    marginal_ms: dict[str, Interval] = field(default_factory=dict)  # arm -> L=2 - L=1
    vs_l1: dict[tuple[str, int], Interval] = field(default_factory=dict)  # (arm, L) -> L / L=1
    control_width: int | None = 1
    control_outcome: Outcome | None = None
    tolerance_pct: float = 2.0
    drifts: list[Drift] = field(default_factory=list)
    drifting_rounds: int = 0
    control_level_ms: list[float] = field(default_factory=list)  # per round, both arms

    @property
    def control_ratio(self) -> Interval | None:
        return self.ratio.get(self.control_width) if self.control_width is not None else None


def _by_round(timings: Iterable[Timing]) -> dict[int, dict[tuple[str, int], list[float]]]:
    rounds: dict[int, dict[tuple[str, int], list[float]]] = defaultdict(lambda: defaultdict(list))
    for t in timings:
        rounds[t.round][(t.arm, t.width)].append(t.ms)
    return rounds


def _quads(timings: Iterable[Timing]) -> dict[int, list[list[Timing]]]:
    """Complete quads per width: in the sampler's order, a round's samples of one width come in
    runs of four (A B B A or B A A B), two per arm."""
    runs: dict[tuple[int, int], list[Timing]] = defaultdict(list)
    for t in timings:
        runs[(t.round, t.width)].append(t)
    out: dict[int, list[list[Timing]]] = defaultdict(list)
    for (_, width), ts in sorted(runs.items()):
        for i in range(0, len(ts) - 3, 4):
            quad = ts[i : i + 4]
            x = [t.arm for t in quad]
            if x[0] == x[3] != x[1] == x[2]:  # A B B A or B A A B, nothing else
                out[width].append(quad)
    return out


def _quad_ratios(
    quads: dict[int, list[list[Timing]]], width: int, arms: Sequence[str]
) -> list[list[float]]:
    """The per-quad sum ratios a/b at `width`, grouped by round (in round order)."""
    a, b = arms
    by_round: dict[int, list[float]] = defaultdict(list)
    for quad in quads.get(width, []):
        sa = sum(t.ms for t in quad if t.arm == a)
        sb = sum(t.ms for t in quad if t.arm == b)
        if sb > 0:
            by_round[quad[0].round].append(sa / sb)
    return [by_round[r] for r in sorted(by_round)]


def quad_ratios(
    timings: Iterable[Timing], width: int = 1, arms: Sequence[str] = ARMS
) -> list[float]:
    """Every complete quad's sum ratio a/b at `width` (one context's timings), in round order:
    the samples a paired ratio's median is taken over, whose spread decides how soon it is sure."""
    return [r for by_round in _quad_ratios(_quads(timings), width, arms) for r in by_round]


def _ratio(
    quads: dict[int, list[list[Timing]]], width: int, arms: Sequence[str], seed: int, resamples: int
) -> Interval | None:
    """stock/patched at `width`: per-quad sum ratios, median over quads, rounds resampled whole."""
    by_round = _quad_ratios(quads, width, arms)
    if not by_round:
        return None
    return bootstrap_median_blocks(by_round, stable_seed(seed, "ratio", width), resamples)


def control_ratio(
    timings: Sequence[Timing], arms: Sequence[str], control_width: int, seed: int
) -> Interval | None:
    """The L = 1 control's paired ratio alone, exactly as the final estimate computes it (same
    seed, full resamples): what the sampler decides on after each pair of rounds."""
    return _ratio(_quads(timings), control_width, arms, seed, BOOTSTRAP_RESAMPLES)


def estimate_context(
    timings: Sequence[Timing],
    arms: Sequence[str] = ARMS,
    control_width: int | None = 1,
    tolerance_pct: float = 2.0,
    seed: int = 0,
    resamples: int = BOOTSTRAP_RESAMPLES,
) -> ContextEstimates:
    """Every estimate of one context from its timings (complete quads only)."""
    rounds = _by_round(timings)
    widths = sorted({t.width for t in timings})
    out = ContextEstimates(len(rounds), control_width=control_width, tolerance_pct=tolerance_pct)
    means = _round_means(rounds)
    for (arm, width), by_r in means.items():
        out.step_ms[(arm, width)] = bootstrap_median(
            list(by_r.values()), stable_seed(seed, "step", arm, width), resamples
        )
    quads = _quads(timings)
    for width in widths:
        ratio = _ratio(quads, width, arms, seed, resamples)
        if ratio is not None:
            out.ratio[width] = ratio
    if 1 in widths and 2 in widths:
        out.marginal_ms.update(_marginals(means, arms, seed, resamples))
    if 1 in widths:
        out.vs_l1.update(_vs_l1(means, arms, widths, seed, resamples))
    if control_width is not None and control_width in out.ratio:
        out.control_outcome = control_outcome(out.ratio[control_width], tolerance_pct)
        out.control_level_ms = _control_level(rounds, arms, control_width)
        starts: dict[int, float] = {}
        for t in timings:
            if t.width == control_width:
                starts.setdefault(t.round, t.t)
        out.drifts, out.drifting_rounds = drift_of(
            out.control_level_ms, [starts[r] for r in sorted(starts)]
        )
    return out


RoundMeans = dict[tuple[str, int], dict[int, float]]  # (arm, width) -> round -> mean ms


def _round_means(rounds: dict[int, dict[tuple[str, int], list[float]]]) -> RoundMeans:
    means: RoundMeans = defaultdict(dict)
    for r, cells in sorted(rounds.items()):
        for (arm, width), ms in cells.items():
            means[(arm, width)][r] = statistics.fmean(ms)
    return means


def _marginals(
    means: RoundMeans, arms: Sequence[str], seed: int, resamples: int
) -> dict[str, Interval]:
    """Each arm's L = 2 - L = 1 per round, median over rounds."""
    out = {}
    for arm in arms:
        one, two = means[(arm, 1)], means[(arm, 2)]
        diffs = [two[r] - one[r] for r in sorted(one) if r in two]
        if diffs:
            out[arm] = bootstrap_median(diffs, stable_seed(seed, "marginal", arm), resamples)
    return out


def _vs_l1(
    means: RoundMeans, arms: Sequence[str], widths: Sequence[int], seed: int, resamples: int
) -> dict[tuple[str, int], Interval]:
    """Each arm's step at every width over its L = 1 step, per round, median over rounds."""
    out = {}
    for arm in arms:
        one = means[(arm, 1)]
        for width in widths:
            if width == 1:
                continue
            wide = means[(arm, width)]
            rel = [wide[r] / one[r] for r in sorted(one) if r in wide and one[r] > 0]
            if rel:
                out[(arm, width)] = bootstrap_median(
                    rel, stable_seed(seed, "vs_l1", arm, width), resamples
                )
    return out


def _control_level(
    rounds: dict[int, dict[tuple[str, int], list[float]]], arms: Sequence[str], control_width: int
) -> list[float]:
    """The control width's mean step per round, both arms together (what drift is read from)."""
    a, b = arms
    return [
        statistics.fmean(
            [*rounds[r].get((a, control_width), []), *rounds[r].get((b, control_width), [])]
        )
        for r in sorted(rounds)
        if rounds[r].get((a, control_width)) or rounds[r].get((b, control_width))
    ]


def drift_of(level: Sequence[float], starts: Sequence[float]) -> tuple[list[Drift], int]:
    """Drift events (round-to-round steps > DRIFT_STEP) and how many rounds sit more than
    DRIFT_STEP away from the context's median level (the drifting stretches)."""
    drifts = [
        Drift(i, starts[i] if i < len(starts) else 0.0, level[i - 1], level[i])
        for i in range(1, len(level))
        if level[i - 1] > 0 and abs(level[i] / level[i - 1] - 1) > DRIFT_STEP
    ]
    if not level:
        return drifts, 0
    med = statistics.median(level)
    drifting = sum(1 for x in level if med > 0 and abs(x / med - 1) > DRIFT_STEP)
    return drifts, drifting


# ---- the bootstrap's resampled medians, in arrays ------------------------------------------------

# rows of resamples drawn at once: bounds the arrays to ~32 MB whatever the sample size
MAX_CELLS = 4_000_000

FloatArray = npt.NDArray[np.float64]

# one generator per thread, its state set at each use (making one costs more than a draw)
_local = threading.local()


def python_rng(seed: int) -> np.random.RandomState:
    """A RandomState at the state `random.Random(seed)` starts from."""
    _, internal, _ = random.Random(seed).getstate()
    rs: np.random.RandomState | None = getattr(_local, "rs", None)
    if rs is None:
        rs = _local.rs = np.random.RandomState(0)
    rs.set_state(("MT19937", np.array(internal[:-1], dtype=np.uint32), internal[-1], 0, 0.0))
    return rs


def _picks(rs: np.random.RandomState, rows: int, n: int) -> npt.NDArray[np.intp]:
    """`rows` resamples of `choices(range(n), k=n)`, one per row, in the generator's order."""
    u = rs.random_sample(rows * n).reshape(rows, n)
    return np.floor(u * float(n)).astype(np.intp)


def _row_medians(sorted_rows: FloatArray, counts: npt.NDArray[np.intp]) -> FloatArray:
    """statistics.median of each row's first `counts` values (the rows sorted ascending)."""
    idx = np.arange(len(sorted_rows))
    upper = sorted_rows[idx, counts // 2]
    lower = sorted_rows[idx, np.maximum(counts // 2 - 1, 0)]
    return np.where(counts % 2 == 1, upper, (lower + upper) / 2)


def resampled_medians(xs: Sequence[float], seed: int, resamples: int) -> list[float]:
    """The medians of `resamples` resamples of xs (with replacement, size len(xs)), in the order
    the seeded Python generator draws them."""
    values = np.asarray(xs, dtype=np.float64)
    n = len(values)
    rs = python_rng(seed)
    out: list[float] = []
    chunk = max(1, MAX_CELLS // n)
    for start in range(0, resamples, chunk):
        rows = min(chunk, resamples - start)
        drawn = np.sort(values[_picks(rs, rows, n)], axis=1)
        out.extend(_row_medians(drawn, np.full(rows, n, dtype=np.intp)).tolist())
    return out


def resampled_block_medians(
    blocks: Sequence[Sequence[float]], seed: int, resamples: int
) -> list[float]:
    """The medians of `resamples` block resamples: len(blocks) blocks drawn with replacement,
    their values pooled, in the order the seeded Python generator draws them."""
    k = len(blocks)
    width = max(len(b) for b in blocks)
    padded = np.full((k, width), np.inf)  # the padding sorts after every finite value
    for i, b in enumerate(blocks):
        padded[i, : len(b)] = b
    lengths = np.array([len(b) for b in blocks], dtype=np.intp)
    rs = python_rng(seed)
    out: list[float] = []
    chunk = max(1, MAX_CELLS // (k * width))
    for start in range(0, resamples, chunk):
        rows = min(chunk, resamples - start)
        picks = _picks(rs, rows, k)
        drawn = np.sort(padded[picks].reshape(rows, k * width), axis=1)
        out.extend(_row_medians(drawn, lengths[picks].sum(axis=1)).tolist())
    return out


# ---- the L = 1 check pooled over a run's contexts ------------------------------------------------

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
    draws = [
        statistics.median([v for s in clean for b in rng.choices(s, k=len(s)) for v in b])
        for _ in range(resamples)
    ]
    return _percentile_interval(med, draws, len(xs))


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
        if (rounds := _quad_ratios(_quads(ts), control_width, arms))
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


# ---- an A/A run judged as a whole ----------------------------------------------------------------

CELL_ALPHA = 0.05  # each cell's CI is a 95% interval
RUN_ALPHA = 0.05  # the whole A/A calls a harness difference below this chance


def binomial_tail(k: int, n: int, p: float) -> float:
    """P(X >= k) for X ~ Binomial(n, p)."""
    if k <= 0:
        return 1.0
    if k > n:
        return 0.0
    return sum(math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(k, n + 1))


@dataclass(frozen=True)
class NullJudgement:
    excluded: int  # cells whose 95% CI excludes 1
    cells: int
    chance: float  # P(this many or more | no arm difference)

    @property
    def consistent(self) -> bool:
        """True when chance alone explains the excluded cells."""
        return self.chance >= RUN_ALPHA

    @property
    def text(self) -> str:
        within = self.cells - self.excluded
        if not self.excluded:
            return f"A/A: {within}/{self.cells} CIs contain 1 (no arm difference)"
        how = "as chance allows" if self.consistent else "a harness difference"
        return (
            f"A/A: {within}/{self.cells} CIs contain 1 ({self.excluded} outside: "
            f"{how}, P(≥{self.excluded}) = {self.chance:.2f})"
        )


def judge_null(excluded: int, cells: int) -> NullJudgement:
    return NullJudgement(excluded, cells, binomial_tail(excluded, cells, CELL_ALPHA))


def judge_estimates(finals: Iterable[Estimate]) -> NullJudgement | None:
    """The judgement over every paired-ratio cell of these final estimates (None: no cell)."""
    cells = [row for e in finals for row in e.rows if row.quantity == "ratio"]
    if not cells:
        return None
    return judge_null(sum(not r.low <= 1 <= r.high for r in cells), len(cells))
