"""The time budget: the plan is scaled down in a fixed order only while the forecast is over,
the changes are said, and the probe's costs give a forecast that grows with the plan."""

import threading
from pathlib import Path

import pytest
from msgspec import structs

from mlatui.config.scenario import load_scenario
from mlatui.measure.progress import RunProgress
from mlatui.run.budget import fit_to_budget, reductions

DEFAULT = Path(__file__).parent.parent / "scenarios" / "default.toml"


def _phases():
    return load_scenario(str(DEFAULT)).phases


def _size(phases) -> float:
    """A stand-in forecast: calls per phase, proportional to what the reductions cut."""
    total = 0.0
    for p in phases:
        if p.kind == "sweep":
            total += sum(p.contexts) / 512 * (p.max_rounds or 3 * p.reps) * len(p.widths)
        else:
            total += len(p.contexts) * (p.max_rounds or 18) * p.tokens
    return total


def test_the_default_scenario_has_a_budget_and_fits_unchanged_when_there_is_time():
    scenario = load_scenario(str(DEFAULT))
    assert scenario.budget_s == 100
    plan = fit_to_budget(scenario.phases, 1e9, _size)
    assert plan.phases == scenario.phases and not plan.changes and plan.fits
    assert "fits" in plan.describe()


def _of(plan, kind):
    return next(p for p in plan if p.kind == kind)


def test_reductions_keep_the_story_and_stop_as_soon_as_the_forecast_fits():
    phases = _phases()
    steps = list(reductions(phases))
    last = steps[-1]
    sweep, tune = _of(last, "sweep"), _of(last, "tune")
    # the smallest plan still has the story: two contexts of the key figure's widths
    assert sweep.contexts == (512, 1024) and sweep.widths == (1, 2)
    assert sweep.reps == 4 and tune.tokens == 8 and tune.depths == (1,)
    assert _phases()[1].reps == 8 and tune.reps == 4  # the tune's rounds: 8 as written, 4 at least
    # the tune at the sweep's smallest context, its verify steps the sweep's rounds there
    assert tune.contexts == (512,) and tune.verify_from == "sweep"
    # until the tune moves there, the sweep keeps the context the tune reads its verify steps
    # from (2K) and the widths its depths need (L = 3 for depth 2), and drops the others
    three = next(p for p in steps if _of(p, "sweep").contexts == (512, 1024, 2048))
    two = next(p for p in steps if _of(p, "sweep").contexts == (512, 2048))
    assert _of(two, "tune").contexts == (2048,) and _of(three, "sweep").widths == (1, 2, 3)
    depth_cut = next(i for i, p in enumerate(steps) if _of(p, "tune").depths == (1,))
    width_cut = next(i for i, p in enumerate(steps) if _of(p, "sweep").widths == (1, 2))
    assert width_cut > depth_cut  # L = 3 kept until then
    sizes = [_size(p) for p in steps]
    assert sizes == sorted(sizes, reverse=True)  # every step is smaller
    # a budget between two steps stops at the first plan that fits, not at the smallest
    plan = fit_to_budget(phases, (sizes[1] + sizes[2]) / 2, _size)
    assert plan.fits and _size(plan.phases) == sizes[2] and plan.phases != last
    # the sweep's fourth context goes before its rounds (the L = 1 check needs them), and so
    # do the tune's 16-token blocks (their length is not what the CIs are made of)
    assert plan.changes == (
        "sweep: contexts 512, 1024, 2048, 4096 -> 512, 1024, 2048",
        "sweep: rounds 7 -> 5",
        "tune: blocks of 16 -> 8 tokens",
    )
    blocks_cut = next(i for i, p in enumerate(steps) if _of(p, "tune").tokens == 8)
    assert blocks_cut < next(i for i, p in enumerate(steps) if _of(p, "sweep").reps == 5)
    assert "scaled down" in plan.describe() and "--budget 0" in plan.describe()


def test_a_budget_that_cannot_be_met_runs_the_smallest_plan_and_says_so():
    plan = fit_to_budget(_phases(), 1.0, _size)
    assert not plan.fits and "still over budget" in plan.describe()
    # each setting's change is said once, from the phases as written to the plan's
    assert sum(c.startswith("sweep: contexts") for c in plan.changes) == 1
    assert "sweep: contexts 512, 1024, 2048, 4096 -> 512, 1024" in plan.changes
    assert sum(c.startswith("tune: contexts") for c in plan.changes) == 1


def test_a_plan_with_nothing_left_to_cut_does_not_say_it_fits():
    """The phases left at a re-plan may already be the smallest plan: over the time left, the
    log says so rather than that they fit."""
    smallest = list(reductions(_phases()))[-1]
    plan = fit_to_budget(smallest, 1.0, _size)
    assert not plan.changes and not plan.fits
    assert "over budget with nothing left to scale down" in plan.describe()
    assert " fits " not in plan.describe()


def test_the_forecast_from_probe_costs_grows_with_context_and_rounds():
    costs = RunProgress()
    for arm in ("stock", "patched"):
        for ctx, l1 in ((256, 10.0), (1024, 14.0)):
            costs.costs.add_step(arm, ctx, 1, l1)
            for w in (2, 3, 4):
                grow = 0.05 * ctx if arm == "stock" else 1.0
                costs.costs.add_step(arm, ctx, w, l1 + grow)
    costs.costs.prefill = [(256, 0.2), (1024, 0.8)]
    phases = _phases()
    full = costs.forecast_s(phases)
    smaller = [costs.forecast_s(p) for p in reductions(phases)]
    assert 0 < smaller[-1] < full and all(s > 0 for s in smaller)
    assert smaller == sorted(smaller, reverse=True)
    no_costs = RunProgress()
    assert no_costs.forecast_s(phases) == float("inf")


def test_a_run_over_its_budget_is_scaled_down_before_the_first_phase_and_says_so(tmp_path):
    """The engine probes, plans and records the plan; the phases that run are the planned ones;
    --budget 0 (budget_s = 0) leaves the scenario alone."""
    from mlatui.config.run_plan import RunConfig
    from mlatui.stream.events import BudgetPlanned, LogMessage, PhaseStart, Step
    from tests.engine_run import run

    tiny = Path(__file__).parent / "fixtures" / "tiny.toml"
    scenario = tmp_path / "tiny-budget.toml"
    text = tiny.read_text().replace("contexts = [128, 256]", "contexts = [128, 256, 384, 512]")
    scenario.write_text(text.replace("seed = 0", "seed = 0\nbudget_s = 1", 1))
    events = []
    status = run(
        RunConfig(scenario=str(scenario), random_weights=True, overrides={"reps": 2}),
        events.append,
    )
    assert status == "completed"
    plan = next(e for e in events if isinstance(e, BudgetPlanned))
    assert plan.budget_s == 1 and plan.changes and plan.predicted_s < plan.full_s
    assert plan.probe_s > 0
    # a 1 s budget cannot afford the longer probe length: one length, and the log says why
    assert plan.probe_contexts == (128,)
    assert any("512 tokens left out" in e.message for e in events if isinstance(e, LogMessage))
    said = [e.message for e in events if isinstance(e, LogMessage) and "budget 1 s" in e.message]
    assert said and "scaled down" in said[0]
    starts = {e.phase: e.contexts for e in events if isinstance(e, PhaseStart)}
    assert starts["sweep"] == (128, 256)  # two contexts kept: the slope stays visible
    planned = {p.name: p.contexts for p in plan.phases}
    assert planned["sweep"] == starts["sweep"]
    first_phase = next(i for i, e in enumerate(events) if isinstance(e, PhaseStart))
    assert events.index(plan) < first_phase
    # the probe took the whole 1 s: every segment's slice has ended, so each runs one pair of
    # rounds (the plan asked for 2, a check undecided after them adds none)
    steps = [e for e in events if isinstance(e, Step)]
    assert steps and max(e.rep for e in steps) == 1
    events = []
    started = threading.Event()  # the phase as it starts is what is read: stopped there

    def until_a_phase_starts(e) -> None:
        events.append(e)
        if isinstance(e, PhaseStart):
            started.set()

    run(
        RunConfig(
            scenario=str(scenario),
            random_weights=True,
            overrides={"reps": 2, "only_phases": ["sweep"]},
            budget_s=0,
        ),
        until_a_phase_starts,
        started,
    )
    assert not any(isinstance(e, BudgetPlanned) for e in events)
    assert next(e for e in events if isinstance(e, PhaseStart)).contexts == (128, 256, 384, 512)


def test_a_budget_that_affords_it_probes_two_lengths(tmp_path, monkeypatch):
    """The probe's second, longer length is what lets the forecast see growth with context; a
    budget far above the probe's cost keeps it. The run ends with its forecast's error."""
    from mlatui.config.run_plan import RunConfig
    from mlatui.run import budget
    from mlatui.stream.events import BudgetOutcome, BudgetPlanned, LogMessage, RunEnd
    from tests.engine_run import run

    monkeypatch.setattr(budget, "GROW_ROUNDS", 4)  # a huge budget: its slices end no round

    tiny = Path(__file__).parent / "fixtures" / "tiny.toml"
    scenario = tmp_path / "tiny-budget.toml"
    scenario.write_text(tiny.read_text().replace("seed = 0", "seed = 0\nbudget_s = 100000", 1))
    events = []
    status = run(
        RunConfig(
            scenario=str(scenario),
            random_weights=True,
            overrides={"reps": 2, "only_phases": ["sweep"]},
        ),
        events.append,
    )
    assert status == "completed"
    plan = next(e for e in events if isinstance(e, BudgetPlanned))
    assert plan.probe_contexts == (128, 256) and not plan.changes
    assert not any("tokens left out" in e.message for e in events if isinstance(e, LogMessage))
    outcome = next(e for e in events if isinstance(e, BudgetOutcome))
    assert isinstance(events[-1], RunEnd)
    assert events.index(outcome) > max(i for i, e in enumerate(events) if e.type == "phase_summary")
    assert outcome.forecast_s == plan.predicted_s and outcome.planned_s > 0
    assert outcome.took_s == pytest.approx(outcome.planned_s + outcome.extra_s)
    assert all(p.max_rounds == 4 for p in plan.phases)  # a budget's rounds end with its slices


KINDS = ("mtp", "draft-model")


def _slow_device() -> RunProgress:
    """What the probe measures on the bundled reference BLAS (~4.4 GFLOP/s): one
    length (256; the longer one would cost too much), the stock arm's wide steps 28x its L = 1
    step because they re-expand the whole cache, the patched arm's a little above its L = 1."""
    costs = RunProgress()
    costs.draft_kinds = KINDS
    for w in (1, 2, 3, 4):
        costs.costs.add_step("stock", 256, w, 19.0 if w == 1 else 540.0)
        costs.costs.add_step("patched", 256, w, 19.0 + 14.0 * (w - 1))
    costs.costs.prefill = [(256, 3.6)]
    return costs


def test_a_slow_device_now_fits_its_90_s_and_keeps_the_story():
    costs = _slow_device()
    phases = _phases()
    # the reductions before the slow-device ones (the rounds cut to 4) are far over: the
    # 4.4 GFLOP/s run took 721 s
    steps = list(reductions(phases, KINDS))
    before = next(p for p in steps if _of(p, "tune").reps == 4)
    assert costs.forecast_s(before) > 200
    plan = fit_to_budget(phases, 90.0, costs.forecast_s, KINDS)
    assert plan.fits, plan.describe()
    sweep = next(p for p in plan.phases if p.kind == "sweep")
    tune = next(p for p in plan.phases if p.kind == "tune")
    assert len(sweep.contexts) >= 2 and {1, 2} <= set(sweep.widths)  # the key figure's slope
    assert len(tune.contexts) == 1 and tune.depths_for("mtp")  # a tune result per arm
    assert "sweep: widths 1, 2, 3 -> 1, 2" in plan.changes


def test_the_forecast_knows_rejected_settings_run_no_blocks(monkeypatch):
    """The stock arm's verify steps on the slow device reject every speculative setting by bound,
    so its blocks cost nothing; forecast as if they ran, the tune costs several times more."""
    import mlatui.measure.progress as forecast
    from mlatui.measure.plans import phase_segments

    costs = _slow_device()
    tune = tuple(p for p in _phases() if p.kind == "tune")
    blocks = [s for s in phase_segments(tune[0], KINDS) if s.tokens]
    expected = costs.costs.expected(blocks[0])
    spec_widths = {w for w, _, depth in blocks[0].settings if depth}
    assert set(expected.skipped) == {("stock", w) for w in spec_widths}  # patched: none
    known = costs.forecast_s(tune)
    # a phase with reject_by_bound = false runs every block: the forecast expects them all
    measured_all = tuple(structs.replace(p, reject_by_bound=False) for p in tune)
    assert costs.costs.expected(structs.replace(blocks[0], bound_rejects=False)).skipped == ()
    everything = costs.forecast_s(measured_all)
    assert everything > 3 * known
    monkeypatch.setattr(forecast, "likely_rejected", lambda *a: False)
    assert costs.forecast_s(tune) == pytest.approx(everything)


def test_the_probe_also_measures_the_context_the_decode_blocks_run_at():
    """A line through 256 and 1K tokens said the embedded model's 4K step costs 23 ms; it costs
    40 (the cache outgrows the CPU's caches), and the 4K tune ran 40% over its forecast. So a tune
    or decode context beyond the two lengths is probed too; one inside them is interpolated."""
    from mlatui.run.budget_probe import probe_contexts

    scenario = load_scenario(str(DEFAULT))
    sweep, tune = scenario.phases
    at = lambda c: structs.replace(scenario, phases=(sweep, structs.replace(tune, contexts=c)))  # noqa: E731
    assert probe_contexts(at((4096,))) == (256, 1024, 4096)
    assert probe_contexts(at((2048, 4096))) == (256, 1024, 2048)
    assert probe_contexts(at((1024,))) == (256, 1024)
    assert probe_contexts(at((512,))) == (256, 1024)
    assert probe_contexts(structs.replace(scenario, phases=(sweep,))) == (256, 1024)


def test_a_sweep_width_cut_stays_cut_in_every_later_plan():
    """Every reduction builds on the plan before it: the sweep's widths cut to what the key
    figure and a `verify_from` tune need (1-3 of 1-4) stay cut in the plans after it."""
    sweep, tune = _phases()
    phases = (structs.replace(sweep, widths=(1, 2, 3, 4)), tune)
    steps = list(reductions(phases, KINDS))
    cut = next(i for i, p in enumerate(steps) if _of(p, "sweep").widths == (1, 2, 3))
    for i, plan in enumerate(steps[cut:]):
        assert set(_of(plan, "sweep").widths) <= {1, 2, 3}, (i, _of(plan, "sweep").widths)
