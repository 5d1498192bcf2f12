"""The arms' gate choices reach every gated layer, dense and sparse, and every draft; an A/A
(null) run gives both slots the same variant; its bias is stored and shown."""

from __future__ import annotations

from pathlib import Path

import mlx.core as mx
import msgspec
import pytest
from mlx_lm.models.cache import make_prompt_cache

from mlatui.config.run_plan import RunConfig
from mlatui.models.mlatui_mla import Model, ModelArgs
from mlatui.run.arms import Gates, Variant, build_arms, sparse_layers
from mlatui.stream.events import Estimate, PhaseSummary, RunHeader, Step, Validity
from mlatui.stream.phase_rows import SweepRow
from mlatui.views.dashboard_state import DashboardState
from tests.engine_run import run

TINY = str(Path(__file__).parent / "fixtures" / "tiny.toml")


def sparse_model() -> Model:
    """The embedded model's shape at test size: real MLA ranks (threshold 170), layer 1 sparse
    with top-k 16 so a 64-token cache really takes the sparse path."""
    args = ModelArgs(
        vocab_size=128,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=2,
        sparse_layers=[1],
        index_n_heads=2,
        index_head_dim=16,
        index_topk=16,
        qk_rope_head_dim=16,
    )
    mx.random.seed(0)
    model = Model(args)
    mx.eval(model.parameters())
    return model


def branches_at(arm, width: int) -> tuple[dict, dict]:
    """One forward of `width` tokens on a 64-token cache: (absorbed, materialised) counts by L."""
    cache = make_prompt_cache(arm.model)
    arm.model(mx.arange(64)[None] % 128, cache=cache)
    arm.counters.reset()
    mx.eval(arm.model(mx.arange(width)[None], cache=cache))
    return dict(arm.counters.absorbed), dict(arm.counters.materialised)


def test_threshold_reaches_the_sparse_layer():
    model = sparse_model()
    _, formula = build_arms(model, Gates.parse("formula"))
    _, four = build_arms(model, Gates.parse(4))
    # formula: 5 <= 170 -> absorbed in both layers (dense and sparse)
    assert branches_at(formula, 5) == ({5: 2}, {})
    # --threshold 4: L = 5 materialises in the sparse layer too, not only the dense one
    assert branches_at(four, 5) == ({}, {5: 2})
    assert branches_at(four, 4) == ({4: 2}, {})
    layer = sparse_layers(four.model)[0][1]
    assert layer.gate_policy.name == "fixed:4"


def test_threshold_one_makes_every_layer_take_the_stock_branch():
    model = sparse_model()
    stock, one = build_arms(model, Gates.parse(1, "stock"))
    for width in (1, 2, 3):
        assert branches_at(stock, width) == branches_at(one, width)
    assert sparse_layers(one.model)[0][1].indexer_mode == "stock"


@pytest.mark.parametrize("variant", [Variant.STOCK, Variant.PATCHED])
def test_null_arms_are_the_same_variant_in_every_layer(variant):
    model = sparse_model()
    a, b = build_arms(model, Gates.parse("formula"), (variant, variant))
    assert (a.name, b.name) == ("stock", "patched")  # the slots keep their names
    assert a.variant is b.variant is variant
    for width in (1, 2, 5):
        assert branches_at(a, width) == branches_at(b, width)
    la, lb = sparse_layers(a.model)[0][1], sparse_layers(b.model)[0][1]
    assert la.indexer_mode == lb.indexer_mode == variant.value
    assert la.mla_gate == lb.mla_gate
    # twins share every weight: no second copy of the model
    assert la.wq_b.weight is lb.wq_b.weight if hasattr(la, "wq_b") else True
    assert a.model.model.embed_tokens.weight is b.model.model.embed_tokens.weight


@pytest.fixture(scope="module")
def null_run(tmp_path_factory):
    cache = tmp_path_factory.mktemp("cache")
    import os

    old = os.environ.get("MLATUI_CACHE_DIR")
    os.environ["MLATUI_CACHE_DIR"] = str(cache)
    try:
        events = []
        config = RunConfig(
            scenario=TINY,
            random_weights=True,
            null=True,
            overrides={"reps": 3, "max_rounds": 4, "warmup": 1, "only_phases": ["sweep"]},
            budget_s=50,
        )
        status = run(config, events.append)
        later = []
        run(
            RunConfig(
                scenario=TINY,
                random_weights=True,
                overrides={
                    "reps": 3,
                    "max_rounds": 4,
                    "warmup": 1,
                    "only_phases": ["sweep"],
                    "contexts": [64],
                },
            ),
            later.append,
        )
    finally:
        if old is None:
            os.environ.pop("MLATUI_CACHE_DIR")
        else:
            os.environ["MLATUI_CACHE_DIR"] = old
    return status, events, later


def test_null_run_has_both_passes_with_identical_branches(null_run):
    status, events, _ = null_run
    assert status == "completed"
    header = next(e for e in events if e.type == "header")
    assert isinstance(header, RunHeader)
    assert header.settings.null is True
    assert header.settings.passes == ("aa-stock", "aa-patched")
    # a budget would plan the first pass alone: an A/A runs the phases as written, and says so
    assert not any(e.type == "budget_planned" for e in events)
    said = [e.message for e in events if e.type == "log"]
    assert any("budget 50 s not applied: an A/A (--null)" in m for m in said), said
    assert header.device.blas_threading  # what OpenBLAS's workers do is part of the run
    summaries = [e for e in events if isinstance(e, PhaseSummary)]
    assert [s.phase for s in summaries] == ["sweep/aa-stock", "sweep/aa-patched"]
    for phase, materialises in (("sweep/aa-stock", True), ("sweep/aa-patched", False)):
        steps = [e for e in events if isinstance(e, Step) and e.phase == phase and e.width >= 2]
        for arm in ("stock", "patched"):
            mine = [s for s in steps if s.arm == arm]
            assert mine and all((s.materialised_calls > 0) == materialises for s in mine)
    finals = [e for e in events if isinstance(e, Estimate) and e.final]
    assert {e.phase for e in finals} == {"sweep/aa-stock", "sweep/aa-patched"}
    # every context of both passes gets its L = 1 check (a context may be checked more than once:
    # how many times depends on how the host's noise leaves the first check, not on the A/A)
    checked = {(e.phase, e.context) for e in events if isinstance(e, Validity)}
    passes = ("sweep/aa-stock", "sweep/aa-patched")
    assert checked == {(phase, context) for phase in passes for context in (128, 256)}


def test_null_run_stores_the_bias_and_the_next_header_shows_it(null_run):
    from mlatui.store import describe_bias as describe

    _, events, later = null_run
    bias = next(e for e in later if e.type == "header").settings.harness_bias
    assert bias is not None
    finals = [e for e in events if isinstance(e, Estimate) and e.final]
    ratios = [(r, e) for e in finals for r in e.rows if r.quantity == "ratio"]
    at_l1 = max(abs(r.median - 1) * 100 for r, _ in ratios if r.width == 1)
    worst = max(abs(r.median - 1) * 100 for r, _ in ratios)
    assert bias.max_abs_bias_pct == pytest.approx(at_l1)  # the headline: the L = 1 control
    assert abs(bias.worst.bias_pct) == pytest.approx(worst)  # kept beside it
    assert bias.n_cells == len(ratios)
    assert describe(bias).startswith(f"harness bias ±{at_l1:.1f}% at L=1")


def test_bench_null_prints_the_bias_table(tmp_path, monkeypatch, capsys):
    from mlatui.cli import main

    monkeypatch.setenv("MLATUI_CACHE_DIR", str(tmp_path))
    scenario = tmp_path / "tiny-null.toml"
    text = Path(TINY).read_text().replace("contexts = [128, 256]", "contexts = [64]")
    scenario.write_text(text)
    code = main(
        [
            "bench",
            str(scenario),
            "--random-weights",
            "--null",
            "--phases",
            "sweep",
            "--reps",
            "3",
            "--out",
            str(tmp_path / "aa.jsonl"),
        ]
    )
    out = capsys.readouterr().out
    assert code in (0, 3)
    assert "## A/A: harness bias" in out
    assert "aa-stock" in out and "aa-patched" in out
    assert "- run flags: random weights (acceptance synthetic); A/A null run" in out


def test_random_latents_fill_needs_random_weights(capsys):
    from mlatui.cli import main

    assert main(["bench", TINY, "--fill", "random-latents"]) == 2
    assert "--random-weights" in capsys.readouterr().err


def test_scenario_threshold_reaches_the_arms_and_the_cli_wins(tmp_path):
    text = Path(TINY).read_text().replace("contexts = [128, 256]", "contexts = [64]")
    scenario = tmp_path / "t1.toml"
    scenario.write_text('threshold = 1\nindexer = "stock"\n' + text)
    overrides = {"reps": 2, "max_rounds": 2, "warmup": 1, "only_phases": ["sweep"]}
    for cli, materialises in ((None, True), ("formula", False)):
        events = []
        run(
            RunConfig(
                scenario=str(scenario), random_weights=True, threshold=cli, overrides=overrides
            ),
            events.append,
        )
        header = next(e for e in events if e.type == "header")
        assert header.settings.threshold == (cli or "1") and header.settings.indexer == "stock"
        wide = [e for e in events if isinstance(e, Step) and e.arm == "patched" and e.width >= 2]
        assert wide and all((e.materialised_calls > 0) == materialises for e in wide)


def test_scenario_rejects_a_bad_threshold(tmp_path):
    from mlatui.config.scenario import ScenarioError, load_scenario

    bad = tmp_path / "bad.toml"
    bad.write_text('threshold = "fast"\n' + Path(TINY).read_text())
    with pytest.raises(ScenarioError, match='threshold: expected installed, .* got "fast"'):
        load_scenario(bad)


def test_unknown_phase_is_a_one_line_error_before_anything_loads(capsys):
    from mlatui.cli import main

    assert main(["bench", TINY, "--phases", "bogus"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no phase named bogus" in err[0]


def test_an_aa_tune_reads_the_verify_steps_of_its_own_passs_sweep(tmp_path):
    """Each pass renames its phases (sweep/aa-stock, tune/aa-stock ...): a tune's `verify_from`
    follows, or it would find no sweep rounds and measure its verify steps again."""
    from tiny_scenario import tiny_with_phase

    phases = (
        'name = "sweep"\nkind = "sweep"\ncontexts = [64]\nwidths = [1, 2]\nreps = 3\nwarmup = 1\n'
        '\n[[phase]]\nname = "tune"\nkind = "tune"\ncontexts = [64]\ndepths = [1]\ntokens = 4\n'
        'reps = 2\nwarmup = 1\nverify_from = "sweep"\n'
    )
    scenario = tiny_with_phase(tmp_path / "aa.toml", phases)
    events: list = []
    config = RunConfig(scenario=str(scenario), random_weights=True, null=True,
                       overrides={"max_rounds": 2})  # fmt: skip
    assert run(config, events.append) == "completed"
    said = [e.message for e in events if e.type == "log"]
    for tag in ("aa-stock", "aa-patched"):
        assert any(f"are sweep/{tag}'s at 64" in m for m in said), said
    assert not any("so the verify steps are measured here" in m for m in said)
    # both slots ran one variant: no line, table or title may name the other one
    from mlatui.run.phases.sweep import sweep_verdict
    from tests.summaries import markdown as summary_markdown

    md = summary_markdown(events)
    for tag, variant, other in (
        ("aa-stock", "stock", "patched"),
        ("aa-patched", "patched", "stock"),
    ):
        by = {e.phase: e for e in events if isinstance(e, PhaseSummary)}
        tune = by[f"tune/{tag}"].verdict
        assert f"A ({variant}) @ 64" in tune and f"B ({variant}) @ 64" in tune, tune
        assert f"{other} @" not in tune and f"{variant} @" not in tune, tune
        # as if the check held
        rows = [
            msgspec.structs.replace(r, valid=True) for r in by[f"sweep/{tag}"].rows_of(SweepRow)
        ]
        sweep = sweep_verdict(rows, f"sweep/{tag}")
        assert f"A ({variant})" in sweep and "paired A/B" in sweep and other not in sweep, sweep
        section = md.split(f"## Phase tune/{tag} (tune)")[1].split("\n## ")[0]
        cells = [line.split("|")[2].strip() for line in section.splitlines() if line[:4] == "| 64"]
        assert cells and set(cells) == {f"A ({variant})", f"B ({variant})"}, cells
    checks = md.split("## L = 1 check")[1].split("\n## ")[0]
    assert "| A L=1 ms | B L=1 ms |" in checks and "stock L=1 ms" not in checks


def test_arm_labels_name_what_ran_in_each_slot():
    from mlatui.config.phase_kind import Pass
    from mlatui.stream.events import arm_label

    assert [arm_label(a, "tune") for a in ("stock", "patched")] == ["stock", "patched"]
    assert [arm_label(a, "tune/aa-stock") for a in ("stock", "patched")] == [
        "A (stock)",
        "B (stock)",
    ]
    assert arm_label("patched", "sweep/aa-patched") == "B (patched)"
    assert Pass.of("sweep") is Pass.AB and Pass.of("sweep/aa-patched").variant == "patched"
    assert Pass.of("tune/aa-") is Pass.AB
    assert (
        Pass.AA_STOCK.phase_name("tune") == "tune/aa-stock" and Pass.AB.phase_name("tune") == "tune"
    )
    assert Pass.base_name("sweep-1/aa-patched") == "sweep-1"
    assert Pass.of("tune/aa-stock:verify") is Pass.AA_STOCK


def test_an_aa_runs_log_names_the_slots_a_and_b(null_run):
    """Each A/A pass runs one variant in both slots: no log line calls a slot stock or patched."""
    events = null_run[1]
    state = DashboardState()
    state.apply_all(events)
    lines = [m for _, _, m in state.log]
    assert any("A/A: slots A and B both run stock" in m for m in lines)
    for m in lines:
        assert not any(w in m for w in ("stock slot", "patched slot", "patched arm")), m
