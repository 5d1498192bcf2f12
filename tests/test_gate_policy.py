"""The one threshold policy: one parser for every source of a threshold, one policy object per
run that every gated layer (dense and sparse, both arms, drafts) holds, and "calibrated"
resolved from the calibration store in one place."""

from __future__ import annotations

import json
from pathlib import Path

import mlx.core as mx
import pytest
from mlx_lm.models.cache import make_prompt_cache
from test_null import branches_at, sparse_model

import mlatui.run.engine
from mlatui import store as calibration
from mlatui.config.arm_settings import IndexerMode, Threshold, ThresholdKind
from mlatui.config.run_plan import RunConfig
from mlatui.config.scenario import ScenarioError, load_scenario
from mlatui.errors import UserError
from mlatui.gate import mla
from mlatui.gate.mla import BranchCounters
from mlatui.gate.policy import (
    STOCK_GATES,
    STOCK_POLICY,
    CalibratedPolicy,
    Geometry,
)
from mlatui.measure.records import environment
from mlatui.run.arms import Gates, Variant, build_arms, gate_model, sparse_layers
from tests.engine_run import run

TINY = Path(__file__).parent / "fixtures" / "tiny.toml"


@pytest.mark.parametrize(
    ("value", "kind", "text"),
    [
        ("formula", ThresholdKind.FORMULA, "formula"),
        (" calibrated ", ThresholdKind.CALIBRATED, "calibrated"),
        ("stock", ThresholdKind.STOCK, "stock"),
        ("pre-fix", ThresholdKind.STOCK, "stock"),
        ("installed", ThresholdKind.INSTALLED, "installed"),
        ("fixed 8", ThresholdKind.FIXED, "8"),
        ("fixed:3", ThresholdKind.FIXED, "3"),
        (4, ThresholdKind.FIXED, "4"),
        ("12", ThresholdKind.FIXED, "12"),
    ],
)
def test_the_one_parser_reads_words_and_positive_integers(value, kind, text):
    t = Threshold.parse(value)
    assert t.kind is kind and str(t) == text
    assert Threshold.parse(str(t)) == t  # what a run records parses back to the same setting


@pytest.mark.parametrize("value", [0, -3, "0", "fast", True, 1.5, None, "4.0"])
def test_the_one_parser_rejects_everything_else(value):
    with pytest.raises(
        ValueError, match="use installed, pre-fix, formula, calibrated, compiled or an integer >= 1"
    ):
        Threshold.parse(value)


def test_cli_scenario_and_runconfig_share_the_parser(tmp_path, monkeypatch):
    from mlatui.commands.argtypes import gate_settings

    args = type("A", (), {"threshold": "7", "indexer": None, "null": False, "fill": None})
    assert gate_settings(args)["threshold"] == "7"
    args.threshold = "seven"
    with pytest.raises(UserError, match="threshold .seven.: use installed"):
        gate_settings(args)
    scenario = tmp_path / "s.toml"
    scenario.write_text(TINY.read_text().replace('name = "tiny"', 'name = "tiny"\nthreshold = 0'))
    with pytest.raises(
        ScenarioError,
        match="threshold: expected installed, pre-fix, formula, calibrated, compiled or an integer >= 1 .* got 0",
    ):
        load_scenario(str(scenario))
    scenario.write_text(
        TINY.read_text().replace('name = "tiny"', 'name = "tiny"\nthreshold = "calibrated"')
    )
    assert load_scenario(str(scenario)).threshold == "calibrated"


def test_engine_builds_one_gates_from_cli_else_scenario(tmp_path, monkeypatch):
    """`launch`, `bench SCENARIO` and the child engine all reach `engine.run`: the CLI's
    threshold wins over the scenario's, and the arms get the one Gates built there."""
    seen: list[Gates] = []

    def capture(model, gates, *args, **kwargs):
        seen.append(gates)
        raise RuntimeError("stop after building the arms")

    monkeypatch.setattr(mlatui.run.engine, "build_arms", capture)
    scenario = tmp_path / "s.toml"
    scenario.write_text(
        TINY.read_text().replace('name = "tiny"', 'name = "tiny"\nthreshold = "stock"')
    )
    for cli, want in ((None, "stock"), ("5", "fixed:5")):
        events: list = []
        config = RunConfig(scenario=str(scenario), random_weights=True, threshold=cli)
        assert run(config, events.append) == "error"
        assert seen[-1].policy.name == want
    assert seen[-1].indexer is IndexerMode.PATCHED


def _dense_policies(model) -> list:
    return [m.__dict__["_mlatui_gate_state"].policy for _, m in mla.mla_modules(model)]


def test_one_policy_object_in_every_gated_layer_of_both_arms():
    gates = Gates.parse(4)
    a, b = build_arms(sparse_model(), gates, (Variant.PATCHED, Variant.PATCHED))
    for arm in (a, b):
        layers = [
            *_dense_policies(arm.model),
            *(m.gate_policy for _, m in sparse_layers(arm.model)),
        ]
        assert len(layers) == 2 and all(p is gates.policy for p in layers)
    stock, _ = build_arms(sparse_model(), gates)
    assert all(p is STOCK_POLICY for p in _dense_policies(stock.model))
    assert sparse_layers(stock.model)[0][1].gate_policy is STOCK_POLICY
    assert sparse_layers(stock.model)[0][1].indexer_mode is IndexerMode.STOCK


def test_stock_variant_is_stock_whatever_the_gates():
    assert Gates.parse(9, "patched").for_variant(Variant.STOCK) is STOCK_GATES
    g = Gates.parse("formula")
    assert g.for_variant(Variant.PATCHED) is g


def _sparse_branches(arm, ids: list[int], width: int) -> tuple[dict, dict]:
    """(absorbed, materialised) of the sparse layer alone for one step of `width` tokens."""
    layer = sparse_layers(arm.model)[0][1]
    counters = BranchCounters()
    layer.counters = counters
    cache = make_prompt_cache(arm.model)
    arm.model(mx.array([ids]), cache=cache)
    counters.reset()
    mx.eval(arm.model(mx.array([ids[:width]]), cache=cache))
    layer.counters = arm.counters
    assert cache[4].index.pool_length == len(ids) + width  # the sparse path ran
    return dict(counters.absorbed), dict(counters.materialised)


@pytest.fixture(scope="module")
def embedded_model():
    from mlatui.models.embedded import load_embedded

    model, tok, _ = load_embedded(draft=False)
    mx.eval(model.parameters())
    assert sorted(model.model.sparse_layers) == [4]
    # top-k 32, not its 256: 72 tokens select as 296 did, each prefill a quarter as long
    model.layers[4].self_attn.indexer.index_topk = topk = 32
    return model, [(7 * i) % 4000 + 10 for i in range(topk + 40)]


def test_aa_threshold_one_gives_identical_sparse_branches_on_the_embedded_model(embedded_model):
    model, ids = embedded_model
    stock, one = build_arms(model, Gates.parse(1))
    _, formula = build_arms(model, Gates.parse("formula"))
    for width in (2, 3):
        assert _sparse_branches(stock, ids, width) == ({}, {width: 1})
        assert _sparse_branches(one, ids, width) == _sparse_branches(stock, ids, width)
        # the control: the formula really absorbs here, so the comparison above has teeth
        assert _sparse_branches(formula, ids, width) == ({width: 1}, {})


def test_an_explicit_threshold_reaches_dense_and_sparse_layers_alike():
    _, four = build_arms(sparse_model(), Gates.parse(4))
    assert branches_at(four, 4) == ({4: 2}, {})  # both layers absorb at L = 4
    assert branches_at(four, 5) == ({}, {5: 2})  # and both materialise at L = 5


def test_calibrated_reads_the_store_once_per_geometry_for_every_layer(monkeypatch):
    reads: list[str] = []

    def store(geometry: Geometry):
        reads.append(geometry.key)
        return {8: 2}  # measured: absorbed only up to L = 2 from T = 8

    monkeypatch.setattr("mlatui.gate.policy.stored_crossovers", store)
    gates = Gates.parse("calibrated")
    assert isinstance(gates.policy, CalibratedPolicy)
    a, b = build_arms(sparse_model(), gates, (Variant.PATCHED, Variant.PATCHED))
    assert reads == ["r512-n128-v128"]  # 2 arms x (dense + sparse), one read
    assert a.report.policy == "calibrated" and a.report.threshold == 2
    assert branches_at(b, 2) == ({2: 2}, {})  # the formula would absorb L = 3 too (limit 170)
    assert branches_at(b, 3) == ({}, {3: 2})


def test_calibrated_without_a_stored_entry_falls_back_to_the_formula(tmp_path, monkeypatch):
    monkeypatch.setenv(calibration.CACHE_ENV, str(tmp_path))
    with pytest.warns(UserWarning, match="no usable calibration stored for r512-n128-v128"):
        _, arm = build_arms(sparse_model(), Gates.parse("calibrated"))
    assert arm.report.policy == "formula" and arm.report.threshold == 170
    assert branches_at(arm, 5) == ({5: 2}, {})


def test_calibrated_from_a_real_store_file(tmp_path, monkeypatch):
    monkeypatch.setenv(calibration.CACHE_ENV, str(tmp_path))
    g = Geometry(512, 128, 128, 2)
    calibration.save_crossovers(g, {8: 3, 64: 1}, "mlatui_mla", environment())
    assert json.loads(calibration.calibration_path().read_text())[g.key]["crossovers"] == {
        "8": 3,
        "64": 1,
    }
    model = sparse_model()
    report = gate_model(model, Variant.PATCHED, Gates.parse("calibrated"))
    assert report.policy == "calibrated" and report.threshold == 1  # T -> inf: the largest T
    cache = make_prompt_cache(model)
    model(mx.arange(30)[None] % 128, cache=cache)  # T = 30 + L: the T = 8 entry applies
    report.counters.reset()
    mx.eval(model(mx.arange(3)[None], cache=cache))
    assert dict(report.counters.absorbed) == {3: 2} and not report.counters.materialised
    mx.eval(model(mx.arange(4)[None], cache=cache))
    assert dict(report.counters.materialised) == {4: 2}
