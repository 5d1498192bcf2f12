"""The engine's indexer phase on the arms' own model: the embedded model and a tiny random-weight
GLM-5.3-Flash-style model built from the shipped scenario's config, a model with no sparse layer,
and the dashboard keeping the phase's figures apart from the sweep's."""

from __future__ import annotations

import json
import threading
import time
import tomllib
from pathlib import Path

import mlx.core as mx
import pytest

import mlatui.run.phases.indexer
from mlatui.config.run_plan import RunConfig
from mlatui.measure.estimates import Outcome
from mlatui.measure.sampler import round_schedule
from mlatui.models.indexer import Indexer
from mlatui.run.phases.indexer import parity_tolerance
from mlatui.stream.event_base import Interval
from mlatui.stream.events import Estimate, LogMessage, PhaseStart, PhaseSummary, Step, Validity
from mlatui.stream.phase_rows import EstimateRow, Quantity
from mlatui.views.dashboard_state import DashboardState
from mlatui.views.key_figure import key_figure
from mlatui.views.summary import summarize
from mlatui.views.verdict_strip import verdict_line
from tests import summaries
from tests.engine_run import run

ROOT = Path(__file__).resolve().parents[1]
OUTCOMES = {o.value for o in Outcome}
CONTROL_QUADS = 3
PHASES = """
[[phase]]
name = "sweep"
kind = "sweep"
contexts = [{context}]
widths = [1, 2]
reps = 3
warmup = 1
max_rounds = 4

[[phase]]
name = "indexer"
kind = "indexer"
contexts = [{context}]
widths = [1, 2, 4]
reps = 3
warmup = 1
max_rounds = 4
"""


def _value(v) -> str:
    return json.dumps(v) if not isinstance(v, bool) else str(v).lower()


def embedded_scenario(tmp: Path, context: int = 320) -> Path:
    path = tmp / "embedded-indexer.toml"
    head = 'name = "emb-ix"\ndescription = "test"\n[model]\nsource = "embedded"\n'
    path.write_text(head + '[draft]\nsource = "none"\n' + PHASES.format(context=context))
    return path


def glm5_scenario(tmp: Path, context: int = 96) -> Path:
    """The shipped GLM-5.3-Flash scenario's config (MLA 512/256/256, no RoPE, pool 4, bf16),
    shrunk in width, depth and top-k so the CPU runs it in seconds."""
    shipped = tomllib.loads((ROOT / "scenarios" / "glm53-flash-sparse.toml").read_text())
    config = dict(shipped["model"]["config"])
    config.update(
        vocab_size=512,
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=2,
        q_lora_rank=96,
        sparse_layers=[0, 1],
        index_n_heads=4,
        index_head_dim=32,
        index_topk=64,
        max_position_embeddings=4096,
    )
    lines = ['name = "glm5-tiny"', 'description = "test"', "[model]", 'source = "random"']
    lines += [f'family = "{shipped["model"]["family"]}"', f'dtype = "{shipped["model"]["dtype"]}"']
    lines += ["[model.config]", *(f"{k} = {_value(v)}" for k, v in config.items())]
    lines += ["[draft]", 'source = "synthetic"', "acceptance = 0.7"]
    path = tmp / "glm5-tiny.toml"
    path.write_text("\n".join(lines) + "\n" + PHASES.format(context=context))
    return path


def _run(config: RunConfig) -> tuple[str, list]:
    events: list = []
    status = run(config, events.append)
    return status, events


@pytest.fixture(scope="module")
def embedded_run(tmp_path_factory):
    path = embedded_scenario(tmp_path_factory.mktemp("emb"))
    return _run(RunConfig(scenario=str(path), budget_s=0))


@pytest.fixture(scope="module")
def glm5_run(tmp_path_factory):
    path = glm5_scenario(tmp_path_factory.mktemp("glm5"))
    threads: list[tuple[str, str]] = []
    original = mlatui.run.phases.indexer.step

    def step(site, arm, part, width):
        threads.append((arm.name, threading.current_thread().name))
        return original(site, arm, part, width)

    mp = pytest.MonkeyPatch()
    mp.setattr(mlatui.run.phases.indexer, "step", step)
    try:
        status, events = _run(
            RunConfig(scenario=str(path), random_weights=True, budget_s=0, shared_arm_thread=False)
        )
    finally:
        mp.undo()
    return status, events, threads


def _summary(events, kind="indexer") -> PhaseSummary:
    return next(e for e in events if isinstance(e, PhaseSummary) and e.kind == kind)


def _rows(events, part):
    return {(r.width, r.arm): r for r in _summary(events).rows if r.part == part}


@pytest.mark.parametrize("which", ["embedded", "glm5"])
def test_the_phase_runs_the_sparse_path_of_the_loaded_model(which, embedded_run, glm5_run):
    status, events = (embedded_run if which == "embedded" else glm5_run)[:2]
    assert status == "completed", [e for e in events if e.type == "error"]
    layer = "layers.4.self_attn" if which == "embedded" else "layers.0.self_attn"
    timing = [e.message for e in events if isinstance(e, LogMessage) and "timing" in e.message]
    assert timing and layer in timing[0]
    for part in ("indexer", "sparse-layer"):
        rows = _rows(events, part)
        assert {r.layer for r in rows.values()} == {layer}
        for w in (2, 4):  # stock re-pools the whole cache at S > 1; patched only the tail
            assert rows[(w, "stock")].pool_rebuilds == rows[(w, "stock")].n > 0
            assert rows[(w, "stock")].pool_reuses == 0
            assert rows[(w, "patched")].pool_rebuilds == 0
            assert rows[(w, "patched")].pool_reuses == rows[(w, "patched")].n
        for arm in ("stock", "patched"):  # S = 1 reuses the pool in both arms
            assert rows[(1, arm)].pool_rebuilds == 0 < rows[(1, arm)].pool_reuses
    layer_steps = [e for e in events if isinstance(e, Step) and e.phase == "indexer:layer"]
    wide = {
        arm: [s for s in layer_steps if s.arm == arm and s.width > 1]
        for arm in ("stock", "patched")
    }
    assert all(s.materialised_calls == 1 and s.absorbed_calls == 0 for s in wide["stock"])
    assert all(s.absorbed_calls == 1 and s.materialised_calls == 0 for s in wide["patched"])
    index_steps = [e for e in events if isinstance(e, Step) and e.phase == "indexer:indexer"]
    assert index_steps and all(s.absorbed_calls + s.materialised_calls == 0 for s in index_steps)


@pytest.mark.parametrize("which", ["embedded", "glm5"])
def test_stock_and_patched_outputs_agree(which, embedded_run, glm5_run):
    events = (embedded_run if which == "embedded" else glm5_run)[1]
    # float32 on the embedded model, bfloat16 as the GLM-5.3-Flash scenario runs
    tol = parity_tolerance(mx.float32 if which == "embedded" else mx.bfloat16)
    assert tol == (64 * 2.0**-23 if which == "embedded" else 64 * 2.0**-7)
    for (w, _), r in _rows(events, "indexer").items():
        assert r.selection_agreement == 1.0, w  # the same windows: the same tokens chosen
    layer = _rows(events, "sparse-layer")
    for (w, _), r in layer.items():
        assert 0 <= r.parity_max_abs <= tol, (w, r.parity_max_abs)
    assert layer[(1, "stock")].parity_max_abs == 0.0  # L = 1: the identical branch
    assert not [e for e in events if isinstance(e, LogMessage) and "agree" in e.message]


def test_the_phase_samples_in_rounds_on_the_arms_own_threads(glm5_run):
    _, events, threads = glm5_run
    assert {(arm, name) for arm, name in threads} == {
        ("stock", "mlatui-arm-stock"),
        ("patched", "mlatui-arm-patched"),
    }
    start = next(e for e in events if isinstance(e, PhaseStart) and e.kind == "indexer")
    steps = [e for e in events if isinstance(e, Step) and e.phase.startswith("indexer:")]
    assert start.planned_steps > 0 and len(steps) >= start.planned_steps
    for name in ("indexer:indexer", "indexer:layer"):
        ests = [e for e in events if isinstance(e, Estimate) and e.phase == name]
        assert ests[-1].final and [e.rounds for e in ests[:-1]] == list(
            range(1, ests[-1].rounds + 1)
        )
        mine = [s for s in steps if s.phase == name]
        for r in range(ests[-1].rounds):  # each round is its A B B A schedule, in order
            got = [(s.width, s.arm) for s in mine if s.rep == r]
            assert got == round_schedule((1, 2, 4), r, ("stock", "patched"), 1, CONTROL_QUADS)
    checks = [e for e in events if isinstance(e, Validity) and e.phase == "indexer"]
    assert len(checks) == 1 and checks[0].outcome in OUTCOMES


def test_the_indexer_check_never_leaves_out_a_sweep_context(monkeypatch, tmp_path):
    """An injected S = 1 slowdown of the stock indexer: its check is invalid, the run's
    invalid contexts (the sweep's) do not name the context for it."""
    original = Indexer.__call__

    def slow(self, x, qr, cache=None, valid=None):
        if (
            self.mode == "stock"
            and x.shape[1] == 1
            and threading.current_thread().name != "mlatui-arm-prefill"
        ):
            time.sleep(0.004)
        return original(self, x, qr, cache, valid)

    monkeypatch.setattr(Indexer, "__call__", slow)
    path = embedded_scenario(tmp_path)
    status, events = _run(
        RunConfig(scenario=str(path), budget_s=0, overrides={"only_phases": ["indexer"]})
    )
    assert status == "completed"
    check = next(e for e in events if isinstance(e, Validity))
    assert check.phase == "indexer" and check.outcome == "invalid" and check.ratio.low > 1.02
    assert events[-1].invalid_contexts == ()
    assert _summary(events).verdict == "no valid context; 320: excluded (S=1 check invalid)"


def test_a_model_without_a_sparse_layer_skips_the_phase(tmp_path):
    tiny = (ROOT / "tests" / "fixtures" / "tiny.toml").read_text()
    path = tmp_path / "tiny-indexer.toml"
    path.write_text(
        tiny
        + PHASES.format(context=128).split("[[phase]]", 2)[0]
        + "[[phase]]"
        + PHASES.format(context=128).split("[[phase]]", 2)[2]
    )
    status, events = _run(
        RunConfig(
            scenario=str(path),
            random_weights=True,
            budget_s=0,
            overrides={"only_phases": ["indexer"]},
        )
    )
    assert status == "completed"
    warnings = [e.message for e in events if isinstance(e, LogMessage) and e.level == "warning"]
    header_at = next(i for i, e in enumerate(events) if e.type == "header")
    load = next(
        i
        for i, e in enumerate(events)
        if isinstance(e, LogMessage) and "no sparse layer" in e.message
    )
    assert load > header_at and not any(e.type == "phase_start" for e in events[:load])
    assert any("indexer: skipped" in w for w in warnings)
    summary = _summary(events)
    assert summary.rows == () and summary.verdict.startswith("skipped: ")
    assert not [e for e in events if isinstance(e, Step)]


# The dashboard ------------------------------------------------------------------------------


def _sweep_figures(state):
    s = summarize(state)
    return [p.sweep for p in s.phases if p.sweep], s.marginal


def _without_indexer(events):
    return [e for e in events if not getattr(e, "phase", "").startswith("indexer")]


def test_the_dashboard_keeps_a_real_runs_indexer_figures_apart(embedded_run):
    _, events = embedded_run
    full, sweep_only = DashboardState(), DashboardState()
    full.apply_all(events)
    sweep_only.apply_all(_without_indexer(events))
    assert full.contexts() == sweep_only.contexts() == [320]  # the same context in both phases
    assert full.sweep_ms == sweep_only.sweep_ms
    assert _sweep_figures(full) == _sweep_figures(sweep_only)
    assert key_figure(full) == key_figure(sweep_only)
    assert full.validity == sweep_only.validity
    for arm in ("stock", "patched"):
        a, b = full.arms[arm], sweep_only.arms[arm]
        assert (a.absorbed_calls, a.materialised_calls) == (b.absorbed_calls, b.materialised_calls)
    assert any("indexer S=1 check at 320" in line for _, _, line in full.log)
    md = summaries.markdown(full)
    assert "## Phase indexer (indexer)" in md and "layers.4.self_attn" in md


def _synthetic(indexer_outcome: str) -> list:
    """A sweep valid at 8192 and an indexer phase at 8192 whose S = 1 check is not valid."""
    from tests.ui_events import header

    def est(phase, rows):
        return Estimate(1.0, phase, 8192, 4, True, "valid", tuple(rows), 0, {})

    def row(q, arm, w, m):
        return EstimateRow(quantity=Quantity(q), arm=arm, width=w, median=m, low=m, high=m, n=4)

    events = [header(), PhaseStart(0.0, "sweep", "sweep", 0, 2, 8, (8192,))]
    for arm, one, two in (("stock", 10.0, 30.0), ("patched", 10.0, 11.0)):
        events += [
            Step(0.1, "sweep", arm, 8192, 1, 0, one),
            Step(0.2, "sweep", arm, 8192, 2, 0, two),
        ]
    sweep_rows = [
        row("step_ms", a, w, m)
        for a, w, m in (
            ("stock", 1, 10.0),
            ("stock", 2, 30.0),
            ("patched", 1, 10.0),
            ("patched", 2, 11.0),
        )
    ]
    sweep_rows += [row("marginal_ms", "stock", 2, 20.0), row("marginal_ms", "patched", 2, 1.0)]
    events += [est("sweep", sweep_rows)]
    events += [
        Validity(
            1.1,
            "sweep",
            8192,
            10.0,
            10.0,
            0.1,
            2.0,
            True,
            "valid",
            Interval(1.001, 0.995, 1.006, 4),
            4,
        )
    ]
    events += [PhaseStart(2.0, "indexer", "indexer", 1, 2, 8, (8192,))]
    for arm in ("stock", "patched"):
        events += [
            Step(2.1, "indexer:indexer", arm, 8192, 1, 0, 0.5),
            Step(2.2, "indexer:indexer", arm, 8192, 2, 0, 900.0),
        ]
    events += [
        est(
            "indexer:indexer",
            [row("step_ms", "stock", 2, 900.0), row("marginal_ms", "stock", 2, 899.5)],
        )
    ]
    events += [
        Validity(
            2.3,
            "indexer",
            8192,
            0.6,
            0.5,
            20.0,
            2.0,
            False,
            indexer_outcome,
            Interval(1.2, 1.1, 1.3, 4),
            4,
        )
    ]
    return events


@pytest.mark.parametrize("outcome", ["invalid", "inconclusive"])
def test_indexer_timings_stay_out_of_the_sweep_table_key_figure_and_verdict(outcome):
    events = _synthetic(outcome)
    full, sweep_only = DashboardState(), DashboardState()
    full.apply_all(events)
    sweep_only.apply_all(_without_indexer(events))
    assert verdict_line(full) == verdict_line(sweep_only) == "Δ2 @ 8K: 20.0 vs 1.00 ms · L=1 ✓ 1/1"
    assert key_figure(full) == key_figure(sweep_only)
    assert _sweep_figures(full) == _sweep_figures(sweep_only)
    assert full.marginal("stock") == [(8192, 20.0)]
    assert full.sweep_ms == sweep_only.sweep_ms
    assert not full.is_invalid(8192) and not full.sweep_invalid(8192)
    md = summaries.markdown(full)
    assert "Left out of verdicts" not in md and "900" not in md.split("## Phase indexer")[0]
    said = [line for _, _, line in full.log if "S=1 check at 8192" in line]
    assert len(said) == 1 and outcome in said[0] and "the indexer's figures only" in said[0]


def test_an_aa_run_gives_both_slots_the_same_pooling(tmp_path):
    path = glm5_scenario(tmp_path)
    config = RunConfig(
        scenario=str(path),
        random_weights=True,
        budget_s=0,
        null=True,
        overrides={"only_phases": ["indexer"]},
    )
    status, events = _run(config)
    assert status == "completed"
    summaries = {e.phase: e for e in events if isinstance(e, PhaseSummary)}
    assert set(summaries) == {"indexer/aa-stock", "indexer/aa-patched"}
    for name, summary in summaries.items():
        wide = [r for r in summary.rows if r.width > 1]
        for arm in ("stock", "patched"):  # the slot named "patched" runs the pass's variant
            mine = [r for r in wide if r.arm == arm]
            if name.endswith("aa-stock"):
                assert all(r.pool_rebuilds == r.n and r.pool_reuses == 0 for r in mine)
            else:
                assert all(r.pool_rebuilds == 0 and r.pool_reuses == r.n for r in mine)
