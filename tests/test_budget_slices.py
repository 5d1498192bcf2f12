"""A budget's time slices: every segment of the plan ends by its share of the budget, enforced by
the sampler's own stopping rule; an undecided check and the decode blocks take rounds past the
plan while their slice lasts (no early end with checks undecided), a slower device than its
probe stops sooner (no late end), and the run ends with its forecast's error."""

from pathlib import Path

import pytest

from mlatui.measure.plans import Segment
from mlatui.measure.sampler import within
from mlatui.run.budget import END_SHARE, slices
from mlatui.run.budget_probe import Budget
from mlatui.run.phases.results import Checks, PassResults
from mlatui.stream.event_base import Interval
from mlatui.stream.events import BudgetOutcome, BudgetPlanned, LogMessage, Validity
from tests.test_budget_device import _cpu_ms, _table


def _seg(part: str, context: int) -> Segment:
    return Segment(part, context, ((1, 4),), 4, 8)


def test_the_budget_is_shared_in_proportion_to_each_segments_forecast():
    segs = [(_seg("sweep", 512), 1.0), (_seg("sweep", 1024), 3.0), (_seg("tune", 512), 6.0)]
    cut = slices(segs, 10.0, 100.0)
    end = 100.0 * (1 - END_SHARE)
    assert cut.deadline("sweep", 512) == pytest.approx(10 + 0.1 * (end - 10))
    assert cut.deadline("sweep", 1024) == pytest.approx(10 + 0.4 * (end - 10))
    assert cut.deadline("tune", 512) == pytest.approx(end)
    assert cut.deadline("tune", 1024) is None
    # a segment the forecast cannot cost: no slices (the phases run as planned)
    assert slices([*segs, (_seg("more", 64), float("inf"))], 10.0, 100.0).ends == ()
    # the budget spent before the first phase: every slice has ended, each runs one pair
    late = slices(segs, 120.0, 100.0)
    assert {end for _, _, end in late.ends} == {120.0}


def _answers(more, clock: dict, step_s: float, rounds: int) -> list[bool]:
    out = []
    for _ in range(rounds):
        clock["t"] += step_s
        out.append(more(True))
    return out


def test_the_sampler_stops_at_its_slices_end():
    clock = {"t": 0.0}
    now = lambda: clock["t"]  # noqa: E731
    # a device slower than its forecast: the planned 8 rounds stop once the slice has ended
    slow = within(lambda wants: wants, now, 10.0, planned_rounds=8)
    assert _answers(slow, clock, 3.0, 4) == [True, True, True, False]
    clock["t"] = 0.0  # a planned pair runs when at least half of it ends by the deadline
    slower = within(lambda wants: wants, now, 7.0, planned_rounds=8)
    assert _answers(slower, clock, 3.0, 2) == [True, False]
    # past the planned rounds, a pair the sampler wants (an undecided check) runs while it
    # ends by the deadline, taking as long as the last pair
    clock["t"] = 0.0
    undecided = within(lambda wants: wants, now, 10.0, planned_rounds=4)
    assert _answers(undecided, clock, 1.0, 10) == [True] * 9 + [False]
    decided = within(lambda wants: False, now, 10.0, planned_rounds=4)
    assert not decided(True) and not decided(True)  # rank 0's answer on every rank
    # decode blocks grow up to `grow_to` rounds while their slice lasts, the sampler wanting
    # none past the plan
    clock["t"] = 0.0
    rounds = {"n": 0}

    def sampler(wants: bool) -> bool:
        rounds["n"] += 1
        return rounds["n"] < 4 or rounds["n"] % 2 == 1

    grow = within(lambda wants: wants, now, 100.0, planned_rounds=4, grow_to=6)
    asked = []
    for _ in range(8):
        clock["t"] += 1.0
        asked.append(grow(sampler(True)))
    assert asked[:6] == [True] * 5 + [False]  # 6 rounds, the slice far from its end


class FakeCtx:
    def __init__(self, t: float) -> None:
        self.t, self.events = t, []
        self.emit = self.events.append

    def now(self) -> float:
        return self.t

    def leader_decides_each(self, wants: list[bool]) -> list[bool]:
        return list(wants)


class FakeMore:
    """The engine's last L = 1 rounds, faked: they decide every check, 1 s before the end."""

    def __init__(self, ctx: FakeCtx) -> None:
        self.ctx, self.asked = ctx, []

    def measure(self, checks, rounds, until_s=None):
        self.asked.append(([v.context for v in checks], until_s))
        self.ctx.t = until_s - 1.0
        return [msgspec_replace(v, outcome="valid", valid=True) for v in checks]


def msgspec_replace(v, **changes):
    import msgspec

    return msgspec.structs.replace(v, **changes)


def _finish(t: float, added_s: float, plan_t: float = 0.0):
    from mlatui.config.phase_kind import PhaseKind

    ctx = FakeCtx(t)
    planned = BudgetPlanned(plan_t, 100.0, 80.0, 50.0, (), (), (512,), 1.0, 2.5)
    check = Validity(
        1.0,
        "sweep",
        512,
        20.0,
        20.1,
        0.5,
        2.0,
        False,
        "inconclusive",
        Interval(1.005, 0.97, 1.03, 8),
        8,
    )
    done = PassResults(checks=Checks().plus([check], [("sweep", PhaseKind.SWEEP)]), added_s=added_s)
    more = FakeMore(ctx)
    cut = slices([(_seg("sweep", 512), 1.0)], 0.0, 100.0)
    costs = _table(_cpu_ms)  # a prefill and a pair of L = 1 rounds at 512: ~0.35 s
    after = Budget(planned, cut, costs).finish(ctx, done, more)
    return ctx, more, after, next(e for e in ctx.events if isinstance(e, BudgetOutcome))


class FollowerCtx(FakeCtx):
    """A rank under mlx.launch: rank 0's answers (`leaders`), whatever this rank wanted."""

    def __init__(self, t: float, leaders: list[bool]) -> None:
        super().__init__(t)
        self.leaders, self.asked = leaders, []

    def leader_decides_each(self, wants: list[bool]) -> list[bool]:
        self.asked.append(list(wants))
        return list(self.leaders)


def test_under_mlx_launch_the_end_asks_over_every_check_and_measures_rank_0s_choice():
    from mlatui.config.phase_kind import PhaseKind

    def check(context: int, outcome: str) -> Validity:
        iv = Interval(1.005, 0.97, 1.03, 8) if outcome != "valid" else Interval(1.0, 0.99, 1.01, 8)
        return Validity(
            1.0, "sweep", context, 20.0, 20.1, 0.5, 2.0, outcome == "valid", outcome, iv, 8
        )

    # this rank read 512 valid and 1024 undecided; rank 0 read them the other way round
    mine = [check(512, "valid"), check(1024, "inconclusive")]
    ctx = FollowerCtx(60.0, leaders=[True, False])
    planned = BudgetPlanned(0.0, 100.0, 80.0, 50.0, (), (), (512,), 1.0, 2.5)
    done = PassResults(checks=Checks().plus(mine, [("sweep", PhaseKind.SWEEP)]))
    more = FakeMore(ctx)
    cut = slices([(_seg("sweep", 512), 1.0), (_seg("sweep", 1024), 1.0)], 0.0, 100.0)
    Budget(planned, cut, _table(_cpu_ms)).finish(ctx, done, more)
    assert ctx.asked == [[False, True]]  # one entry per check, the same list on every rank
    assert [contexts for contexts, _ in more.asked] == [[512]]  # rank 0's choice, measured here


def test_the_time_left_goes_to_the_undecided_checks_and_the_run_says_its_forecasts_error():
    ctx, more, after, out = _finish(60.0, added_s=10.0)
    end = 100.0 * (1 - END_SHARE)
    assert more.asked == [([512], pytest.approx(end))]  # to the budget's end
    assert [v.verdict for v in after.checks.latest] == ["valid"] and out.undecided == ()
    assert out.took_s == pytest.approx(end - 1.0) and ctx.events[-1] == out
    assert out.extra_s == pytest.approx(10.0 + end - 1.0 - 60.0)  # the last rounds: past the plan
    assert out.planned_s == pytest.approx(50.0) and out.error_pct == pytest.approx(0.0)
    # no time left for a prefill and a pair (at 96.8 s: 0.2 s, where they take ~0.35 s): nothing
    # measured; the error and what is still undecided are said
    assert _finish(96.8, added_s=36.8)[1].asked == []
    ctx, more, after, out = _finish(99.0, added_s=39.0)
    assert more.asked == [] and out.undecided == ("sweep @ 512",) and out.first_use_s == 2.5
    assert out.error_pct == pytest.approx((50 - 60) / 60 * 100)
    said = next(e for e in ctx.events if isinstance(e, LogMessage))
    assert "(forecast error -17%)" in said.message
    assert "still undecided: sweep @ 512" in said.message and "compilation" in said.message


def test_the_forecast_error_leaves_out_the_time_before_the_plan():
    """A cold GPU's probe compiles for ~46 s before the plan: the error is the phases' forecast
    against what the phases took, not diluted by the seconds both share."""
    ctx, _, _, out = _finish(99.0, added_s=39.0, plan_t=40.0)  # phases forecast 10 s, took 20 s
    assert out.plan_t == 40.0 and out.planned_s == pytest.approx(60.0)
    assert out.error_pct == pytest.approx((50 - 60) / (60 - 40) * 100)  # -50%, not -17%
    said = next(e for e in ctx.events if isinstance(e, LogMessage)).message
    assert "forecast the phases at ~10 s and they took 20 s (forecast error -50%)" in said


def test_undecided_checks_take_the_time_their_slices_leave(tmp_path, monkeypatch):
    """The tiny model's sweep and tune, every L = 1 check held undecided (the sampler's and the
    pooled check's rule say inconclusive): a context adds rounds past its plan until its slice
    ends, and the run ends near its budget, neither early nor far past it."""
    import sys

    import mlatui.measure.estimates as estimates
    import mlatui.run.engine  # noqa: F401  (every phase module, so each holder is found)
    from mlatui.config.run_plan import RunConfig
    from mlatui.measure.estimates import Outcome
    from mlatui.stream.events import RunEnd
    from tests.engine_run import run

    undecided = lambda ratio, tolerance_pct: Outcome.INCONCLUSIVE  # noqa: E731
    decides = estimates.control_outcome
    holders = [
        m for m in list(sys.modules.values()) if getattr(m, "control_outcome", None) is decides
    ]
    # every module that took the rule by name, the budget's last `more` rounds included: one left
    # out decides its checks on a host fast enough to reach those rounds
    assert {"mlatui.measure.estimates", "mlatui.run.phases.more"} <= {m.__name__ for m in holders}
    for module in holders:
        monkeypatch.setattr(module, "control_outcome", undecided)
    tiny = Path(__file__).parent / "fixtures" / "tiny.toml"
    scenario = tmp_path / "tiny-budget.toml"
    budget_s = 8.0
    scenario.write_text(tiny.read_text().replace("seed = 0", f"seed = 0\nbudget_s = {budget_s}", 1))
    events: list = []
    config = RunConfig(scenario=str(scenario), random_weights=True, overrides={"reps": 2})
    assert run(config, events.append) == "completed"
    plan = next(e for e in events if isinstance(e, BudgetPlanned))
    assert all(p.max_rounds == 64 for p in plan.phases)  # rounds end with the slices
    outcome = next(e for e in events if isinstance(e, BudgetOutcome))
    assert outcome.took_s == pytest.approx(outcome.planned_s + outcome.extra_s)
    assert set(outcome.undecided) >= {"sweep @ 128", "sweep @ 256"}
    # the planned rounds alone take a few seconds here: the time to the slices' end is spent
    # (a slower host only takes longer to get there); unsliced, the undecided checks would each
    # run their 64 rounds, minutes
    assert outcome.took_s > 0.5 * budget_s and outcome.took_s < 4 * budget_s
    assert isinstance(events[-1], RunEnd)


def test_the_h100s_tune_reads_the_check_its_sweep_reported():
    """The cold H100 run's sweep steps at 24576 (16 rounds of L = 1 quads): the sweep reported
    its check valid on its plan's seed, the same quads pooled read inconclusive, and the tune's
    blocks read the check as reported."""
    import json

    from mlatui.measure.estimates import (
        Outcome,
        Timing,
        control_outcome,
        estimate_context,
        stable_seed,
    )
    from mlatui.run.phases.decode import check_before_blocks
    from mlatui.run.phases.results import L1Quads

    kept = json.loads((Path(__file__).parent / "fixtures" / "h100_sweep_l1_24576.json").read_text())
    arms, seed, context = {"s": "stock", "p": "patched"}, kept["seed"], kept["context"]
    steps = [Timing(r, 1, arms[a], ms) for r, a, ms in kept["steps"]]
    sweep = estimate_context(steps, seed=stable_seed(seed, "sweep", context))
    l1 = L1Quads().plus(context, steps, 1)
    assert sweep.control_outcome is Outcome.VALID and sweep.rounds == 16
    assert control_outcome(l1.pooled_ratio(context, seed), 2.0) is Outcome.INCONCLUSIVE
    assert check_before_blocks(seed, context, sweep, l1) is Outcome.VALID


@pytest.mark.system
def test_a_tunes_blocks_may_grow_where_the_check_it_reports_is_decided(tmp_path, monkeypatch):
    """The tiny model's sweep and tune under a budget, each run's own L = 1 check valid while the
    same quads pooled (bootstrapped on another seed) straddle the tolerance, as the H100's sweep
    check at 24576 did (valid at [0.987, 1.019], pooled [0.981, 1.020]): the tune reports its
    check valid, so its blocks may grow past their plan while their slice lasts. Gated on the
    pooled reading, they stopped at their plan and the run ended at 73 s of 100, the tune
    undecided."""
    import mlatui.measure.estimates as estimates
    import mlatui.measure.sampler as sampler
    import mlatui.run.phases.decode as decode
    from mlatui.config.run_plan import RunConfig
    from mlatui.measure.estimates import Outcome
    from mlatui.run.budget import GROW_ROUNDS
    from mlatui.run.phases.results import L1Quads
    from tests.engine_run import run

    valid = lambda ratio, tolerance_pct: Outcome.VALID  # noqa: E731
    for module in (estimates, sampler):  # each sampler run's own reading; decode's rule is real
        monkeypatch.setattr(module, "control_outcome", valid)
    straddling = Interval(1.0038, 0.9814, 1.0201, 48)  # the H100's, pooled
    monkeypatch.setattr(L1Quads, "pooled_ratio", lambda self, context, seed: straddling)
    grow_to, real = [], decode._sample_blocks

    def sample_blocks(ctx, runner, bounds, progress, slices):
        grow_to.append(slices.grow_to)
        return real(ctx, runner, bounds, progress, slices)

    monkeypatch.setattr(decode, "_sample_blocks", sample_blocks)
    tiny = Path(__file__).parent / "fixtures" / "tiny.toml"
    scenario = tmp_path / "tiny-budget.toml"
    scenario.write_text(tiny.read_text().replace("seed = 0", "seed = 0\nbudget_s = 8.0", 1))
    events: list = []
    config = RunConfig(scenario=str(scenario), random_weights=True, overrides={"reps": 2})
    assert run(config, events.append) == "completed"
    assert grow_to == [GROW_ROUNDS]
    checks = [e for e in events if isinstance(e, Validity) and e.phase == "tune"]
    assert [v.outcome for v in checks] == ["valid"]


class ClockCtx:
    """A run's context on a fake clock: rank 0 alone, the default scenario's draft kinds."""

    draft_kinds = ("mtp", "draft-model")

    def __init__(self, t: float) -> None:
        self.t, self.events = t, []
        self.emit = self.events.append

    def now(self) -> float:
        return self.t

    def leader_decides_each(self, wants: list[bool]) -> list[bool]:
        return list(wants)


def _simulated_run(slow: float, replan: bool) -> tuple[float, ClockCtx]:
    """The default scenario under a 100 s budget, planned on the 2-core CPU's probe costs, on a
    host `slow` times slower than its probe said: every round takes `slow` times its forecast
    share, the sampler stops as `within` says (each check decided after its planned rounds), and
    the sweep hands on its steps' measured ms as a phase does. Returns the run's end."""
    from dataclasses import replace

    from mlatui.config.scenario import load_scenario
    from mlatui.measure.estimates import ContextEstimates
    from mlatui.measure.plans import phase_segments
    from mlatui.run.budget import FORECAST_MARGIN
    from mlatui.run.phases.results import Slices

    costs, kinds = _table(_cpu_ms, lengths=(256, 1024, 4096)), ClockCtx.draft_kinds
    phases = load_scenario(str(Path(__file__).parent.parent / "scenarios" / "default.toml")).phases
    planned = BudgetPlanned(5.0, 100.0, 0.0, 0.0, (), (), (256,), 1.0)
    ctx, done = ClockCtx(5.0), PassResults()
    ran, budget = Budget(planned, Slices(), costs, phases).plan(ctx, 0, 1.0, 95 / FORECAST_MARGIN)
    ctx.events.clear()  # the first plan's
    for i in range(len(ran)):
        if replan and i:
            ran, budget = budget.replan(ctx, ran, i, done)
        for seg in phase_segments(budget.chosen[i], kinds):
            round_s = slow * costs.segment_s(seg) / seg.first_rounds
            deadline = budget.slices.deadline(seg.part, seg.context)
            more, rounds = within(lambda wants: wants, ctx.now, deadline, seg.first_rounds), 0
            while True:
                ctx.t, rounds = ctx.t + round_s, rounds + 1
                if not more(rounds < seg.first_rounds or rounds % 2 == 1):
                    break
            if not seg.tokens:
                ms = {
                    (arm, w): Interval(slow * costs.costs.step(arm, seg.context, w), 0, 0, rounds)
                    for arm in ("stock", "patched")
                    for w, _ in seg.calls
                }
                finals = (*done.finals, (seg.part, seg.context, ContextEstimates(rounds, ms)))
                done = replace(done, finals=finals)
    return ctx.t, ctx


def test_a_host_slower_than_its_probe_scales_the_phases_left_down_and_ends_on_time():
    """A host 1.25-3x slower than its probe (a loaded one): the sweep's slices cut its rounds,
    but a slice's sampler runs a planned pair when half of it fits, and the tune's rounds of
    blocks are long, so with the first plan the run overran (101-113 s of 100). At the phase
    boundary the tune is planned again at the pace the sweep's steps ran, and the run ends
    within its budget; on a host as fast as its probe nothing changes."""
    on_pace, ctx = _simulated_run(1.0, replan=True)
    assert on_pace == _simulated_run(1.0, replan=False)[0] and not ctx.events
    for slow, overran in ((1.25, True), (2.0, False), (3.0, True)):
        before, _ = _simulated_run(slow, replan=False)
        after, ctx = _simulated_run(slow, replan=True)
        assert (before > 100.0) == overran and after <= 100.0 * (1 - END_SHARE), (slow, after)
        replanned = next(e for e in ctx.events if isinstance(e, BudgetPlanned))
        assert [p.name for p in replanned.phases] == ["tune"] and replanned.changes
        said = next(e.message for e in ctx.events if isinstance(e, LogMessage))
        assert "at this device's pace so far, the phases left would take ~" in said
        assert "tune: rounds 8 -> " in said and f"{slow:.2f}x" not in said  # no ratio without a CI
