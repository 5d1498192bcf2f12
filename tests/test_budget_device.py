"""The budget on the device at hand: a probe that times the device rather than the compiler, and
contexts picked from the scenario's story on the probe's costs (a CPU-like and a GPU-like table
pick different ones), bounded by the model's positions."""

from dataclasses import replace
from pathlib import Path

import pytest
from msgspec import structs

from mlatui.config.scenario import ScenarioError, load_scenario
from mlatui.measure.progress import RunProgress
from mlatui.run.budget import Limits, choose_contexts, fit_to_budget, longest_context, with_contexts
from mlatui.run.budget_probe import ProbeDevice, run_probe

DEFAULT = Path(__file__).parent.parent / "scenarios" / "default.toml"
KINDS = ("mtp", "draft-model")


class FakeDevice:
    """A device on a fake clock: every shape's first use costs `compile_s` more (a GPU compiling
    its kernels), a step costs `ms(arm, width)`, a prefill `prefill_s_per_token` per token."""

    def __init__(self, compile_s: float, ms, prefill_s_per_token: float = 1e-4, per_context=True):
        self.now, self.compile_s, self.ms = 0.0, compile_s, ms
        self.per_context = per_context  # False: a kernel compiles once, whatever the context
        self.per_token = prefill_s_per_token
        self.seen: set = set()
        self.context = 0

    def _first(self, shape) -> float:
        shape = shape if self.per_context else shape[:-1]
        if shape in self.seen:
            return 0.0
        self.seen.add(shape)
        return self.compile_s

    def prefill(self, context: int) -> int:
        self.context = context
        self.now += self._first(("prefill", context)) + self.per_token * context
        return context

    def step(self, arm: str, width: int) -> float:
        ms = self.ms(arm, width, self.context) + 1e3 * self._first((arm, width, self.context))
        self.now += ms / 1e3
        return ms

    def device(self, logs=None) -> ProbeDevice:
        return ProbeDevice(
            self.prefill,
            self.step,
            clock=lambda: self.now,
            log=(logs if logs is not None else []).append,
        )


def _gpu_ms(arm: str, width: int, context: int) -> float:
    """The H200's embedded-model steps: ~3.3 ms of fixed cost; the stock arm's wide steps grow
    with the cache (re-expanding it), the patched arm's stay flat."""
    if width == 1:
        return 3.3
    return 3.3 + (0.00037 * context if arm == "stock" else 1.5)


def _cpu_ms(arm: str, width: int, context: int) -> float:
    """The 2-core CPU's (the demo recording's sweep): L = 1 grows with the cache too."""
    one = 16.0 + 0.008 * context
    if width == 1:
        return one
    return one + (max(5.0, 0.062 * context - 14.0) if arm == "stock" else 0.25 * one)


def test_a_probe_whose_first_call_is_slow_forecasts_from_the_later_calls():
    fake = FakeDevice(compile_s=5.0, ms=_gpu_ms)
    got = run_probe(fake.device(), (256, 1024), (1, 2, 3), KINDS)
    assert got.lengths == (256, 1024) and got.compiles
    # every step's cost is its warm cost, never the compile's
    assert got.costs.costs.step("stock", 256, 1) == pytest.approx(3.3)
    assert got.costs.costs.step("patched", 1024, 2) == pytest.approx(4.8)
    # the prefill is the second, warm one, plus the first use expected again at each new
    # context: the 1024-token length compiled its prefill and its 6 step shapes again
    prefill = dict(got.costs.costs.prefill)
    assert prefill[256] == pytest.approx(0.0256 + 7 * 5.0)
    # the first uses are a one-off said apart: 2 prefills and 6 step shapes per length
    assert got.first_use_s == pytest.approx(2 * 5.0 + 12 * 5.0)
    # on a device that does not compile, no second prefill and no first-use cost
    plain = FakeDevice(compile_s=0.0, ms=_gpu_ms)
    quiet = run_probe(plain.device(), (256, 1024), (1, 2), KINDS)
    assert not quiet.compiles and quiet.first_use_s == 0.0
    assert dict(quiet.costs.costs.prefill)[1024] == pytest.approx(0.1024)


def test_the_probe_cut_for_the_budget_does_not_count_the_compiler():
    """The H200's 256-token probe took 28 s, nearly all first use, and the 1024-token length
    was left out ('would take ~112 s'); its warm cost says it takes a fraction of a second."""
    logs: list[str] = []
    fake = FakeDevice(compile_s=4.0, ms=_gpu_ms, per_context=False)
    got = run_probe(fake.device(logs), (256, 1024, 4096), (1, 2, 3), KINDS, budget_s=100)
    assert got.lengths == (256, 1024, 4096), logs
    # a slow device (the CPU's costs at 10x) still leaves the longest out, and says so
    slow = FakeDevice(0.0, lambda a, w, c: 10 * _cpu_ms(a, w, c), prefill_s_per_token=2e-3)
    cut = run_probe(slow.device(logs), (256, 1024, 4096), (1, 2, 3), KINDS, budget_s=100)
    assert cut.lengths[-1] < 4096 and any("tokens left out" in m for m in logs)


def _table(ms, lengths=(256, 1024, 4096, 16384, 32768)) -> RunProgress:
    costs = RunProgress()
    costs.draft_kinds = KINDS
    for c in lengths:
        for w in (1, 2, 3):
            for arm in ("stock", "patched"):
                costs.costs.add_step(arm, c, w, ms(arm, w, c))
        costs.costs.prefill.append((c, 1e-4 * c))
    return costs


class Chosen:
    """The contexts `choose_contexts` put the default scenario's sweep and tune at, its note."""

    def __init__(self, phases, note: str):
        sweep, tune = phases
        self.sweep_contexts, self.tune_context, self.note = sweep.contexts, tune.contexts[0], note


def _choose(costs: RunProgress, limits: Limits, budget_s: float = 1e9) -> Chosen:
    scenario = load_scenario(str(DEFAULT))
    assert scenario.story is not None

    def fits(phases):
        plan = fit_to_budget(phases, budget_s, costs.forecast_s, KINDS)
        sweeps = [p.contexts for p in plan.phases if p.kind == "sweep"]
        return plan.fits and sweeps == [p.contexts for p in phases if p.kind == "sweep"]

    story = scenario.story
    return Chosen(*choose_contexts(scenario.phases, story, costs.costs.step, fits, limits))


def test_a_cpu_and_a_gpu_pick_different_contexts_for_the_same_story():
    long_model = Limits(max_positions=65536, trained_window=65536)
    cpu = _choose(_table(_cpu_ms), long_model)
    gpu = _choose(_table(_gpu_ms), long_model)
    # the CPU: stock's L = 2 step is 4x its L = 1 step from 2K (1K reads 3x)
    assert cpu.tune_context == 2048
    # the GPU's plain step is fixed cost: only at 32K does the stock arm's reach 4x
    assert gpu.tune_context == 32768
    assert gpu.sweep_contexts == (8192, 16384, 24576, 32768)  # the 4 largest the story has
    assert "32768" in gpu.note and "smallest context where both hold" in gpu.note
    # the CPU's sweep: as long as the budget allows, here all of it (an unlimited budget)
    assert 2048 in cpu.sweep_contexts and len(cpu.sweep_contexts) == 4


def test_the_budget_decides_how_far_the_sweep_reaches():
    costs = _table(_cpu_ms)
    long_model = Limits(max_positions=65536)
    scenario = load_scenario(str(DEFAULT))
    tune_only = with_contexts(scenario.phases, 2048, (512, 1024, 2048))
    budget = 1.2 * costs.forecast_s(tune_only)  # room for a sweep up to about 2K, not 32K
    chosen = _choose(costs, long_model, budget)
    assert chosen.tune_context == 2048
    assert max(chosen.sweep_contexts) < 32768 and 2048 in chosen.sweep_contexts
    assert "would not fit the budget" in chosen.note


def test_no_context_beyond_the_models_positions_and_the_tune_inside_its_windows():
    """The embedded model: 8192 positions, trained on 4096-token windows. On a GPU nothing it
    allows shows a 4x stock multiple: the tune takes the best allowed and the note says so."""
    embedded = Limits(max_positions=8192, trained_window=4096)
    gpu = _choose(_table(_gpu_ms), embedded)
    assert max(gpu.sweep_contexts) <= 4096  # 8192 + the widest step is past 8192 positions
    assert gpu.tune_context == 2048  # 4096 + a block is past the trained windows
    assert "weak on this device" in gpu.note and "max positions (8192)" in gpu.note
    scenario = load_scenario(str(DEFAULT))
    assert longest_context(scenario.story, scenario.phases, embedded) == 4096
    assert longest_context(None, scenario.phases, embedded) is None


def test_a_story_table_is_checked(tmp_path):
    text = DEFAULT.read_text()
    bad = tmp_path / "bad.toml"
    bad.write_text(text.replace("sweep_contexts = 4", "sweep_contexts = 1"))
    with pytest.raises(ScenarioError, match="sweep_contexts"):
        load_scenario(str(bad))
    bad.write_text(text.replace("stock_verify_multiple = 4.0", "stock_verify_multiple = 0.5"))
    with pytest.raises(ScenarioError, match="stock_verify_multiple"):
        load_scenario(str(bad))
    bad.write_text(text.replace("[story]", "[story]\nspeed = 1"))
    with pytest.raises(ScenarioError, match="unknown key 'speed'"):
        load_scenario(str(bad))
    plain = structs.replace(load_scenario(str(DEFAULT)), story=None)
    assert plain.record().story is None


def test_the_engine_runs_the_contexts_the_story_picked_and_says_why(tmp_path, monkeypatch):
    """The tiny model (4096 positions) with a story whose longest context is past them: the
    sweep runs at the story's largest allowed contexts, the note says which and why, and is
    recorded in the plan."""
    from mlatui.config.run_plan import RunConfig
    from mlatui.run import budget
    from mlatui.stream.events import BudgetPlanned, LogMessage, PhaseStart
    from tests.engine_run import run

    monkeypatch.setattr(budget, "GROW_ROUNDS", 4)  # a huge budget: its slices end no round
    tiny = Path(__file__).parent / "fixtures" / "tiny.toml"
    story = (
        "\n[story]\ncontexts = [64, 128, 192, 256, 8192]\nstock_verify_multiple = 1.0\n"
        "patched_verify_flat = 100.0\nsweep_contexts = 2\n"
    )
    text = tiny.read_text().replace("seed = 0", "seed = 0\nbudget_s = 100000" + story, 1)
    scenario = tmp_path / "tiny-story.toml"
    scenario.write_text(text)
    events: list = []
    config = RunConfig(
        scenario=str(scenario),
        random_weights=True,
        overrides={"reps": 2, "only_phases": ["sweep"]},
    )
    assert run(config, events.append) == "completed"
    plan = next(e for e in events if isinstance(e, BudgetPlanned))
    sweep = next(e for e in events if isinstance(e, PhaseStart))
    assert sweep.contexts == (192, 256) and plan.phases[0].contexts == (192, 256)
    assert plan.probe_contexts == (128, 256)  # the probe's ladder reaches the longest allowed
    assert "sweep 192, 256" in plan.contexts_note
    assert "max positions (4096)" in plan.contexts_note
    said = [e.message for e in events if isinstance(e, LogMessage)]
    assert plan.contexts_note in said
    assert not any(getattr(e, "context", 0) > 4096 for e in events)


def test_a_device_that_compiles_once_forecasts_the_scenario_as_one_that_does_not():
    """The bar's test: the first call of every shape is slow (a simulated compile, 4 s each);
    the forecast of the default scenario is the warm device's, to the millisecond."""
    phases = load_scenario(str(DEFAULT)).phases
    lengths, widths = (256, 1024), (1, 2, 3)
    compiling = run_probe(
        FakeDevice(4.0, _gpu_ms, per_context=False).device(), lengths, widths, KINDS
    )
    warm = run_probe(FakeDevice(0.0, _gpu_ms).device(), lengths, widths, KINDS)
    assert compiling.first_use_s > 20 and warm.first_use_s == 0.0
    assert compiling.costs.forecast_s(phases) == pytest.approx(warm.costs.forecast_s(phases))


def test_the_limits_are_the_models_positions_and_the_tightest_window():
    from types import SimpleNamespace

    from mlatui.models.embedded import trained_window
    from mlatui.run.budget_probe import model_limits

    def with_positions(n):
        return SimpleNamespace(args=SimpleNamespace(max_position_embeddings=n))

    arm = SimpleNamespace(
        model=with_positions(8192),
        model_name="embedded",
        drafts={"mtp": object(), "draft-model": SimpleNamespace(model=with_positions(2048))},
    )
    ctx = SimpleNamespace(workers={"stock": SimpleNamespace(arm=arm)})
    assert model_limits(ctx) == Limits(8192, 2048)  # the draft model's 2048 positions
    arm.drafts = {}
    assert model_limits(ctx) == Limits(8192, trained_window())
    arm.model_name, arm.model = "random", object()
    assert model_limits(ctx) == Limits(None, None)


def test_a_probe_read_through_a_drift_does_not_pick_the_tune():
    """A wide step read cheaper than its L = 1 step is the host's drift: not a multiple."""
    noisy = _table(lambda a, w, c: 50.0 if w == 1 else 20.0)
    chosen = _choose(noisy, Limits(max_positions=8192, trained_window=4096))
    assert chosen.tune_context == 2048 and "the host drifted" in chosen.note


def test_the_probe_warms_the_decode_blocks_once_on_a_device_that_compiles():
    """The tune's first blocks compile the sampler, MTP head and draft kernels (~20 s on a cold
    H200, inside the tune, where no forecast had it): the probe runs them at its first length,
    on a device that compiles, and counts their first use with the other one-offs."""
    calls: list[int] = []

    def warm() -> float:
        calls.append(fake.context)
        return 7.0

    fake = FakeDevice(compile_s=5.0, ms=_gpu_ms)
    device = replace(fake.device(), warm_decode=warm)
    got = run_probe(device, (256, 1024), (1, 2, 3), KINDS)
    assert calls == [256]  # once, at the first length
    assert got.first_use_s == pytest.approx(7.0 + 2 * 5.0 + 12 * 5.0)
    cold = FakeDevice(compile_s=0.0, ms=_gpu_ms)
    run_probe(replace(cold.device(), warm_decode=warm), (256, 1024), (1, 2), KINDS)
    assert calls == [256]  # a device that does not compile pays no warm blocks


def test_the_engines_probe_runs_every_decode_setting_on_the_real_arms(tmp_path, monkeypatch):
    """The tiny model, a device told it compiles: the probe's warm blocks run each setting of
    the tune (plain, draft at depths 1 and 2) through the runtime's own loops, and the run then
    goes on to its tune from the prefilled context it opens there."""
    import sys

    import mlatui.measure.estimates as estimates
    import mlatui.run.engine  # noqa: F401  (every phase module, so each holder is found)
    from mlatui.config.run_plan import RunConfig
    from mlatui.measure.estimates import Outcome
    from mlatui.run import budget, budget_probe
    from mlatui.stream.events import DecodeBlock
    from tests.engine_run import run

    monkeypatch.setattr(budget_probe, "COMPILE_FLOOR_S", -1e9)  # every first prefill compiles
    monkeypatch.setattr(budget, "GROW_ROUNDS", 4)
    # the blocks grow where the L = 1 check so far reads decided: here, as the tiny model's may
    # not. Every module that took the rule by name: one left out (the verify steps' estimates,
    # the budget's last rounds) decides the check by this host's timings, and an invalid one
    # ends the run "invalid"
    decides = estimates.control_outcome
    for module in [
        m for m in list(sys.modules.values()) if getattr(m, "control_outcome", None) is decides
    ]:
        monkeypatch.setattr(module, "control_outcome", lambda ratio, tolerance_pct: Outcome.VALID)
    ran: list[tuple[int, str]] = []
    real = budget_probe.run_block

    def spy(a, s, setting, n, sampling, seed):
        ran.append((setting.depth, setting.kind))
        return real(a, s, setting, n, sampling, seed)

    monkeypatch.setattr(budget_probe, "run_block", spy)
    tiny = Path(__file__).parent / "fixtures" / "tiny.toml"
    scenario = tmp_path / "tiny-warm.toml"
    scenario.write_text(tiny.read_text().replace("seed = 0", "seed = 0\nbudget_s = 100000", 1))
    events: list = []
    config = RunConfig(
        scenario=str(scenario), random_weights=True, overrides={"reps": 2, "only_phases": ["tune"]}
    )
    assert run(config, events.append) == "completed"
    assert sorted(set(ran)) == [(0, ""), (1, "synthetic"), (2, "synthetic")] and len(ran) == 6
    # the huge budget's slice lets the blocks grow past their 2 planned rounds, up to 4, where
    # the L = 1 check reads decided
    assert max(e.round for e in events if isinstance(e, DecodeBlock)) == 3


def _reference_ms(arm: str, width: int, context: int) -> float:
    """The bundled reference BLAS: every wide step compute-bound (L = 2 twice L = 1) in both
    arms, so no context shows the story, and the steps ten times the OpenBLAS CPU's."""
    one = 10 * (16.0 + 0.008 * context)
    return one * (1 if width == 1 else width) + (
        0.62 * context * (width > 1) if arm == "stock" else 0
    )


def test_a_slow_device_without_the_story_tunes_where_the_budget_allows_not_at_the_largest():
    """No context shows the story on the reference BLAS; the best multiple is at the largest
    context, 24K, whose sweep would take ten minutes of a 100 s budget. The tune goes to the
    best context that fits (or the smallest), and the sweep is not forced past it."""
    costs = _table(_reference_ms, lengths=(256, 1024, 4096, 16384, 32768))
    limits = Limits(max_positions=32768, trained_window=32768)
    unbounded = _choose(costs, limits)
    assert unbounded.tune_context == 24576  # the best multiple, when time is no object
    chosen = _choose(costs, limits, budget_s=100.0)
    assert chosen.tune_context is not None and chosen.tune_context <= 2048, chosen.note
    assert max(chosen.sweep_contexts) <= 4096, chosen.note


def test_when_nothing_fits_the_sweep_still_shows_the_growth_at_two_contexts():
    """A budget no plan fits (a loaded host's probe): the sweep keeps the two smallest contexts
    from the tune's up, so the key figure still has its slope; the slices then share the time."""
    chosen = _choose(_table(_cpu_ms), Limits(max_positions=65536), budget_s=1.0)
    assert len(chosen.sweep_contexts) == 2 and chosen.tune_context in chosen.sweep_contexts
    # nor where only the tune's own context fits (the loaded 2-core CPU's probe: a sweep at
    # 512 alone, no growth to show)
    for budget_s in (20.0, 100.0, 200.0):
        chosen = _choose(_table(_reference_ms), Limits(65536, 65536), budget_s)
        assert len(chosen.sweep_contexts) >= 2, (budget_s, chosen.note)
