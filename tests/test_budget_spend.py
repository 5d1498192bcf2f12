"""A budget spends what is left on what is undecided: with injected timing (a fake clock and a
fake attempt), undecided L = 1 checks get more rounds while the time left pays for them, the
tune's rounds of blocks grow with what is still left, and the run ends with its forecast's
error."""

from dataclasses import replace
from pathlib import Path

import pytest

from mlatui.config.scenario import load_scenario
from mlatui.measure.progress import RunProgress
from mlatui.run import budget_spend, budget_watch
from mlatui.run.budget_spend import extra_check_phase
from mlatui.run.budget_watch import BudgetWatch
from mlatui.run.phases.results import Checks, L1Quads, PassResults
from mlatui.stream.events import BudgetOutcome, BudgetPlanned, LogMessage, Validity
from mlatui.stream.interval import Interval

DEFAULT = Path(__file__).parent.parent / "scenarios" / "default.toml"
KINDS = ("mtp", "draft-model")


class FakeCtx:
    """What the watch reads of a RunContext, on a clock the test moves."""

    lockstep = None

    def __init__(self) -> None:
        self.t = 0.0
        self.events: list = []
        self.emit = self.events.append

    def now(self) -> float:
        return self.t

    def leader_decides_each(self, wants: list[bool]) -> list[bool]:
        return list(wants)


def _costs() -> RunProgress:
    costs = RunProgress()
    costs.draft_kinds = KINDS
    for c in (512, 2048):
        for w in (1, 2, 3):
            costs.costs.add_step("stock", c, w, 20.0 if w == 1 else 20.0 + 0.05 * c)
            costs.costs.add_step("patched", c, w, 20.0 + 5.0 * (w - 1))
        costs.prefill.append((c, c / 1000))
    return costs


def _check(phase: str, context: int, outcome: str = "inconclusive") -> Validity:
    ok = outcome == "valid"
    return Validity(
        1.0, phase, context, 20.0, 20.1, 0.5, 2.0, ok, outcome, Interval(1.005, 0.97, 1.03, 8), 8
    )


def _watch(ctx: FakeCtx, budget_s: float, predicted_s: float = 50.0) -> BudgetWatch:
    phases = load_scenario(str(DEFAULT)).phases
    plan = BudgetPlanned(
        0.0, budget_s, 80.0, predicted_s, (), tuple(p.to_dict() for p in phases), (512,), 1.0
    )
    watch = BudgetWatch(plan, _costs(), KINDS)
    ctx.emit = watch.tee(ctx.events.append)
    return watch


def _run_checks(checks) -> Checks:
    """The run's checks as its phases returned them (the default scenario's kinds)."""
    kinds = [(p.name, p.kind) for p in load_scenario(str(DEFAULT)).phases]
    return Checks().plus(checks, kinds)


def _attempts(monkeypatch, ctx: FakeCtx, needs_s: dict) -> list:
    """The device side of an attempt, faked: pairs of rounds until the check is decided, which
    takes `needs_s[context]` seconds (absent: never), or until its deadline."""
    calls = []

    def attempt(c, checks, n, deadline_s, l1):
        assert len({v.context for v in checks}) == 1
        check = checks[0]
        calls.append((tuple(v.phase for v in checks), check.context, deadline_s))
        need = needs_s.get(check.context)
        decided = need is not None and c.t + need <= deadline_s
        c.t = c.t + need if decided else max(c.t, deadline_s)
        if decided:
            return [replace(v, outcome="valid", valid=True, t=c.t) for v in checks], L1Quads()
        return list(checks), L1Quads()

    monkeypatch.setattr(budget_watch, "more_l1_rounds", attempt)
    return calls


def test_undecided_checks_get_the_time_left_beside_the_phases_still_to_run(monkeypatch):
    ctx = FakeCtx()
    watch = _watch(ctx, budget_s=100.0)
    checks = (_check("sweep", 512), _check("sweep", 2048), _check("sweep", 1024, "valid"))
    checks = _run_checks((*checks, _check("tune", 2048)))
    ctx.t = 40.0
    assert 0 < watch.forecast_s((extra_check_phase(2048),)) < 10
    calls = _attempts(monkeypatch, ctx, {2048: 5.0})
    tune = tuple(p for p in load_scenario(str(DEFAULT)).phases if p.kind == "tune")
    rest = tuple(replace(p, reps=4) for p in tune)  # the tune still to run, at 2048
    deadline_s = 100.0 - budget_watch.FORECAST_MARGIN * watch.forecast_s(rest)
    _, decided = watch.spend(ctx, L1Quads(), checks, rest)
    after = {(v.phase, v.context): v for v in checks.plus(decided).latest}
    # the context the tune reads its check at goes first (every phase's check there at once:
    # they read the same quads), until it is decided; then the next, until the time is up
    both = ("sweep", "tune")
    assert [c[:2] for c in calls] == [(both, 2048), (("sweep",), 512)]
    # their deadline leaves the tune its forecast time, with the margin
    assert [c[2] for c in calls] == pytest.approx([deadline_s, deadline_s])
    assert after[("sweep", 2048)].verdict == after[("tune", 2048)].verdict == "valid"
    assert after[("sweep", 1024)].verdict == "valid"  # a decided check is not measured
    # it ends with an undecided check only when the time beside the tune's forecast is spent
    assert [v.context for v in watch.undecided(checks.plus(decided))] == [512]
    assert watch.left_s(ctx, rest) == pytest.approx(0.0, abs=1e-6)
    assert watch.extra_s == pytest.approx(ctx.t - 40.0)
    assert ctx.t + watch.forecast_s(rest) * budget_watch.FORECAST_MARGIN <= 100.0 + 1e-6


def test_no_time_left_means_no_attempt(monkeypatch):
    ctx = FakeCtx()
    watch = _watch(ctx, budget_s=100.0)
    checks = _run_checks((_check("tune", 2048),))
    calls = _attempts(monkeypatch, ctx, {})
    ctx.t = 99.0
    watch.spend(ctx, L1Quads(), checks)
    assert calls == []
    ctx.t = 10.0
    watch.spend(ctx, L1Quads(), checks)  # one attempt per context and call, until its deadline
    assert len(calls) == 1 and calls[0][2] == pytest.approx(100.0)


def _grown_at_30_s():
    """The default scenario's tune at 4 rounds, grown 30 s into a 1000 s budget."""
    ctx = FakeCtx()
    watch = _watch(ctx, budget_s=1000.0)
    phases = load_scenario(str(DEFAULT)).phases
    phases = (phases[0], replace(phases[1], reps=4))
    ctx.t = 30.0
    return ctx, watch, phases, watch.grow(ctx, phases, 1).phases


def test_the_time_still_left_grows_the_tunes_rounds_and_is_said(monkeypatch):
    ctx, watch, phases, out = _grown_at_30_s()
    assert out[1].reps == budget_watch.GROW_ROUNDS and out[0] == phases[0]
    said = [e for e in ctx.events if isinstance(e, LogMessage)]
    assert said and f"tune: rounds of blocks 4 -> {budget_watch.GROW_ROUNDS}" in said[-1].message
    plan = next(e for e in reversed(ctx.events) if isinstance(e, BudgetPlanned))
    assert plan.phases[1]["reps"] == budget_watch.GROW_ROUNDS
    # with only the tune's own time left, nothing grows
    tight = FakeCtx()
    watch = _watch(tight, budget_s=30.0 + 1.16 * watch.forecast_s(phases[1:]))
    tight.t = 30.0
    assert watch.grow(tight, phases, 1).phases == phases


def test_the_run_ends_with_the_forecasts_error_and_what_is_still_undecided(monkeypatch):
    ctx = FakeCtx()
    watch = _watch(ctx, budget_s=100.0, predicted_s=50.0)
    done = PassResults(checks=_run_checks((_check("sweep", 512),)))
    calls = _attempts(monkeypatch, ctx, {})
    ctx.t = 60.0  # the planned phases took 60 s where 50 were forecast
    out, decided = watch.finish(ctx, done)
    assert [v.verdict for v in decided] == ["inconclusive"]  # measured, still undecided
    assert calls and isinstance(out, BudgetOutcome) and ctx.events[-1] == out
    assert out.extra_s == pytest.approx(40.0)  # what was left, to the budget's end
    assert out.planned_s == pytest.approx(60.0)
    assert out.took_s == pytest.approx(60.0 + out.extra_s) and out.took_s <= 100.0
    assert out.error_pct == pytest.approx((50 - 60) / 60 * 100)
    assert out.undecided == ("sweep @ 512",)
    said = next(e for e in ctx.events if isinstance(e, LogMessage) and "forecast" in e.message)
    assert (
        "(forecast error -17%)" in said.message and "still undecided: sweep @ 512" in said.message
    )


def test_the_engine_spends_what_is_left_on_a_real_undecided_check(tmp_path, monkeypatch):
    """The tiny model's sweep, its checks held undecided (the sampler's and the pooled check's
    rule says inconclusive): after the last phase the budget's time goes to more L = 1 rounds at
    each context, decided again on the real rule over every round measured there."""
    import mlatui.measure.estimates as estimates
    import mlatui.measure.pooled as pooled
    import mlatui.measure.sampler as sampler
    from mlatui.config.runconfig import RunConfig
    from mlatui.measure.estimates import Outcome
    from mlatui.stream.events import RunEnd, Step
    from tests.engine_run import run

    undecided = lambda ratio, tolerance_pct: Outcome.INCONCLUSIVE  # noqa: E731
    for module in (estimates, pooled, sampler):
        monkeypatch.setattr(module, "control_outcome", undecided)
    monkeypatch.setattr(budget_spend, "MAX_EXTRA_ROUNDS", 2)
    tiny = Path(__file__).parent / "fixtures" / "tiny.toml"
    scenario = tmp_path / "tiny-budget.toml"
    text = tiny.read_text().replace("contexts = [128, 256]", "contexts = [128]")
    scenario.write_text(text.replace("seed = 0", "seed = 0\nbudget_s = 100000", 1))
    events: list = []
    config = RunConfig(
        scenario=str(scenario),
        random_weights=True,
        overrides={"reps": 2, "only_phases": ["sweep"]},
    )
    assert run(config, events.append) == "completed"
    summary = next(i for i, e in enumerate(events) if e.type == "phase_summary")
    extra = [e for e in events[summary:] if isinstance(e, Step)]
    assert extra and {e.phase for e in extra} == {"sweep:l1"} and {e.width for e in extra} == {1}
    assert {e.context for e in extra} == {128}
    said = [
        e.message
        for e in events
        if isinstance(e, LogMessage) and "more rounds of L = 1" in e.message
    ]
    assert len(said) == 1 and "sweep @ 128" in said[0]
    again = [e for e in events[summary:] if isinstance(e, Validity)]
    assert all(v.rounds > 2 and v.verdict in ("valid", "invalid") for v in again)
    outcome = next(e for e in events if isinstance(e, BudgetOutcome))
    assert outcome.extra_s > 0 and isinstance(events[-1], RunEnd)
    assert set(outcome.undecided) == {"sweep @ 128"} - {f"sweep @ {v.context}" for v in again}


def test_a_sweeps_added_rounds_count_as_spent_on_what_was_undecided():
    """The sampler's rounds past a sweep's planned ones (an undecided check, on a drifting
    device) are no plan's forecast: the forecast error is taken on the planned rounds."""
    from mlatui.stream.events import Step

    ctx = FakeCtx()
    watch = _watch(ctx, 100.0)
    reps = next(p["reps"] for p in watch.planned.phases if p["name"] == "sweep")
    t = 0.0
    for rep in range(reps + 3):  # three rounds past the plan, each 2 s
        for arm in ("stock", "patched"):
            t += 1.0
            ctx.emit(Step(t, "sweep", arm, 512, 1, rep, 20.0))
    assert watch.extra_s == pytest.approx(6.0)
    ctx.emit(Step(t + 5.0, "tune-not-planned", "stock", 512, 1, 99, 20.0))
    assert watch.extra_s == pytest.approx(6.0)
    ctx.t = t
    outcome, _ = watch.finish(ctx, PassResults())
    assert outcome.planned_s == pytest.approx(t - 6.0)


def test_rounds_a_budget_added_stop_at_its_deadline_and_the_planned_ones_run():
    """The grown tune carries a deadline (its forecast can run short, as a GPU's sampled blocks
    did: 107 s on a 100 s budget); the sampler keeps the planned rounds, then stops adding pairs."""
    from mlatui.measure.sampler import until_after

    ctx = FakeCtx()
    watch = _watch(ctx, 1000.0)
    phases = load_scenario(str(DEFAULT)).phases
    grown = dict(watch.grow(ctx, phases, 1).grown)
    keep, deadline_s = grown["tune"].keep_rounds, grown["tune"].deadline_s
    assert keep == phases[1].reps and 0 < deadline_s < 1000.0

    clock = {"t": 0.0}
    more = until_after(lambda wants: wants, lambda: clock["t"], keep_rounds=4, deadline=10.0)
    asked = []
    for rnd in range(1, 13):
        clock["t"] = 3.0 * rnd  # past the deadline from the 4th round on
        asked.append(more(True))
    assert asked[:3] == [True, True, True]  # the planned rounds run whatever the clock
    assert asked[3] is False  # no new pair once past the deadline
    late = until_after(lambda wants: wants, lambda: 99.0, keep_rounds=2, deadline=10.0)
    assert [late(True) for _ in range(2)] == [True, False]  # a pair always completes
    # a pair of 4 s: the one that would end past the deadline does not start
    clock["t"] = 0.0
    paced = until_after(lambda wants: wants, lambda: clock["t"], keep_rounds=2, deadline=10.0)
    answers = []
    for rnd in range(1, 9):
        clock["t"] = 2.0 * rnd
        answers.append(paced(True))
    assert answers[:3] == [True, True, True]  # at 4 s, the pair to 8 s fits
    assert answers[3] is False  # at 8 s, a pair would end at 12 s


def test_a_grown_tunes_added_rounds_count_as_measured_not_as_forecast():
    """The rounds a budget added to the tune are spent on its CIs: their time as the blocks took
    it (a GPU ran them 25% slower than forecast), so the first plan's forecast error is taken on
    the rounds it planned, whatever the added ones cost."""
    from mlatui.stream.events import DecodeBlock

    ctx, watch, phases, out = _grown_at_30_s()
    assert out[1].reps > 4 and watch.extra_s == 0.0  # nothing spent before it is measured
    t = 30.0
    for rnd in range(10):  # rounds 4..9 were added; each takes 3 s (two blocks of 1.5 s)
        for arm in ("stock", "patched"):
            t += 1.5
            ctx.emit(DecodeBlock(t, "tune", arm, 2048, 1, rnd, 16, 1500.0))
    assert watch.extra_s == pytest.approx(6 * 3.0)
    ctx.t = t
    outcome, _ = watch.finish(ctx, PassResults())
    assert outcome.planned_s == pytest.approx(t - 18.0)
