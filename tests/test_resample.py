"""The bootstrap's array draws are the Python loop's numbers to the bit: the same generator state,
the same picks, the same medians, in the same order (a replay reproduces every interval)."""

import math
import random
import statistics

import pytest

from mlatui.measure.estimates import (
    bootstrap_median,
    bootstrap_median_blocks,
    resampled_block_medians,
    resampled_medians,
)


def loop_medians(xs, seed, resamples):
    rng = random.Random(seed)
    return [statistics.median(rng.choices(xs, k=len(xs))) for _ in range(resamples)]


def loop_block_medians(blocks, seed, resamples):
    rng = random.Random(seed)
    return [
        statistics.median([v for b in rng.choices(blocks, k=len(blocks)) for v in b])
        for _ in range(resamples)
    ]


@pytest.mark.parametrize("n", [2, 3, 7, 12, 40])
@pytest.mark.parametrize("seed", [0, 5, 2**31 + 17])
def test_resampled_medians_are_the_loops_numbers(n, seed):
    data = random.Random(n * 1000 + seed)
    xs = [data.lognormvariate(0, 0.3) for _ in range(n)]
    assert resampled_medians(xs, seed, 300) == loop_medians(xs, seed, 300)


@pytest.mark.parametrize("lengths", [(1, 1), (3, 1, 2), (4, 4, 4, 4, 4), (1, 5, 2, 2, 3, 1, 6)])
@pytest.mark.parametrize("seed", [1, 99])
def test_resampled_block_medians_are_the_loops_numbers(lengths, seed):
    data = random.Random(len(lengths) * 31 + seed)
    blocks = [[data.gauss(1, 0.02) for _ in range(m)] for m in lengths]
    assert resampled_block_medians(blocks, seed, 300) == loop_block_medians(blocks, seed, 300)


def test_draws_in_chunks_continue_one_stream(monkeypatch):
    from mlatui.measure import estimates as resample

    xs = [float(i % 7) + i / 100 for i in range(50)]
    blocks = [xs[i : i + 1 + i % 3] for i in range(0, 40, 4)]
    monkeypatch.setattr(resample, "MAX_CELLS", 120)  # a few resamples per chunk
    assert resampled_medians(xs, 3, 77) == loop_medians(xs, 3, 77)
    assert resampled_block_medians(blocks, 3, 77) == loop_block_medians(blocks, 3, 77)


def test_intervals_ignore_non_finite_values_as_before():
    finite = [1.0 + i / 37 + (i % 3) / 11 for i in range(9)]
    xs = finite[:4] + [math.nan] + finite[4:] + [math.inf]
    draws = sorted(loop_medians(finite, 8, 2000))  # the 2.5% and 97.5% points of 2000 draws
    iv = bootstrap_median(xs, 8)
    assert (iv.median, iv.low, iv.high, iv.n) == (
        statistics.median(finite),
        draws[49],
        draws[1950],
        9,
    )
    blocks = [[1.0, math.nan], [1.1, 1.3], [math.inf], [0.95]]
    kept = [[1.0], [1.1, 1.3], [0.95]]
    draws = sorted(loop_block_medians(kept, 8, 2000))
    iv = bootstrap_median_blocks(blocks, 8)
    assert (iv.low, iv.high, iv.n) == (draws[49], draws[1950], 4)
