"""Scenario files: every shipped one parses; errors name the file, the key and what is allowed."""

from __future__ import annotations

import random
from pathlib import Path

import mlx.core as mx
import pytest

from mlatui.config.scenario import ScenarioError, load_scenario, shipped
from mlatui.run.drafts import accept_sampled
from tools.train.acceptance import accept_greedy

ROOT = Path(__file__).resolve().parents[1]
GOOD = """
name = "t"
[model]
source = "embedded"
[[phase]]
kind = "sweep"
contexts = [256]
"""


@pytest.mark.parametrize("name", ["default", "glm47-flash", "deepseek-v3", "glm53-flash-sparse"])
def test_shipped_scenarios_parse(name):
    s = load_scenario(shipped(name))
    assert s.phases and all(1 in p.widths for p in s.phases if p.kind in ("sweep", "indexer"))
    if name != "default":
        assert s.model.family and s.model.config, (
            "random-weight runs need the config in the scenario"
        )


def test_sweep_always_measures_the_l1_control(tmp_path):
    f = tmp_path / "s.toml"
    f.write_text(GOOD.replace("contexts = [256]", "contexts = [256]\nwidths = [2, 3]"))
    assert load_scenario(f).phases[0].widths == (1, 2, 3)


@pytest.mark.parametrize(
    "edit, message",
    [
        (
            ('kind = "sweep"', 'kind = "sweeep"'),
            'phase[0].kind: expected one of sweep, decode, tune, indexer, got "sweeep"',
        ),
        (
            ("contexts = [256]", "contexts = [0]"),
            "phase[0].contexts[0]: expected an integer >= 16, got 0",
        ),
        (  # a file warms every width before timing it (the first call compiles)
            ("contexts = [256]", "contexts = [256]\nwarmup = 0"),
            "phase[0].warmup: expected an integer >= 1, got 0",
        ),
        (
            ("contexts = [256]", "contexts = [256]\nrepz = 3"),
            "phase[0]: unknown key 'repz' — allowed: name, kind, contexts,",
        ),
        (
            ('source = "embedded"', 'source = "hub"'),
            'model.source: expected one of embedded, path, random, got "hub"',
        ),
        (('source = "embedded"', 'source = "random"'), "model: source = \"random\" needs 'family'"),
        (("contexts = [256]", ""), "phase[0]: 'contexts' is required (a non-empty array of"),
        (('name = "t"', 'name = "t'), "invalid TOML"),
        (('name = "t"', "name = {a = 1}"), 'name: expected a string, got {"a": 1}'),
        (('kind = "sweep"', 'kind = "sweep"\nname = 3'), "phase[0].name: expected a string, got 3"),
        (
            (
                "contexts = [256]",
                'contexts = [256]\n[[phase]]\nkind = "tune"\ncontexts = [64]\nverify_from = "tune"',
            ),
            'phase[1].verify_from: "tune" is not an earlier sweep phase — name one of sweep-1',
        ),
        (
            (
                "contexts = [256]",
                'contexts = [256]\nname = "a"\n[[phase]]\nkind = "tune"\ncontexts = [64]\nname = "a"',
            ),
            'phase[1].name: "a" names an earlier phase too',
        ),
        (
            ("contexts = [256]", "contexts = [256]\nreps = 2"),
            "phase[0].reps: expected an integer >= 3 for a sweep phase, got 2",
        ),
        (
            (
                "contexts = [256]",
                'contexts = [256]\nkind_depths = { "mtp" = [1], "draft-model" = [0] }',
            ),
            "phase[0].kind_depths.draft-model[0]: expected an integer >= 1, got 0",
        ),
        (  # the key is found on the file as the schema reads it: the sweep before has no name
            (
                "contexts = [256]",
                'contexts = [256]\n[[phase]]\nkind = "tune"\ncontexts = [64]\n'
                'kind_depths = { "mtp" = [1], "draft-model" = [0] }',
            ),
            "phase[1].kind_depths.draft-model[0]: expected an integer >= 1, got 0",
        ),
        (
            ("contexts = [256]", 'contexts = [256]\nkind_depths = { "mtp" = [1], "x" = [1] }'),
            'phase[0].kind_depths: expected keys among mtp, draft-model, got "x"',
        ),
    ],
)
def test_errors_name_file_key_and_allowed_values(tmp_path, edit, message):
    f = tmp_path / "bad.toml"
    f.write_text(GOOD.replace(*edit))
    with pytest.raises(ScenarioError) as e:
        load_scenario(f)
    assert str(f) in str(e.value) and message in str(e.value)
    assert "\n" not in str(e.value)


def test_a_phase_takes_its_name_reps_and_sampling_from_its_kind_and_the_file(tmp_path):
    f = tmp_path / "s.toml"
    tune = '[[phase]]\nkind = "tune"\ncontexts = [64]\n'
    decode = '[[phase]]\nkind = "decode"\ncontexts = [64]\ndepths = [2]\ntemperature = 0.0\n'
    f.write_text(
        "temperature = 0.7\ntop_p = 0.9\n"
        + GOOD.split("[[phase]]")[1].join(["[[phase]]", ""])
        + tune
        + decode
    )
    sweep, tune_phase, decode_phase = load_scenario(f).phases
    assert (sweep.name, sweep.reps, sweep.temperature) == ("sweep-1", 9, 0.7)
    assert (tune_phase.name, tune_phase.reps, tune_phase.top_p) == ("tune-2", 4, 0.9)
    assert (decode_phase.temperature, decode_phase.top_p) == (0.0, 0.9)  # its own wins


def test_missing_file_says_what_exists(tmp_path):
    with pytest.raises(
        ScenarioError, match="no such scenario file — pass a TOML file such as .*shipped: default"
    ):
        load_scenario(tmp_path / "nope.toml")


def test_greedy_acceptance_stops_at_first_mismatch():
    assert accept_greedy([5, 6, 7], [5, 6, 9, 1]) == 2
    assert accept_greedy([5, 6, 7], [4, 6, 7, 1]) == 0
    assert accept_greedy([5, 6, 7], [5, 6, 7, 1]) == 3


def test_rejection_sampling_preserves_the_target_distribution():
    # One draft position over a 4-token vocabulary: whatever q is, the first emitted token must
    # be distributed as p (Leviathan et al., Theorem 1).
    p = mx.array([[0.1, 0.2, 0.3, 0.4], [0.25, 0.25, 0.25, 0.25]])
    q = mx.array([[0.7, 0.1, 0.1, 0.1]])
    rng = random.Random(0)
    counts = [0, 0, 0, 0]
    n = 4000
    for _ in range(n):
        d = rng.choices(range(4), weights=[0.7, 0.1, 0.1, 0.1])[0]
        accepted, nxt = accept_sampled([d], p, q, rng)
        counts[d if accepted == 1 else nxt] += 1
    freq = [c / n for c in counts]
    assert all(abs(f - t) < 0.03 for f, t in zip(freq, [0.1, 0.2, 0.3, 0.4], strict=True)), freq


def test_shipped_scenarios_resolve_from_a_source_tree_without_the_package_data(monkeypatch):
    """Run from a checkout on PYTHONPATH (as on the lent GPU), `mlatui.scenarios` does not exist:
    the shipped scenarios are the checkout's `scenarios/`."""
    import sys

    from mlatui.config.scenario import shipped

    monkeypatch.setitem(sys.modules, "mlatui.scenarios", None)
    path = shipped("default")
    assert path.is_file() and path.parent.name == "scenarios"


def test_a_recording_reads_the_phases_and_story_it_keeps_and_skips_a_key_it_does_not_know(tmp_path):
    """The header's scenario and a BudgetPlanned's phases are the file's own Structs: a key a
    newer tool writes is skipped there (a [[phase]] table refuses it), one an older recording
    lacks reads as its default, and the kind depths keep the table's order."""
    import msgspec

    from mlatui.config.scenario import Phase
    from mlatui.stream.events import BudgetPlanned, RunHeader
    from mlatui.stream.recording_schema import decode_event
    from tests.ui_events import header

    f = tmp_path / "s.toml"
    f.write_text(
        GOOD.replace("[[phase]]", "[story]\ncontexts = [512, 256]\n[[phase]]").replace(
            "contexts = [256]\n",
            'contexts = [256]\nkind_depths = { "mtp" = [1], "draft-model" = [] }\n',
        )
    )
    s = load_scenario(f)
    line = msgspec.json.decode(msgspec.structs.replace(header(), scenario=s.record()).to_json())
    line["scenario"]["phases"][0]["future_key"] = 1
    del line["scenario"]["phases"][0]["min_distinct_4gram"]
    line["scenario"]["story"]["future_key"] = 1
    h = decode_event(msgspec.json.encode(line))
    assert isinstance(h, RunHeader)
    sweep = h.scenario.phases[0]
    assert type(sweep) is Phase and sweep.min_distinct_4gram == 0.5
    assert list(sweep.kind_depths.items()) == [("mtp", (1,)), ("draft-model", ())]
    assert h.scenario.story is not None and h.scenario.story.contexts == (256, 512)
    assert h.scenario.phase("sweep-1") == sweep and h.scenario.phase("x") is None
    planned = BudgetPlanned(0.0, 100.0, 80.0, 50.0, (), s.phases, (256,), 1.0)
    again = decode_event(planned.to_json())
    assert isinstance(again, BudgetPlanned) and again.phases[0].kind_depths == sweep.kind_depths


def test_an_override_the_schema_refuses_is_refused_in_one_line(tmp_path):
    """A quick run's overrides are held to the file's schema, so every phase that runs reads
    back from its recording."""
    from mlatui.config.run_plan import RunConfig, resolve_plan

    f = tmp_path / "s.toml"
    f.write_text(GOOD)
    with pytest.raises(ScenarioError) as e:
        resolve_plan(RunConfig(scenario=str(f), overrides={"contexts": [8]}))
    assert f"{f} (overridden): phase[0].contexts[0]: expected an integer >= 16, got 8" in str(
        e.value
    )
    assert resolve_plan(RunConfig(scenario=str(f), overrides={"contexts": [16]})).phases
