"""The sampler and its estimates, with injected effects: a simulated device whose step time
depends on (arm, width, regime, noise), so the true answers are known."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from mlatui.measure.estimates import (
    Outcome,
    Timing,
    bootstrap_median,
    control_outcome,
    estimate_context,
)
from mlatui.measure.sampler import Hooks, SamplerPlan, round_schedule, sample_context


class Device:
    """Step ms = base(width) * arm factor * regime(t) * (1 + noise). `calls` counts time."""

    def __init__(self, slowdown=None, drift_at=None, drift=2.0, noise=0.03, seed=1):
        self.slowdown = slowdown or {}
        self.drift_at, self.drift = drift_at, drift
        self.noise = noise
        self.rng = random.Random(seed)
        self.calls = 0

    def measure(self, arm: str, width: int) -> float:
        self.calls += 1
        regime = self.drift if self.drift_at is not None and self.calls > self.drift_at else 1.0
        base = 10.0 + 3.0 * (width - 1)
        return base * self.slowdown.get(arm, 1.0) * regime * (1 + self.rng.gauss(0, self.noise))


def test_schedule_is_balanced_quads_and_rotates():
    widths = (1, 2, 3, 4)
    first = Counter()
    orders = []
    for r in range(8):
        sched = round_schedule(widths, r)
        assert Counter(w for w, _ in sched) == Counter({1: 4, 2: 4, 3: 4, 4: 4})
        for i in range(0, len(sched), 4):
            arms = [a for _, a in sched[i : i + 4]]
            assert arms in (
                ["stock", "patched", "patched", "stock"],
                ["patched", "stock", "stock", "patched"],
            )
            first[(sched[i][0], arms[0])] += 1
        orders.append(tuple(w for w, _ in sched[::4]))
    for w in widths:  # each arm first equally often per width
        assert first[(w, "stock")] == first[(w, "patched")] == 4
    assert len(set(orders)) == 4  # the width order rotates
    assert {o[0] for o in orders} == set(widths)


def test_control_quads_are_spread_through_the_round():
    sched = round_schedule((1, 2, 3), 0, control_quads=3)
    widths = [w for w, _ in sched[::4]]
    assert widths.count(1) == 3 and widths.count(2) == widths.count(3) == 1
    assert widths != [1, 1, 1, 2, 3]


def test_identical_arms_come_out_null():
    dev = Device(noise=0.03)
    run = sample_context(SamplerPlan((1, 2, 3), min_rounds=10, max_rounds=30), Hooks(dev.measure))
    est = run.estimates
    for w in (1, 2, 3):
        assert est.ratio[w].contains(1.0), (w, est.ratio[w])
    assert est.control_outcome is Outcome.VALID


def test_a_five_percent_slowdown_of_one_arm_is_detected():
    dev = Device(slowdown={"stock": 1.05}, noise=0.03)
    run = sample_context(SamplerPlan((1, 2), min_rounds=10, max_rounds=30), Hooks(dev.measure))
    ratio = run.estimates.ratio[1]
    assert not ratio.contains(1.0)
    assert ratio.low > 1.0 and abs(ratio.median - 1.05) < 0.02
    assert run.estimates.control_outcome is Outcome.INVALID


def test_drift_in_the_middle_does_not_move_the_paired_ratio_and_is_reported():
    plan = SamplerPlan((1, 2, 3), min_rounds=12, max_rounds=12)
    per_round = plan.timed_calls(1)
    dev = Device(drift_at=per_round * 6 + 5, drift=2.0, noise=0.01)  # mid-round 7
    run = sample_context(plan, Hooks(dev.measure, warm=lambda arm, width: None))
    est = run.estimates
    for w in (1, 2, 3):
        assert abs(est.ratio[w].median - 1.0) < 0.01
    assert len(est.drifts) == 1
    assert est.drifts[0].round in (6, 7) and est.drifts[0].change_pct > 50  # where it began
    # marginal cost stays the true 3 ms per arm only if taken within rounds
    for arm in ("stock", "patched"):
        assert 2.5 < est.marginal_ms[arm].median < 6.5


def test_unpaired_medians_would_have_been_fooled_by_the_same_drift():
    """The reason for rounds: measuring each width as a block across a regime change."""
    dev = Device(drift_at=40, drift=2.0, noise=0.0)
    block = {w: [dev.measure("stock", w) for _ in range(40)] for w in (1, 2)}
    naive = sorted(block[2])[20] - sorted(block[1])[20]
    assert naive > 10  # true marginal cost is 3 ms


def test_inconclusive_adds_rounds_up_to_the_limit():
    dev = Device(slowdown={"stock": 1.02}, noise=0.05)
    plan = SamplerPlan((1, 2), min_rounds=4, max_rounds=10)
    run = sample_context(plan, Hooks(dev.measure))
    assert run.rounds == 10
    assert run.estimates.control_outcome is Outcome.INCONCLUSIVE


def test_rounds_are_whole_pairs_and_warmup_is_not_timed():
    dev = Device(noise=0.0)
    warmed = []
    plan = SamplerPlan((1, 2), min_rounds=3, max_rounds=3, warmup=2)
    run = sample_context(plan, Hooks(dev.measure, warm=lambda a, w: warmed.append((a, w))))
    assert run.rounds == 4
    settles = 2 * 2 * 4  # two untimed L = 1 steps before each of a round's 2 quads
    assert len(warmed) == 2 * 2 * 2 + settles
    assert warmed[8:10] == [("patched", 1), ("stock", 1)]  # the opening arm settles last
    assert len(run.timings) == plan.timed_calls(4)


def test_outcome_bounds():
    from mlatui.stream.event_base import Interval

    assert control_outcome(Interval(1.0, 0.99, 1.01, 8), 2.0) is Outcome.VALID
    assert control_outcome(Interval(1.05, 1.03, 1.07, 8), 2.0) is Outcome.INVALID
    assert control_outcome(Interval(1.02, 1.0, 1.04, 8), 2.0) is Outcome.INCONCLUSIVE


def test_estimates_are_reproducible_from_timings():
    timings = [
        Timing(r, w, a, 10 + r + w + (a == "stock"))
        for r in range(6)
        for w in (1, 2)
        for a in ("stock", "patched")
        for _ in range(2)
    ]
    e1 = estimate_context(timings, seed=3)
    e2 = estimate_context(list(timings), seed=3)
    assert e1.ratio == e2.ratio and e1.step_ms == e2.step_ms
    assert bootstrap_median([1.0, 2.0, 3.0], 5) == bootstrap_median([1.0, 2.0, 3.0], 5)


@pytest.mark.parametrize("n", [0, 1])
def test_bootstrap_degenerate(n):
    iv = bootstrap_median([2.0] * n, 0)
    assert iv.n == n


class CarryOver:
    """The H200's carry-over: an arm's step after its own heavy (stock, L >= 2: materialised)
    step is 10% slower. L = 1 costs the same in both arms, so its true ratio is 1."""

    def __init__(self):
        self.heavy = {"stock": False, "patched": False}
        self.rng = random.Random(3)

    def measure(self, arm: str, width: int) -> float:
        ms = (10.0 if width == 1 else 10.0 * width * (3 if arm == "stock" else 1)) * (
            1.1 if self.heavy[arm] else 1.0
        )
        self.heavy[arm] = arm == "stock" and width >= 2
        return ms * (1 + self.rng.gauss(0, 0.005))


@pytest.mark.parametrize("settle", [False, True])
def test_settle_step_removes_the_carry_over_from_the_previous_quad(settle):
    dev = CarryOver()
    plan = SamplerPlan((1, 2, 3, 4), min_rounds=8, max_rounds=8, control_quads=3, settle=settle)
    ratio = sample_context(plan, Hooks(dev.measure)).estimates.ratio[1]
    if settle:  # 0.5% noise: unbiased to well within it
        assert abs(ratio.median - 1) < 0.003 and 0.99 < ratio.low and ratio.high < 1.01
    else:  # the bias the settle step exists for: an A/A would never show it
        assert ratio.low > 1.01


def test_each_width_order_runs_in_both_orientations():
    for r in range(0, 8, 2):
        even, odd = (
            round_schedule((1, 2, 3, 4), r, control_quads=3),
            round_schedule((1, 2, 3, 4), r + 1, control_quads=3),
        )
        assert [w for w, _ in even] == [w for w, _ in odd]
        assert [a for _, a in even[:4]] == ["stock", "patched", "patched", "stock"]
        assert [a for _, a in odd[:4]] == ["patched", "stock", "stock", "patched"]


def test_a_missing_sample_never_pairs_samples_of_different_quads():
    dev = Device(noise=0.0, slowdown={"stock": 1.05})
    run = sample_context(SamplerPlan((1, 2), min_rounds=4, max_rounds=4), Hooks(dev.measure))
    timings = list(run.timings)
    del timings[1]  # a dropped event: the first quad is broken
    est = estimate_context(timings)
    assert est.ratio[1].n == run.estimates.ratio[1].n - 1
    assert abs(est.ratio[1].median - 1.05) < 1e-9 and est.ratio[1].low == est.ratio[1].high


@pytest.mark.parametrize("setting, paused_inside", [("", True), ("keep", False)])
def test_timed_calls_run_with_the_collector_paused(monkeypatch, setting, paused_inside):
    import gc

    monkeypatch.setenv("MLATUI_TIMED_GC", setting)
    inside, between = [], []
    dev = Device(noise=0.0)

    def measure(arm, width):
        inside.append(gc.isenabled())
        return dev.measure(arm, width)

    assert gc.isenabled()
    plan = SamplerPlan((1, 2), min_rounds=2, max_rounds=2)
    sample_context(plan, Hooks(measure, warm=lambda a, w: between.append(gc.isenabled())))
    assert inside and set(inside) == {not paused_inside}
    assert between and all(between)  # untimed calls (warm-up, settle) collect as usual
    assert gc.isenabled()  # restored


def test_gc_pause_nests_and_restores_only_what_it_changed():
    import gc

    from mlatui.measure.sampler import gc_paused

    with gc_paused():
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the outer block still holds it
    assert gc.isenabled()
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()  # it was off before: left off
    finally:
        gc.enable()


def test_between_rounds_runs_before_every_round_but_the_first_and_never_while_timed():
    calls, timed = [], []
    dev = Device(noise=0.0)

    def measure(arm, width):
        timed.append(len(calls))
        return dev.measure(arm, width)

    plan = SamplerPlan((1, 2), min_rounds=4, max_rounds=4)
    run = sample_context(plan, Hooks(measure, warm=lambda a, w: None, between_rounds=calls.append))
    assert calls == [1, 2, 3]
    per_round = plan.timed_calls(1)
    # the hook ran between the rounds' timed calls: round r's samples all saw r copies made
    assert timed == [r for r in range(run.rounds) for _ in range(per_round)]


class PlacedDevice(Device):
    """Each arm's state copy carries its own constant cost factor (where in memory it landed),
    drawn anew whenever the caller re-copies."""

    def __init__(self, spread, seed):
        super().__init__(noise=0.02, seed=seed)
        self.spread = spread
        self.place()

    def place(self, _round=None):
        self.factor = {a: 1 + self.rng.gauss(0, self.spread) for a in ("stock", "patched")}

    def measure(self, arm, width):
        return super().measure(arm, width) * self.factor[arm]


def test_fresh_copies_every_round_turn_a_placement_constant_into_scatter_the_ci_covers():
    plan = SamplerPlan((1, 2), min_rounds=12, max_rounds=12)
    covered = {True: 0, False: 0}
    trials = 20
    for seed in range(trials):
        for recopy in (True, False):
            dev = PlacedDevice(spread=0.015, seed=seed)
            hooks = Hooks(dev.measure, between_rounds=dev.place) if recopy else Hooks(dev.measure)
            run = sample_context(plan, hooks)
            r = run.final.ratio[1]
            covered[recopy] += r.low <= 1.0 <= r.high
    # one copy per context: its constant offset sits inside a narrow CI that misses 1 mostly
    assert covered[False] < 0.6 * trials
    # re-copied each round, the offsets vary between rounds and the CI covers the truth
    assert covered[True] >= 0.85 * trials


class BufferDevice(Device):
    """Each cache buffer has its own constant cost factor (where in memory it sits). Between
    rounds the caller either gives each arm a fresh copy, in alternating order, from an
    allocator that recycles the buffer freed last (so each arm keeps one buffer of its own:
    stock {X, Y}, patched {Y, Z}), or exchanges the two arms' buffers."""

    def __init__(self, spread, seed, swap):
        super().__init__(noise=0.02, seed=seed)
        self.factor = {b: 1 + self.rng.gauss(0, spread) for b in "XYZ"}
        self.held = {"stock": "X", "patched": "Y"}
        self.free: list[str] = []
        self.swap = swap
        self.used: dict[str, set[str]] = {"stock": {"X"}, "patched": {"Y"}}

    def between(self, round_index):
        if self.swap:
            self.held = {"stock": self.held["patched"], "patched": self.held["stock"]}
        else:
            for arm in ("stock", "patched") if round_index % 2 == 0 else ("patched", "stock"):
                new = self.free.pop() if self.free else "Z"
                self.free.append(self.held[arm])
                self.held[arm] = new
        for arm, b in self.held.items():
            self.used[arm].add(b)

    def measure(self, arm, width):
        return super().measure(arm, width) * self.factor[self.held[arm]]


def test_swapping_the_caches_gives_every_buffer_to_both_arms_and_the_ci_covers_the_truth():
    """The CPU finding (docs/method.md): recycled fresh copies leave each arm a buffer of
    its own, an offset persistent over rounds that a narrow CI misses; exchanging the caches
    every round turns it into scatter between rounds, which the CI covers."""
    plan = SamplerPlan((1, 2), min_rounds=12, max_rounds=12)
    covered = {True: 0, False: 0}
    trials = 40
    for seed in range(trials):
        for swap in (True, False):
            dev = BufferDevice(spread=0.05, seed=seed, swap=swap)
            run = sample_context(plan, Hooks(dev.measure, between_rounds=dev.between))
            r = run.final.ratio[2]
            covered[swap] += r.low <= 1.0 <= r.high
            if swap:
                assert dev.used["stock"] == dev.used["patched"] == {"X", "Y"}
            else:
                assert dev.used["stock"] != dev.used["patched"]  # one buffer each of their own
    # nominal 95%: recycled copies cover 1.00 in about two thirds of trials, the swap in ~all
    assert covered[False] <= 0.75 * trials
    assert covered[True] >= 0.95 * trials


def test_a_deadline_ends_the_rounds_after_a_whole_pair():
    import time

    from mlatui.measure.sampler import Hooks, SamplerPlan, sample_context, until

    assert until(None)(True) and not until(None)(False)  # no deadline: the sampler decides
    plan = SamplerPlan((1, 2), min_rounds=20, max_rounds=20, settle=False)
    run = sample_context(
        plan, Hooks(lambda arm, width: 1.0, decide_more=until(time.monotonic() - 1))
    )
    assert run.rounds == 2  # the passed deadline still lets the first pair finish
    firsts = [t.arm for t in run.timings if t.width == 1][::4]
    assert sorted(firsts) == sorted(plan.arms)  # each arm opened once
    run = sample_context(
        plan, Hooks(lambda arm, width: 1.0, decide_more=until(time.monotonic() + 60))
    )
    assert run.rounds == 20
