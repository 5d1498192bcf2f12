"""The L = 1 check pooled over a run's contexts (mlatui.measure.estimates) and how a phase applies it
(mlatui.run.phases.base): synthetic timings, no model."""

from __future__ import annotations

import random

import pytest

from mlatui.config.phase_kind import PhaseKind
from mlatui.measure.estimates import (
    POOLED_ESTIMATOR,
    Outcome,
    Timing,
    control_outcome,
    control_ratio,
    decide,
    pooled_check,
    stratified_bootstrap_median,
)
from mlatui.run.phases.base import RunContext, mark_rows, pool_checks
from mlatui.run.phases.results import Checks, L1Quads
from mlatui.stream.event_base import Interval
from mlatui.stream.events import ARMS, Basis, PooledValidity, Validity
from mlatui.stream.phase_rows import SweepRow

CONTEXTS = (512, 1024, 2048, 4096, 8192)


def quads(rounds: int, scatter: float, seed: int, slowdown: float = 1.0, quads_per_round=3):
    """Synced L = 1 quads as the sampler lays them out (A B B A, mirrored on odd rounds): each
    round has its own device level (the regime), each sample its own jitter of `scatter`; the
    patched arm's steps take `slowdown` times as long."""
    rng = random.Random(seed)
    out = []
    for r in range(rounds):
        level = rng.uniform(10, 30)
        for q in range(quads_per_round):
            order = ("stock", "patched", "patched", "stock")
            if (r + q) % 2:
                order = order[::-1]
            for arm in order:
                f = slowdown if arm == "patched" else 1.0
                out.append(Timing(r, 1, arm, level * f * (1 + rng.gauss(0, scatter))))
    return out


def own(timings, seed=0):
    ratio = control_ratio(timings, ARMS, 1, seed)
    return ratio, control_outcome(ratio, 2.0)


def run_of(slowdowns=None, scatter=0.05, rounds=6, seed=0):
    slowdowns = slowdowns or {}
    return {
        c: quads(rounds, scatter, seed + i, slowdowns.get(c, 1.0)) for i, c in enumerate(CONTEXTS)
    }


def test_an_aa_run_with_noise_is_valid_pooled_where_every_context_alone_is_inconclusive():
    by_context = run_of()
    for c, ts in by_context.items():
        ratio, outcome = own(ts)
        assert outcome is Outcome.INCONCLUSIVE, (c, ratio)
        assert ratio.contains(1.0)
    p = pooled_check(by_context, ARMS, 1, seed=7, tolerance_pct=2.0)
    assert p is not None and p.outcome is Outcome.VALID, p
    assert 0.98 <= p.ratio.low < 1.0 < p.ratio.high <= 1.02
    assert p.contexts == CONTEXTS and p.rounds == 6 * len(CONTEXTS)
    assert p.ratio.n == 3 * 6 * len(CONTEXTS)  # every quad of every context
    # the pooled CI is the tighter one: narrower than any context's own
    widths = [own(ts)[0].high - own(ts)[0].low for ts in by_context.values()]
    assert p.ratio.high - p.ratio.low < min(widths)
    for ts in by_context.values():
        ratio, outcome = own(ts)
        assert decide(outcome, ratio.low, ratio.high, p.outcome) == (Outcome.VALID, Basis.POOLED)


def test_a_5pct_patched_slowdown_at_l1_everywhere_is_pooled_invalid_and_no_context_passes():
    by_context = run_of({c: 1.05 for c in CONTEXTS})
    p = pooled_check(by_context, ARMS, 1, seed=7, tolerance_pct=2.0)
    assert p is not None and p.outcome is Outcome.INVALID, p
    assert p.ratio.high < 0.98 and abs(p.ratio.median - 1 / 1.05) < 0.01
    for ts in by_context.values():
        ratio, outcome = own(ts)
        decided, basis = decide(outcome, ratio.low, ratio.high, p.outcome)
        assert decided is outcome and decided is not Outcome.VALID and basis is Basis.OWN


def test_a_context_whose_own_ci_excludes_one_stays_out_even_when_the_pool_is_valid():
    # 8192: the patched arm 3.5% faster: inconclusive alone with a CI above 1.00
    by_context = run_of()
    by_context[8192] = quads(6, 0.05, 101, 1 / 1.035)
    ratio, outcome = own(by_context[8192])
    assert outcome is Outcome.INCONCLUSIVE and ratio.low > 1.0, ratio
    p = pooled_check(by_context, ARMS, 1, seed=7, tolerance_pct=2.0)
    assert p is not None and p.outcome is Outcome.VALID
    assert decide(outcome, ratio.low, ratio.high, p.outcome) == (Outcome.INCONCLUSIVE, Basis.OWN)


def test_decide_never_changes_a_decided_context():
    for pooled in (Outcome.VALID, Outcome.INVALID, Outcome.INCONCLUSIVE, None):
        assert decide(Outcome.VALID, 0.99, 1.01, pooled) == (Outcome.VALID, Basis.OWN)
        assert decide(Outcome.INVALID, 1.03, 1.05, pooled) == (Outcome.INVALID, Basis.OWN)
    assert decide(Outcome.INCONCLUSIVE, 0.97, 1.03, Outcome.INCONCLUSIVE)[1] is Basis.OWN
    assert decide(Outcome.INCONCLUSIVE, 0.97, 1.03, None)[1] is Basis.OWN
    assert decide(Outcome.INCONCLUSIVE, None, None, Outcome.VALID)[1] is Basis.OWN
    assert decide(Outcome.INCONCLUSIVE, 0.97, 0.995, Outcome.VALID)[1] is Basis.OWN


def test_the_stratified_bootstrap_is_seeded():
    by_context = run_of()
    a = pooled_check(by_context, ARMS, 1, seed=7, tolerance_pct=2.0)
    b = pooled_check(dict(by_context), ARMS, 1, seed=7, tolerance_pct=2.0)
    c = pooled_check(by_context, ARMS, 1, seed=8, tolerance_pct=2.0)
    assert a == b
    assert (c.ratio.low, c.ratio.high) != (a.ratio.low, a.ratio.high)
    assert c.ratio.median == a.ratio.median  # the point estimate needs no seed


def test_rounds_are_resampled_within_their_context():
    """Two contexts of 3 rounds, every quad 0.95 in one and 1.05 in the other: each resample
    keeps 3 rounds of each, so the median is always 1.00; a bootstrap that drew 6 rounds from
    the two together would often take 4 of one and move the median to 0.95 or 1.05."""
    strata = [[[0.95] * 3] * 3, [[1.05] * 3] * 3]
    iv = stratified_bootstrap_median(strata, seed=1)
    assert (iv.median, iv.low, iv.high, iv.n) == (1.0, 1.0, 1.0, 18)


def test_one_context_is_not_pooled():
    assert pooled_check({512: quads(6, 0.05, 0)}, ARMS, 1, seed=7, tolerance_pct=2.0) is None
    assert pooled_check({512: quads(6, 0.05, 0), 1024: []}, ARMS, 1, 7, 2.0) is None


# -- a phase applying it ---------------------------------------------------------------------


class _Run:
    """A phase's environment: its events, the run's checks as its phases return them (what is
    left out of the verdicts) and the pass's L = 1 quads, one sampler run per context."""

    def __init__(self, by_context, lockstep=None):
        self.events: list = []
        self.checks = Checks()
        self.ctx = RunContext({}, self.events.append, None, 0, lambda n: [], 16, lockstep=lockstep)
        self.l1 = L1Quads()
        for c, ts in by_context.items():
            self.l1 = self.l1.plus(c, ts, 1)

    def invalid(self) -> set[int]:
        return set(self.checks.invalid_contexts())


def _checks(run, phase, by_context):
    """Each context's own check, as `validity()` makes it, in the run's checks."""
    out = []
    for c, ts in by_context.items():
        ratio, outcome = own(ts)
        valid = outcome is Outcome.VALID
        diff = (ratio.median - 1) * 100
        out.append(
            Validity(
                0.0, phase, c, 10.0, 10.0, diff, 2.0, valid, outcome.value,
                ratio, 6,
            )
        )  # fmt: skip
    run.checks = run.checks.plus(out, [(phase, PhaseKind(phase))])
    return out


def test_a_phase_emits_the_pooled_check_then_each_context_it_decided():
    by_context = run_of()  # noisy: each context inconclusive alone
    by_context[8192] = quads(6, 0.05, 101, 1 / 1.035)  # its CI lies above 1.00
    run = _Run(by_context)
    events = run.events
    checks = _checks(run, "sweep", by_context)
    assert run.invalid() == set(CONTEXTS)
    decided = pool_checks(run.ctx, "sweep", checks, run.l1)
    assert set(decided) == set(CONTEXTS) - {8192}
    run.checks = run.checks.plus(decided.values())  # as the phase returns them
    pooled = events[0]
    assert isinstance(pooled, PooledValidity) and pooled.valid and pooled.phase == "sweep"
    assert pooled.decided == tuple(sorted(decided)) and pooled.undecided == (8192,)
    assert pooled.estimator == POOLED_ESTIMATOR and "stratified by context" in pooled.ci_method
    assert pooled.contexts == CONTEXTS and pooled.quads == 3 * 6 * 5
    later = events[1:]
    assert [v.context for v in later] == sorted(decided)
    for v in later:
        assert v.valid and v.outcome == "valid" and v.basis is Basis.POOLED
        mine = next(c for c in checks if c.context == v.context)
        assert v.ratio == mine.ratio
    assert run.invalid() == {8192}  # left out of verdicts: only the one it kept
    rows = mark_rows(
        [
            SweepRow(context=c, width=1, arm="stock", median_ms=1.0, outcome="inconclusive")
            for c in CONTEXTS
        ],
        decided,
    )
    assert [r.valid for r in rows] == [True, True, True, True, False]
    assert rows[0].basis is Basis.POOLED and rows[-1].basis is Basis.OWN


def test_a_phase_with_every_check_decided_emits_nothing():
    by_context = run_of(scatter=0.002)
    run = _Run(by_context)
    checks = _checks(run, "sweep", by_context)
    assert all(v.valid for v in checks)
    assert pool_checks(run.ctx, "sweep", checks, run.l1) == {} and run.events == []


class _Leader:
    """A lockstep stand-in: rank 0's decisions, whatever this rank wanted."""

    def __init__(self, leaders):
        self.leaders, self.asked = leaders, []

    def leader_decides_each(self, wants):
        self.asked.append(list(wants))
        return list(self.leaders)


def test_under_mlx_launch_the_decisions_are_rank_0s():
    by_context = run_of()
    # this rank's own data would pass every context; rank 0 decided only the first
    run = _Run(by_context, lockstep=_Leader([True, False, False, False, False]))
    events = run.events
    checks = _checks(run, "tune", by_context)
    decided = pool_checks(run.ctx, "tune", checks, run.l1)
    assert run.ctx.lockstep.asked == [[True] * 5]  # one collective, one answer per check
    assert list(decided) == [512]
    assert events[0].decided == (512,) and events[0].undecided == (1024, 2048, 4096, 8192)
    run.checks = run.checks.plus(decided.values())
    assert run.invalid() == {1024, 2048, 4096, 8192}
    # and one rank 0 that decides a context this rank would not have: it follows rank 0
    slow = run_of({c: 1.05 for c in CONTEXTS})
    run = _Run(slow, lockstep=_Leader([False, True, False, False, False]))
    assert list(pool_checks(run.ctx, "tune", _checks(run, "tune", slow), run.l1)) == [1024]


def test_lockstep_shares_rank_0s_decisions_in_one_sum(monkeypatch):
    from mlatui.host.distributed import Lockstep, World

    sums = []

    class Follower(Lockstep):
        def __init__(self, rank):
            self.world = World(rank, 2, "ring", ("a", "b"))

        def _sum(self, values, doing, allowance=1.0):
            sums.append((self.world.rank, list(values)))
            return [1, 0, 1]  # what rank 0 contributed

    assert Follower(1).leader_decides_each([False, True, True]) == [True, False, True]
    assert sums == [(1, [0, 0, 0])]  # a follower's own wishes never count
    Follower(0).leader_decides_each([True, False, True])
    assert sums[-1] == (0, [1, 0, 1])
    assert Follower(1).leader_decides_each([]) == [] and len(sums) == 2


@pytest.mark.parametrize("outcome", ["inconclusive", "invalid"])
def test_the_pooled_event_round_trips_through_a_recording_line(outcome):
    from mlatui.stream.recording_schema import decode_event

    e = PooledValidity(
        1.0,
        "sweep",
        (512, 1024),
        12,
        36,
        Interval(1.003, 0.994, 1.011, 36),
        2.0,
        outcome,
        "est",
        "ci",
        (),
        (512,),
    )
    assert decode_event(e.to_json()) == e
    v = Validity(
        2.0,
        "sweep",
        512,
        1.0,
        1.0,
        0.3,
        2.0,
        True,
        "valid",
        Interval(1.003, 0.99, 1.03, 9),
        6,
        Basis.POOLED,
    )
    back = decode_event(v.to_json())
    assert back == v and back.basis is Basis.POOLED and back.pooled
    old = decode_event(v.to_json().replace(',"basis":"pooled"', ""))
    assert old.basis is Basis.OWN  # recordings before schema 5 decided on their own quads


def test_after_more_rounds_an_inconclusive_check_whose_ci_contains_one_is_valid_pooled():
    from mlatui.run.phases.more import _said, pool_after

    by_context = run_of()  # noisy: each context inconclusive alone, its CI around 1.00
    by_context[8192] = quads(6, 0.05, 101, 1 / 1.035)  # its CI lies above 1.00: stays out
    by_context[512] = quads(6, 0.002, 5)  # valid on its own
    run = _Run(by_context)
    sweep_checks = _checks(run, "sweep", by_context)
    tune_512 = next(v for v in _checks(run, "tune", {512: by_context[512]}))
    tune_8192 = next(v for v in _checks(run, "tune", {8192: by_context[8192]}))
    redecided = pool_after(run.ctx, "more", [*sweep_checks, tune_512, tune_8192], run.l1)
    got = {(v.phase, v.context): (v.verdict, v.basis) for v in redecided}
    assert got[("sweep", 512)] == got[("tune", 512)] == ("valid", Basis.OWN)  # kept as it was
    for c in (1024, 2048, 4096):
        assert got[("sweep", c)] == ("valid", Basis.POOLED)
    assert got[("sweep", 8192)] == ("inconclusive", Basis.OWN)
    pooled = next(e for e in run.events if isinstance(e, PooledValidity))
    assert pooled.phase == "more" and pooled.valid
    assert pooled.undecided == (8192,)  # once, though the sweep's and the tune's check it
    emitted = [e for e in run.events if isinstance(e, Validity)]
    assert sorted(e.context for e in emitted) == [1024, 2048, 4096]  # each pooled one, emitted
    assert _said([512, 1024, 8192, 16384], redecided) == (
        "valid at 512; valid (pooled) at 1024; inconclusive at 8192; no ratio at 16384"
    )  # the phase's summary: each context as the rounds and the pooled check left it


def test_a_budgets_last_rounds_go_on_while_the_check_on_every_quad_is_undecided(monkeypatch):
    """The sampler stops once its own pair of rounds decides; at a budget's end the rounds go on
    while the check on all the quads measured at the context (the phase's and every run's of the
    end) still reads inconclusive, and stop once it decides."""
    from types import SimpleNamespace

    from mlatui.config.phase_kind import Pass
    from mlatui.measure.plans import more_phase, plan_for
    from mlatui.run.phases import more as more_module
    from mlatui.run.phases.base import StepSite

    noisy = quads(6, 0.15, 3)  # the phase's own: inconclusive
    run = _Run({512: noisy, 1024: quads(6, 0.05, 4)})
    assert own(noisy)[1] is Outcome.INCONCLUSIVE
    calls = []

    def sampler(ctx, site, plan, progress, interim, deadline):  # a pair of steady rounds
        calls.append(deadline)
        return SimpleNamespace(timings=quads(2, 0.0005, len(calls)))

    monkeypatch.setattr(more_module, "sample_steps", sampler)
    rounds = more_module.MoreRounds(run.ctx, Pass.AB, 1, run.l1)
    import msgspec

    end_phase = msgspec.structs.replace(more_phase("more", 512, 2), max_rounds=64)  # as the end's
    plan = plan_for(end_phase, (1,), 0, 512)
    site = StepSite("more", 512, [])
    rounds._rounds_at(site, plan, None, None)  # `+`: the rounds asked for, once
    assert len(calls) == 1
    calls.clear()
    rounds.l1 = run.l1
    rounds._rounds_at(site, plan, None, run.ctx.now() + 3600)  # a budget's end
    assert len(calls) > 1  # each pair alone reads valid, all of them did not yet
    ratio = rounds.l1.pooled_ratio(512, run.ctx.seed)
    assert control_outcome(ratio, 2.0) is Outcome.VALID  # it stopped once they decided
    rounds.l1 = run.l1
    calls.clear()
    rounds._rounds_at(site, plan, None, run.ctx.now() - 1)  # past the end: one run, no more
    assert len(calls) == 1
    # a check that never decides: runs until the end's rounds at the context are spent
    monkeypatch.setattr(
        more_module,
        "sample_steps",
        lambda *a, **k: (calls.append(1), SimpleNamespace(timings=quads(2, 0.3, len(calls))))[1],
    )
    calls.clear()
    capped = plan_for(msgspec.structs.replace(end_phase, max_rounds=8), (1,), 0, 512)
    rounds._rounds_at(site, capped, None, run.ctx.now() + 3600)
    assert len(calls) == 4  # 8 rounds in pairs, then no more however far the deadline
