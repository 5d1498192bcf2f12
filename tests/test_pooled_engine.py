"""The pooled L = 1 check in a real engine run (tiny random model, sweep only): the L = 1 steps'
times are replaced by seeded noise of two identical arms, so every context is inconclusive
alone while all of them together decide; the recording carries the decision and a replay shows
the same verdict."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from tiny_scenario import tiny_with_phase

import mlatui.run.phases.base as base
from mlatui.config.run_plan import RunConfig
from mlatui.stream.events import (
    SCHEMA_VERSION,
    Basis,
    PhaseSummary,
    PooledValidity,
    RunEnd,
    Validity,
)
from mlatui.stream.recorder import Recorder, read_recording
from mlatui.views.dashboard_state import DashboardState
from mlatui.views.summary import invalid_contexts
from mlatui.views.units import ratio_text
from mlatui.views.verdict_strip import verdict_line
from tests.engine_run import run
from tests.summaries import markdown as summary_markdown

CONTEXTS = (64, 96, 128, 160, 192, 256)
SCATTER = 0.07  # per-sample jitter of the L = 1 steps: about ±4% CIs alone, ±1.7% pooled


def _scenario(tmp_path: Path) -> Path:
    phase = (
        'name = "sweep"\nkind = "sweep"\n'
        f"contexts = {list(CONTEXTS)}\nwidths = [1, 2]\nreps = 6\nmax_rounds = 6\nwarmup = 1\n"
    )
    return tiny_with_phase(tmp_path / "pooled.toml", phase)


@pytest.fixture(scope="module")
def pooled_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("pooled")
    scenario = _scenario(tmp)
    original = base.forward_and_trim
    rng = random.Random(7)  # with this seed: every context undecided alone, 192's CI above 1

    def synthetic(tokens):
        step = original(tokens)

        def timed(arm):
            ms, absorbed, materialised = step(arm)  # the real step: caches move as they would
            if len(tokens) == 1:  # both arms the same in distribution, whatever the load
                ms = 10.0 * (1 + rng.gauss(0, SCATTER))
            return ms, absorbed, materialised

        return timed

    mp = pytest.MonkeyPatch()
    mp.setattr(base, "forward_and_trim", synthetic)
    events = []
    try:
        status = run(RunConfig(scenario=str(scenario), random_weights=True), events.append)
    finally:
        mp.undo()
    return status, events, tmp


def test_the_run_records_the_pooled_check_and_the_contexts_it_decided(pooled_run):
    status, events, _ = pooled_run
    assert status == "completed"
    own = {e.context: e for e in events if isinstance(e, Validity) and e.basis is Basis.OWN}
    assert set(own) == set(CONTEXTS)
    assert all(v.outcome == "inconclusive" for v in own.values())  # each alone: undecided
    pooled = [e for e in events if isinstance(e, PooledValidity)]
    assert len(pooled) == 1 and pooled[0].phase == "sweep" and pooled[0].outcome == "valid"
    p = pooled[0]
    assert p.contexts == CONTEXTS and p.rounds == 6 * len(CONTEXTS) and p.quads == 3 * p.rounds
    assert 0.98 <= p.ratio.low and p.ratio.high <= 1.02
    # the rule: valid (pooled) exactly where the context's own CI contains 1.00
    contains = {c for c, v in own.items() if v.ratio.contains(1.0)}
    assert set(p.decided) == contains and set(p.undecided) == set(CONTEXTS) - contains
    assert len(p.decided) == 5 and p.undecided == (192,)  # what the seed gives: both cases
    at = events.index(p)
    later = [e for e in events[at + 1 :] if isinstance(e, Validity)]
    assert [v.context for v in later] == list(p.decided)
    assert all(v.valid and v.basis is Basis.POOLED for v in later)
    end = events[-1]
    assert isinstance(end, RunEnd) and set(end.invalid_contexts) == set(p.undecided)


def test_the_sweeps_verdict_uses_the_pooled_decision(pooled_run):
    _, events, _ = pooled_run
    p = next(e for e in events if isinstance(e, PooledValidity))
    summary = next(e for e in events if isinstance(e, PhaseSummary))
    assert events.index(p) < events.index(summary)  # decided before the verdict
    decided = {r.context for r in summary.rows if r.valid}
    assert decided == set(p.decided)
    assert {r.basis for r in summary.rows if r.valid} == {"pooled"}
    assert summary.verdict.startswith(f"at context {max(p.decided)}, L = 2")
    state = DashboardState()
    state.apply_all(events)
    line = verdict_line(state)
    n = len(CONTEXTS)
    assert f"L=1 ✓ 0/{n} ✓p {len(p.decided)}/{n}" in line
    assert f"(pooled {ratio_text(p.ratio)}, {n} contexts)" in line
    assert "Δ2 @" in line  # the marginal cost at the largest valid context is a verdict again
    assert [c for _, c, _, _ in invalid_contexts(events)] == list(p.undecided)


def test_a_replay_of_the_recording_shows_the_same_decision(pooled_run):
    _, events, tmp = pooled_run
    path = tmp / "run.jsonl"
    with Recorder(path) as rec:
        for e in events:
            rec(e)
    back = read_recording(path)
    assert back.header.schema_version == SCHEMA_VERSION
    live, replayed = DashboardState(), DashboardState()
    live.apply_all(events)
    replayed.apply_all([back.header, *back.events])
    assert verdict_line(replayed) == verdict_line(live)
    assert replayed.validity == live.validity and replayed.pooled == live.pooled
    md = summary_markdown(replayed)
    assert f"| sweep (pooled) | {len(CONTEXTS)} contexts |" in md and "| basis |" in md
    assert "stratified by context" in md
