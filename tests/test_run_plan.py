"""The run plan: every setting resolved once from the flags and the scenario, before anything
loads; `bench --plan` and `launch --plan` print it without loading a model; the header keeps it."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest
from tiny_scenario import TINY

from mlatui.config.run_plan import PlanRecord, RunConfig, RunPlan, resolve_plan
from mlatui.config.scenario import ScenarioError

ROOT = Path(__file__).resolve().parent.parent


def _scenario(tmp_path: Path) -> Path:
    """tiny.toml with a value of its own for the settings a flag can override."""
    text = TINY.read_text()
    head, phases = text.split("[[phase]]", 1)  # tiny's own phases: sweep and tune
    extra = 'threshold = "8"\nindexer = "stock"\nbudget_s = 12\n'
    head = head.replace("seed = 0\n", "seed = 7\n", 1)
    path = tmp_path / "settings.toml"
    path.write_text(extra + head + "[[phase]]" + phases)
    return path


def test_the_scenarios_values_hold_where_no_flag_is_given(tmp_path):
    plan = resolve_plan(RunConfig(scenario=str(_scenario(tmp_path))))
    assert plan.arms.threshold == "8" and plan.arms.indexer == "stock"
    assert plan.budget_s == 12.0 and plan.seed == 7 and plan.seed_offset == 0
    assert plan.fill == "prefill" and not plan.null
    assert [p.name for p in plan.phases] == ["sweep", "tune"]


def test_flags_override_the_scenario_exactly_once(tmp_path):
    config = RunConfig(
        scenario=str(_scenario(tmp_path)),
        threshold="formula",
        indexer="patched",
        budget_s=0,  # a flag of 0 wins over the scenario's 12: no budget
        seed=3,
        null=True,
        overrides={"reps": 5, "contexts": [256], "only_phases": ["tune"]},
    )
    plan = resolve_plan(config)
    assert plan.arms.threshold == "formula" and plan.arms.indexer == "patched"
    assert plan.budget_s == 0.0 and not plan.budgeted
    assert plan.seed == 10 and plan.seed_offset == 3 and plan.null
    assert [(p.name, p.reps, p.contexts) for p in plan.phases] == [("tune", 5, (256,))]
    # resolving is idempotent: the plan's phases are the overridden ones, applied once
    assert plan.recorded().overrides == {"contexts": [256], "only_phases": ["tune"], "reps": 5}


def test_a_patch_review_pools_alike_in_both_arms_unless_asked(tmp_path):
    review = RunConfig(scenario=str(TINY), arm_sources={"patched": str(tmp_path)})
    assert resolve_plan(review).arms.indexer == "stock"
    assert resolve_plan(review).arms.review
    asked = dataclasses.replace(review, indexer="patched")
    assert resolve_plan(asked).arms.indexer == "patched"


def test_the_same_inputs_give_an_equal_plan(tmp_path):
    path = _scenario(tmp_path)
    config = RunConfig(scenario=str(path), overrides={"reps": 4, "widths": [1, 2]}, seed=2)
    a, b = resolve_plan(config), resolve_plan(RunConfig.from_json(config.to_json()))
    assert a == b
    said = msgspec.json.encode(a.recorded())
    assert said == msgspec.json.encode(b.recorded())
    assert msgspec.json.encode(msgspec.json.decode(said, type=PlanRecord)) == said
    assert a != resolve_plan(dataclasses.replace(config, seed=3))


def test_a_replan_is_a_new_value_and_the_old_one_stays(tmp_path):
    plan = resolve_plan(RunConfig(scenario=str(_scenario(tmp_path))))
    before = plan.recorded()
    cut = tuple(
        msgspec.structs.replace(p, reps=3, contexts=p.contexts[:1]) for p in plan.phases[:1]
    )
    replanned = plan.with_phases(cut)
    assert isinstance(replanned, RunPlan) and replanned is not plan
    assert replanned.phases == cut and len(plan.phases) == 2
    assert plan.recorded() == before
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.budget_s = 1.0  # type: ignore[misc]


def test_an_unknown_phase_is_refused_once_with_the_phases_named():
    with pytest.raises(ScenarioError, match=r"no phase named bogus \(phases: sweep, tune\)"):
        resolve_plan(RunConfig(scenario=str(TINY), overrides={"only_phases": ["bogus"]}))


def test_bench_plan_prints_the_plan_and_loads_no_model(monkeypatch, capsys):
    from mlatui.cli import main
    from mlatui.models import loading
    from mlatui.run import engine

    def no_load(*args, **kwargs):
        raise AssertionError("--plan loaded a model")

    # the engine took load_target by name: patched in both, a load anywhere fails the test
    monkeypatch.setattr(loading, "load_target", no_load)
    monkeypatch.setattr(engine, "load_target", no_load)
    assert main(["bench", str(TINY), "--plan", "--reps", "5", "--budget", "30"]) == 0
    out = capsys.readouterr().out
    assert "scenario  tiny" in out and "budget    30 s" in out
    assert "sweep" in out and "reps 5" in out
    assert main(["bench", str(TINY), "--plan", "--format", "json", "--seed", "4"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["seed"] == 4 and got["phases"][0]["contexts"] == [128, 256]


def test_bench_plan_imports_no_mlx_and_writes_no_recording(tmp_path):
    """In a process of its own: the plan is printed before mlx is imported, and no output
    file is claimed."""
    out = tmp_path / "run.jsonl"
    code = (
        "import sys\nfrom mlatui.cli import main\n"
        f"rc = main(['bench', {str(TINY)!r}, '--plan', '--out', {str(out)!r}])\n"
        "assert 'mlx.core' not in sys.modules, 'mlx imported'\nsys.exit(rc)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert "scenario  tiny" in done.stdout and not out.exists()


def test_bad_input_with_plan_is_still_the_one_line_error(capsys):
    from mlatui.cli import main

    assert main(["bench", str(TINY), "--plan", "--phases", "bogus"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no phase named bogus" in err[0]


def test_launch_plan_prints_without_opening_the_dashboard(capsys):
    from mlatui.cli import main

    assert main(["launch", "--plan", "--scenario", str(TINY), "--arms", "pre-fix,formula"]) == 0
    out = capsys.readouterr().out
    assert "arms      stock,formula" in out and "scenario  tiny" in out


def test_the_engine_runs_the_plan_it_is_given_and_the_header_keeps_it(monkeypatch):
    """A plan handed to the engine is not resolved again (the scenario is not re-read), and the
    header's settings keep it beside every field they had."""
    import mlatui.config.run_plan as run_plan
    import mlatui.run.engine as engine
    from mlatui.run.phases.base import Stopped

    plan = resolve_plan(
        RunConfig(scenario=str(TINY), random_weights=True, seed=2, overrides={"reps": 4})
    )

    def no_read(*args, **kwargs):
        raise AssertionError("the scenario was read again")

    def stop_after_header(*args, **kwargs):
        raise Stopped()

    monkeypatch.setattr(run_plan, "load_scenario", no_read)
    monkeypatch.setattr(engine, "RunContext", stop_after_header)
    events: list = []
    assert engine.run(plan, events.append) == "interrupted"
    h = next(e for e in events if e.type == "header")
    assert h.settings.plan == plan.recorded()
    assert h.settings.seed == 2 and h.settings.overrides == {"reps": 4}
    written = json.loads(h.to_json())["settings"]
    assert {"threshold", "indexer", "null", "passes", "fill", "settle", "arms"} <= set(written)
    assert [p.reps for p in h.scenario.phases] == [4, 4]


def test_launch_resolves_the_plan_once_and_its_source_hands_that_plan_to_the_engine(
    monkeypatch, tmp_path
):
    """`launch` resolves the plan before the screen opens; the in-process source runs that very
    value (the engine does not resolve the request again)."""
    import threading
    from types import SimpleNamespace

    import mlatui.config.run_plan as run_plan
    from mlatui.commands.argtypes import resolve_request
    from mlatui.stream.sources import LiveSource

    calls: list[RunConfig] = []
    real = run_plan.resolve_plan

    def counted(config, scenario=None):
        calls.append(config)
        return real(config, scenario)

    monkeypatch.setattr(run_plan, "resolve_plan", counted)
    monkeypatch.setattr("mlatui.commands.argtypes.gate_settings", lambda args: {})
    args = SimpleNamespace(
        scenario=str(TINY),
        model=None,
        draft_model=None,
        record=None,
        random_weights=True,
        budget=0,
        force=False,
    )
    _config, plan = resolve_request(args, record=args.record)
    seen: list = []
    done = threading.Event()

    def engine(request, emit, stop) -> str:
        seen.append(request)
        done.set()
        return "completed"

    source = LiveSource(plan, engine=engine, record=tmp_path / "run.jsonl")
    source.start()
    assert done.wait(10)
    source.stop()
    assert len(calls) == 1 and seen == [plan] and seen[0] is plan
