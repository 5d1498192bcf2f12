"""`bench decode-parity`'s A/A is not moved by where a side runs in a round or by what a side ran
before: statistics on injected effects (fake blocks that return the milliseconds the test says),
no timing. The sampler runs each round as A B B A quads, B A A B on the next (whole pairs only),
so each side opens a round equally often; each pairing's direct sides are fresh (their own cache
copies and plain threads), so neither A/A side is warmer than the other."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import pytest

from mlatui.measure.sampler import Hooks, sample_context
from mlatui.run.decode_stream import Block, Sampling
from mlatui.run.parity import AA, ParityPlan, _Sides, _width_result, first_side

ROUNDS = 30  # as the H100 command ran it
TOKENS = 32
BLOCK_MS = 400.0
NOISE = 0.01  # 1% per block, lognormal


def _plan(rounds: int = ROUNDS, seed: int = 0) -> ParityPlan:
    return ParityPlan([1, 2, 3], 4, TOKENS, 2, rounds, seed, Sampling())


def _contains_one(result) -> bool:
    return result.ratio.low <= 1.0 <= result.ratio.high


SEEDS = 20


def _opening_slower(widths: tuple[int, ...], seed: int, effect: float):
    """An A/A sampled as the parity bench samples it, where whichever side opens a round runs its
    block `effect` times slower; returns the run and the warm-up calls per side."""
    plan = _plan(seed=seed)
    rng = random.Random(seed)
    opening = [True]  # the next call opens a round
    warmed: dict[str, int] = {}

    def measure(side: str, width: int) -> float:
        slow = effect if opening[0] else 1.0
        opening[0] = False
        return BLOCK_MS * width * slow * rng.lognormvariate(0.0, NOISE)

    def warm(side: str, width: int) -> float:
        warmed[side] = warmed.get(side, 0) + 1
        return 0.0

    def next_round(_done: int) -> None:
        opening[0] = True

    hooks = Hooks(measure, warm=warm, between_rounds=next_round)
    return sample_context(plan.sampler_plan(AA, widths), hooks), warmed


@pytest.mark.parametrize(
    "widths",
    [
        # the default run's plain+depth2 case holds width 1 to the same bounds, in a plan that
        # also samples depth 2
        pytest.param((1,), id="plain", marks=pytest.mark.slow),
        pytest.param((1, 3), id="plain+depth2"),
    ],
)
def test_the_side_that_opens_a_round_running_3pct_slower_leaves_the_aa_at_1(widths):
    """Over 20 seeds: each side opens half the rounds and is warmed by one untimed block per
    width; the A/A's median stays at 1 (within 0.2% on average) and its 95% CI holds 1 as often
    as a CI should (at most 3 misses of 20, where a position effect that leaked would move
    every one: a 3% effect on one side is excluded 20 times of 20, test below)."""
    for width in widths:
        medians, missed = [], 0
        for seed in range(SEEDS):
            run, warmed = _opening_slower(widths, seed, 1.03)
            assert warmed == {first_side(AA): len(widths), AA: len(widths)}
            per_round = [[t.arm for t in run.timings if t.round == r] for r in range(run.rounds)]
            openers = [arms[0] for arms in per_round]
            assert run.rounds == ROUNDS and openers.count(AA) == ROUNDS // 2
            result = _width_result(run, AA, width, TOKENS)
            medians.append(result.ratio.median)
            missed += not _contains_one(result)
        assert abs(sum(medians) / SEEDS - 1) < 0.002, medians
        assert missed <= 3, (width, missed)


def test_the_fake_can_see_a_3pct_side_effect():
    """The same noise and rounds with the first side itself 3% slower: every seed's A/A CI
    excludes 1 (so a position effect that moved the ratio would have been seen)."""
    for seed in range(SEEDS):
        rng = random.Random(seed)

        def measure(side: str, width: int, rng=rng) -> float:
            slow = 1.03 if side == first_side(AA) else 1.0
            return BLOCK_MS * slow * rng.lognormvariate(0.0, NOISE)

        run = sample_context(_plan(seed=seed).sampler_plan(AA, (1,)), Hooks(measure))
        assert _width_result(run, AA, 1, TOKENS).ratio.high < 0.99


@dataclass
class ColdCopy:
    """A direct side's fake: its first `cold_blocks` blocks run 3% slower (a fresh copy, thread
    and stream warming up), whichever side it serves."""

    rng: random.Random
    cold_blocks: int
    cache: list = field(default_factory=lambda: [Layer()])
    draft: object = None
    blocks: int = 0

    def block(self, block: Block, sampling: Sampling, seed: int, sync: bool = False) -> float:
        self.blocks += 1
        slow = 1.03 if self.blocks <= self.cold_blocks else 1.0
        return BLOCK_MS * (block.depth + 1) * slow * self.rng.lognormvariate(0.0, NOISE)

    def recopy(self) -> None:
        pass


class Layer:
    """A cache layer that holds no arrays (what evaluate_held and swap_caches see)."""


def test_each_aa_pairing_gets_fresh_sides_so_warm_up_history_cancels():
    """A side is 3% slower for its first 70 blocks, about one pairing's worth: had the A/A's
    second side been kept from the pairing before it, it would run warm against a cold first
    side (0.97). Each pairing makes its own two copies and two threads, closed after it."""
    rng = random.Random(0)
    made: list[ColdCopy] = []
    threads: list = []

    def make_direct() -> ColdCopy:
        made.append(ColdCopy(rng, cold_blocks=70))
        return made[-1]

    def make_thread():
        from mlatui.run.parity import PlainThread

        threads.append(PlainThread())
        return threads[-1]

    sides = _Sides(None, _plan(), make_direct, make_thread)  # type: ignore[arg-type]
    for _ in range(2):
        run = sides.sample(AA, (1, 3), None)
        for width in (1, 3):
            result = _width_result(run, AA, width, TOKENS)
            assert _contains_one(result), (width, result.ratio)
    assert len(made) == len({id(c) for c in made}) == 4  # two fresh copies per pairing
    assert made[0].blocks == made[1].blocks == 2 * ROUNDS * 2 + 2  # each: 2 per quad, 1 warm-up
    assert len(threads) == 4 and not any(t._thread.is_alive() for t in threads)
    sides.close()


def test_a_warm_second_side_would_have_moved_the_aa():
    """The fake's teeth: a pairing whose second side arrives warm, as where the A/A's direct
    side is kept from the pairing before it (`--versus mlx_lm-thread,mlx_lm-aa`), reads
    about 0.98 with a CI that excludes 1 (the H100 gave 0.976 [0.958, 0.987])."""
    rng = random.Random(0)

    def make_direct() -> ColdCopy:
        copy = ColdCopy(rng, cold_blocks=70)
        made.append(copy)
        if len(made) % 2 == 1:  # the pairing's own `direct`: made first, the A/A's second side
            copy.blocks = 70
        return copy

    made: list[ColdCopy] = []
    sides = _Sides(None, _plan(), make_direct)  # type: ignore[arg-type]
    run = sides.sample(AA, (1, 3), None)
    for width in (1, 3):
        ratio = _width_result(run, AA, width, TOKENS).ratio
        assert ratio.high < 1.0 and 0.97 < ratio.median < 0.99, (width, ratio)
