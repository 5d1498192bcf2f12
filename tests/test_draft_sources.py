"""Several draft kinds in one run (`[draft] sources = [...]`): parsed and refused in one line,
both kinds run on one stream and every result names its kind, an MTP-less model refuses `mtp`,
the budget counts and cuts the weaker kind first, and older recordings still name their kind."""

from __future__ import annotations

import re
from pathlib import Path

import msgspec
import pytest
from msgspec import structs

from mlatui.config.draft_spec import DraftSource
from mlatui.config.scenario import ScenarioError, load_scenario
from mlatui.measure.plans import Setting, decode_settings, phase_segments
from mlatui.measure.progress import RunProgress
from mlatui.run.budget import changes, fit_to_budget, reductions
from mlatui.run.phases.decode_verdict import tune_verdict
from mlatui.stream.events import SCHEMA_VERSION
from mlatui.stream.phase_rows import DecodeRow
from mlatui.stream.recorder import read_recording
from mlatui.views.dashboard_state import DashboardState
from mlatui.views.verdict_strip import verdict_line
from tests.summaries import csv_rows
from tests.summaries import markdown as summary_markdown

ROOT = Path(__file__).parent.parent
DEFAULT = ROOT / "scenarios" / "default.toml"
FIXTURES = Path(__file__).parent / "fixtures"
TWO_KINDS = FIXTURES / "two_kinds_tune.jsonl"  # a real tune on the embedded model, both kinds
TINY_RUN = FIXTURES / "ui_tiny_run.jsonl"
# schema 3, one draft model, its kind named by the header only
ONE_KIND = ROOT / "tests" / "fixtures" / "recordings" / "cpu-default-full-2.jsonl.gz"


def _scenario(tmp_path, draft: str) -> Path:
    p = tmp_path / "s.toml"
    p.write_text(f'[draft]\n{draft}\n[[phase]]\nkind = "tune"\ncontexts = [64]\n')
    return p


def test_the_default_scenario_runs_both_kinds_strongest_first():
    draft = load_scenario(str(DEFAULT)).draft
    assert draft.kinds == (DraftSource.MTP, DraftSource.DRAFT_MODEL)


def test_a_single_source_still_works(tmp_path):
    draft = load_scenario(str(_scenario(tmp_path, 'source = "draft-model"\npath = "x"'))).draft
    assert draft.kinds == (DraftSource.DRAFT_MODEL,) and draft.sources == ()


@pytest.mark.parametrize(
    ("draft", "message"),
    [
        ('sources = ["mtp", "eagle"]', 'sources.1.: expected one of mtp, draft-model, got "eagle"'),
        (
            'sources = ["mtp", "synthetic"]',
            'sources.1.: expected one of mtp, draft-model, got "synth',
        ),
        ('sources = ["mtp", "mtp"]', 'sources.1.: names "mtp" twice'),
        ("sources = []", "sources: expected a non-empty array, each one of mtp, draft-model, got"),
        ('sources = "mtp"', "sources: expected a non-empty array"),
        (
            'source = "mtp"\nsources = ["mtp", "draft-model"]',
            "give 'source' or 'sources', not both",
        ),
    ],
)
def test_bad_sources_are_refused_in_one_line(tmp_path, draft, message):
    with pytest.raises(ScenarioError, match=message) as e:
        load_scenario(str(_scenario(tmp_path, draft)))
    assert "\n" not in str(e.value) and ": draft" in str(e.value)


def _all_depths() -> tuple:
    """The default scenario with its tune at depths 1-3 of both kinds, at 1K and 2K, measuring
    its own verify steps (the shape these mechanisms were written for)."""
    sweep, tune = load_scenario(str(DEFAULT)).phases
    tune = structs.replace(
        tune, depths=(1, 2, 3), kind_depths={}, contexts=(1024, 2048), verify_from=""
    )
    return sweep, tune


def test_settings_run_every_depth_of_every_kind_and_one_kind_keeps_its_widths():
    tune = _all_depths()[1]
    both = decode_settings(tune, ("mtp", "draft-model"))
    assert both[0] == Setting() and len(both) == 7
    assert [s.label for s in both[1:]] == [
        *("mtp d1", "mtp d2", "mtp d3"),
        *("draft-model d1", "draft-model d2", "draft-model d3"),
    ]
    one = decode_settings(tune, ("draft-model",))
    assert [s.depth for s in one] == [0, 1, 2, 3]  # one kind: width = depth + 1
    blocks = [s for s in phase_segments(tune, ("mtp", "draft-model")) if s.tokens]
    assert blocks[0].setting(5) == Setting("draft-model", 1)


# -- the budget ----------------------------------------------------------------------------------


def _costs() -> RunProgress:
    costs = RunProgress()
    for arm in ("stock", "patched"):
        for ctx, l1 in ((256, 10.0), (1024, 14.0)):
            for w in (1, 2, 3, 4):
                costs.costs.add_step(arm, ctx, w, l1 + (0.05 * ctx if arm == "stock" else 1) * w)
    costs.costs.prefill = [(256, 0.2), (1024, 0.8)]
    return costs


def test_the_forecast_counts_the_second_kind():
    phases = _all_depths()
    one, two = _costs(), _costs()
    one.draft_kinds, two.draft_kinds = ("mtp",), ("mtp", "draft-model")
    assert two.forecast_s(phases) > one.forecast_s(phases) * 1.2


def test_over_budget_the_weaker_kind_keeps_one_depth_first_and_the_plan_says_so():
    phases = _all_depths()
    kinds = ("mtp", "draft-model")
    steps = list(reductions(phases, kinds))
    tune = next(p for p in steps[0] if p.kind == "tune")  # the first cut
    assert tune.depths_for("draft-model") == (1,) and tune.depths_for("mtp") == (1, 2, 3)
    assert tune.contexts == (1024, 2048)  # nothing else cut yet
    assert changes(phases, steps[0]) == ("tune: draft-model depths 1, 2, 3 -> 1",)
    costs = _costs()
    costs.draft_kinds = kinds
    forecasts = [costs.forecast_s(p) for p in steps]
    assert forecasts == sorted(forecasts, reverse=True)
    plan = fit_to_budget(phases, (forecasts[0] + forecasts[1]) / 2, costs.forecast_s, kinds)
    assert plan.fits and any("draft-model depths" in c for c in plan.changes)
    assert "draft-model depths 1, 2, 3 -> 1" in plan.describe()


# -- the verdict ---------------------------------------------------------------------------------


def _row(kind, depth, m, lo, hi, warnings=()):
    return DecodeRow(
        context=1024,
        arm="patched",
        depth=depth,
        draft_kind=kind,
        tok_s=50.0 * m,
        vs_plain=m,
        vs_plain_low=lo,
        vs_plain_high=hi,
        warnings=tuple(warnings),
        valid=True,
    )


def test_the_tune_verdict_picks_the_best_kind_and_depth():
    rows = [
        DecodeRow(context=1024, arm="patched", depth=0, tok_s=50.0, valid=True),
        _row("mtp", 1, 1.4, 1.2, 1.6),
        _row("mtp", 2, 1.8, 1.6, 2.0),
        _row("draft-model", 1, 1.3, 1.1, 1.5),
        _row("draft-model", 2, 1.5, 1.3, 1.7),
        _row("draft-model", 3, 2.5, 2.3, 2.7, ["barely speculated: 5% of 64 tokens"]),
    ]
    v = tune_verdict(rows)
    assert "patched @ 1024: mtp depth 2 wins 1.80× [1.60, 2.00] plain" in v
    assert "draft-model d3 left out: see warnings" in v


# -- a real run, recorded: both kinds on both arms, every result labelled ------------------------


def _state(path) -> DashboardState:
    rec = read_recording(path)
    s = DashboardState()
    s.apply(rec.header)
    s.apply_all(rec.events)
    return s


def test_both_kinds_ran_on_both_arms_through_their_own_runtimes():
    rec = read_recording(TWO_KINDS)
    assert (
        rec.header.schema_version == SCHEMA_VERSION
        and rec.header.draft == "mtp + draft-model:embedded"
    )
    assert rec.header.settings.draft_kinds == ("mtp", "draft-model")
    results = [e for e in rec.events if e.type == "decode_result" and e.depth]
    runtimes = {(e.draft_kind, e.runtime) for e in results}
    assert runtimes == {
        ("mtp", "mlatui MTP loop (pipelined)"),
        ("draft-model", "mlx_lm.speculative_generate_step"),
    }
    seen = {(e.arm, e.draft_kind, e.depth) for e in results}
    assert seen == {
        (a, k, d) for a in ("stock", "patched") for k in ("mtp", "draft-model") for d in (1, 2, 3)
    }
    blocks = [e for e in rec.events if e.type == "decode_block" and e.depth]
    assert {b.draft_kind for b in blocks} == {"mtp", "draft-model"}
    summary = next(e for e in rec.events if e.type == "phase_summary")
    assert {r.draft_kind for r in summary.rows if r.depth} == {"mtp", "draft-model"}


def test_the_tables_and_exports_name_the_kind_of_every_result():
    s = _state(TWO_KINDS)
    md = summary_markdown(s)
    assert "| 256 | patched | mtp d2 |" in md and "| 256 | stock | draft-model d3 |" in md
    assert "| 256 | stock | plain |" in md
    decode = [r for r in csv_rows(s) if r["table"] == "decode" and r["quantity"] == "vs_plain"]
    assert {r["draft"] for r in decode} == {"mtp", "draft-model"}
    a = s.arms["patched"]
    labels = [st.label for st in a.tok_s_by_setting()]
    assert labels == [f"{k} d{d}" for k in ("mtp", "draft-model") for d in (1, 2, 3)]


def test_the_verdict_strip_names_the_winning_kind():
    s = _state(TWO_KINDS)
    # the recorded context's L = 1 check was inconclusive; count it valid to see a verdict
    key = next(iter(s.validity))

    s.validity[key] = msgspec.structs.replace(s.validity[key], valid=True, outcome="valid")
    line = verdict_line(s)
    assert re.search(r"patched spec wins [\d.]+× \[", line)
    assert "(mtp d" in line or "(draft-model d" in line


@pytest.mark.parametrize(("path", "kind"), [(ONE_KIND, "draft-model"), (TINY_RUN, "synthetic")])
def test_a_run_of_one_kind_names_it_on_every_result(path, kind):
    rec = read_recording(path)
    assert rec.header.schema_version == SCHEMA_VERSION
    s = _state(path)
    spec = [r for r in s.decode_results if r.depth]
    assert spec and {r.draft_kind for r in spec} == {kind}
    assert f"{kind} d" in summary_markdown(s) or path == TINY_RUN


# -- refusing a kind the model does not have -----------------------------------------------------


def test_a_model_without_an_mtp_head_refuses_mtp_in_one_line(tmp_path):
    """The embedded draft model's folder is an mlx-lm model without an MTP head."""
    from mlatui.config.run_plan import RunConfig
    from mlatui.models.embedded import DRAFT_PATH
    from tests.engine_run import run

    scenario = tmp_path / "no-head.toml"
    scenario.write_text(
        f'[model]\nsource = "path"\npath = "{DRAFT_PATH}"\n'
        f'[draft]\nsources = ["mtp", "draft-model"]\npath = "{DRAFT_PATH}"\n'
        '[[phase]]\nkind = "tune"\ncontexts = [64]\n'
    )
    events = []
    status = run(RunConfig(scenario=str(scenario), budget_s=0), events.append)
    assert status == "error"
    err = next(e for e in events if e.type == "error")
    assert "MTP" in err.message and "num_nextn_predict_layers" in err.message
    assert "\n" not in err.message
    assert not any(e.type == "decode_block" for e in events)


# -- both kinds on one stream --------------------------------------------------------------------


def test_both_kinds_continue_one_greedy_stream_on_the_embedded_model():
    """Plain, MTP and draft-model blocks in one rotated order continue one stream: greedy, it is
    exactly mlx-lm's own greedy output, and each kind catches up on what the others emitted."""
    import mlx.core as mx
    from mlx_lm.generate import generate_step
    from mlx_lm.models.cache import make_prompt_cache

    from mlatui.measure.plans import Setting
    from mlatui.models.embedded import MODEL_PATH, load_embedded, prompts
    from mlatui.run.arms import build_arms, cache_len, prefill
    from mlatui.run.decode_stream import Sampling, open_stream, rewind, run_block
    from mlatui.run.drafts import DraftModelSource, load_mtp_draft

    model, tok, draft_model = load_embedded()
    context = list(tok.encode(prompts()[0]))[:97]
    _, arm = build_arms(model)
    mtp = load_mtp_draft(MODEL_PATH, model)
    arm.drafts = {"mtp": mtp, "draft-model": DraftModelSource(draft_model)}
    arm.draft = mtp  # the prefill computes the hidden states the head reads
    prefill(arm, context[:-1])
    s = open_stream(arm, len(context) - 1, context[-1], context[:-1])
    order = [("", 0), ("mtp", 2), ("draft-model", 1), ("mtp", 1), ("draft-model", 3), ("", 0)]
    n = 5
    for kind, depth in order:
        r = run_block(arm, s, Setting(kind, depth), n, Sampling(), seed=0)
        assert len(r.tokens) == n and cache_len(arm.cache) == s.covered
        assert all(t.draft_len <= s.covered for t in s.tracks.values())
        if depth:
            assert s.tracks[kind].draft_len == s.covered and r.steps  # it drafted, aligned
    cache = make_prompt_cache(model)
    model(mx.array([context[:-1]]), cache=cache)
    gen = generate_step(
        mx.array([context[-1]]), model, max_tokens=n * len(order), prompt_cache=cache
    )
    assert s.tokens[1:] == [int(t) for t, _ in gen]
    rewind(arm, s)
    assert cache_len(arm.cache) == len(context) - 1
    assert all(t.draft_len == len(context) - 1 for t in s.tracks.values())


def test_compare_matches_results_by_kind_never_mixing_them():
    from mlatui.stream.phase_rows import Quantity
    from mlatui.views.compare import compare_files, width_label

    c = compare_files(TWO_KINDS, TWO_KINDS)
    rows = [r for r in c.rows if r.quantity == Quantity.VS_PLAIN and r.arm == "patched"]
    assert sorted(width_label(r) for r in rows) == sorted(
        f"{k} d{d}" for k in ("mtp", "draft-model") for d in (1, 2, 3)
    )
    assert all(r.a.median == r.b.median for r in rows)  # each kind against its own figure


def test_the_bench_markdown_names_the_kind_new_and_old():
    from tests.summaries import markdown as bench_markdown

    new = read_recording(TWO_KINDS)
    md = bench_markdown([new.header, *new.events])
    assert "| 256 | patched | mtp d1 |" in md and "| 256 | patched | draft-model d1 |" in md
    old = read_recording(ONE_KIND)  # one kind, draft-model
    assert "| 1024 | patched | draft-model d2 |" in bench_markdown([old.header, *old.events])


def test_a_tune_on_the_sweeps_verify_steps_plans_only_its_blocks():
    """The default tune takes its verify steps from the sweep: its PhaseStart's planned steps
    are its block segments' calls, so the dashboard keeps the plan (a count that included verify
    steps it never runs made the forecast fall back to a rate: 783 s for 24 s left)."""
    from mlatui.measure.plans import decode_segments
    from mlatui.run.phases.decode import planned_calls

    tune = load_scenario(str(DEFAULT)).phases[1]
    assert tune.verify_from == "sweep"
    settings = decode_settings(tune, ("mtp", "draft-model"))
    segments = decode_segments(tune, settings)
    assert [s.part for s in segments] == ["tune"]
    assert planned_calls(tune, settings, 0, True) == sum(s.planned_calls for s in segments)
    own = structs.replace(tune, verify_from="")
    segments = decode_segments(own, settings)
    assert [s.part for s in segments] == ["tune:verify", "tune"]
    assert planned_calls(own, settings, 0, True) == sum(s.planned_calls for s in segments)
