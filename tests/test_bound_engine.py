"""Rejected by bound in a real engine run (tiny random model, tune only). The synced steps' times
are replaced by fixed ones: L = 1 10 ms in both arms, the stock arm's wider steps 400 ms (as its
re-expansion of the whole cache costs on a slow BLAS), the patched arm's 12 ms. So the stock
arm's speculative settings cannot win (at most 2 x 10 / 400 x 1.5 = 0.075x): none of their
blocks runs, the verdict says rejected, and every view says "rejected by bound"."""

from __future__ import annotations

from pathlib import Path

import pytest
from tiny_scenario import tiny_with_phase

import mlatui.run.phases.base as base
from mlatui.config.run_plan import RunConfig
from mlatui.measure.progress import RunProgress
from mlatui.run.phases.decode import BlockRunner
from mlatui.stream.events import (
    DecodeBlock,
    DecodeResult,
    LogMessage,
    PhaseSummary,
    Progress,
    SpeedupBound,
)
from mlatui.stream.recorder import Recorder, read_recording
from mlatui.views.dashboard_state import DashboardState
from mlatui.views.verdict_strip import verdict_line
from tests.engine_run import run
from tests.summaries import csv as summary_csv
from tests.summaries import markdown as bench_report
from tests.summaries import markdown as summary_markdown

STEP_MS = {("stock", True): 400.0, ("patched", True): 12.0}  # (arm, wide) -> ms; L = 1: 10


def _scenario(tmp_path: Path, extra: str = "") -> Path:
    phase = (
        'name = "tune"\nkind = "tune"\ncontexts = [64]\ndepths = [1, 2]\n'
        f"tokens = 8\nreps = 2\nmax_rounds = 6\nwarmup = 1\n{extra}"
    )
    return tiny_with_phase(tmp_path / "bound.toml", phase)


def _fixed_step_run(tmp: Path, extra: str = ""):
    original = base.forward_and_trim

    def fixed(tokens):
        step = original(tokens)

        def timed(arm):
            _, absorbed, materialised = step(arm)  # the real step: caches move as they would
            return STEP_MS.get((arm.name, len(tokens) > 1), 10.0), absorbed, materialised

        return timed

    lengths = []  # per round: both arms' stream lengths at its end
    end_round = BlockRunner.end_round

    def recording_end_round(self):
        lengths.append(tuple(len(self.streams[a].tokens) for a in ("stock", "patched")))
        end_round(self)

    mp = pytest.MonkeyPatch()
    mp.setattr(base, "forward_and_trim", fixed)
    mp.setattr(BlockRunner, "end_round", recording_end_round)
    events = []
    try:
        config = RunConfig(scenario=str(_scenario(tmp, extra)), random_weights=True)
        status = run(config, events.append)
    finally:
        mp.undo()
    return status, events, tmp, lengths


@pytest.fixture(scope="module")
def bound_run(tmp_path_factory):
    return _fixed_step_run(tmp_path_factory.mktemp("bound"))


def _results(events, **where):
    return [
        e
        for e in events
        if isinstance(e, DecodeResult) and all(getattr(e, k) == v for k, v in where.items())
    ]


def test_a_setting_rejected_by_bound_runs_no_blocks(bound_run):
    status, events, _, _ = bound_run
    assert status == "completed"
    blocks = [e for e in events if isinstance(e, DecodeBlock)]
    assert not [b for b in blocks if b.arm == "stock" and b.depth > 0]
    assert [b for b in blocks if b.arm == "stock" and b.depth == 0]  # plain decode still runs
    assert {b.depth for b in blocks if b.arm == "patched"} == {0, 1, 2}
    rejected = [r for r in _results(events, arm="stock") if r.depth > 0]
    assert [r.depth for r in rejected] == [1, 2]
    for r in rejected:
        assert not r.measured and r.rejected_by_bound and r.tok_s is None and r.tokens == 0
        assert r.vs_plain is None and r.bound is not None
        assert r.bound.tokens == r.depth + 1 and r.bound.value < 0.2
        assert r.bound.value == pytest.approx((r.depth + 1) * 10.0 / 400.0 * 1.5)
        assert events.index(r) < events.index(blocks[0])  # decided before any block ran
    patched = [r for r in _results(events, arm="patched") if r.depth > 0]
    assert patched and all(r.measured and r.tok_s and not r.bound.rejects for r in patched)
    logged = [e.message for e in events if isinstance(e, LogMessage)]
    assert any("stock synthetic d1 rejected by bound: at most 0.08×" in m for m in logged)
    assert not any("diverged" in m for m in logged)  # the fillers kept the streams in step
    last = [e for e in events if isinstance(e, Progress) and e.phase == "tune"][-1]
    assert last.done == last.total  # the plan shrank by the blocks not run


def test_the_fillers_keep_the_rejected_arms_stream_as_long_as_the_others(bound_run):
    """In each rejected block's place the stock arm decodes as many tokens plainly (untimed), so
    every later block of the round starts at the same context length in both arms."""
    _, events, _, lengths = bound_run
    rounds = {e.round for e in events if isinstance(e, DecodeBlock)}
    assert len(lengths) == len(rounds) and all(s == p for s, p in lengths)
    timed = {
        a: sum(
            e.tokens for e in events if isinstance(e, DecodeBlock) and e.arm == a and e.round == 0
        )
        for a in ("stock", "patched")
    }
    assert timed["stock"] < timed["patched"]  # fewer timed tokens: the rest were fillers
    assert lengths[0][0] == timed["patched"] + 1  # the stream starts with the context's token


def test_the_verdict_counts_it_as_rejected(bound_run):
    _, events, _, _ = bound_run
    summary = next(e for e in events if isinstance(e, PhaseSummary))
    assert summary.verdict.startswith("stock @ 64: speculation rejected, every setting by bound")
    assert "synthetic d1, synthetic d2 rejected by bound (at most 0.11×)" in summary.verdict
    rows = [r for r in summary.rows if r.arm == "stock" and r.depth]
    assert all(not r.measured and r.bound is not None and r.bound.value < 0.2 for r in rows)
    state = DashboardState()
    state.apply_all(events)
    assert "stock spec rejected (by bound at 64)" in verdict_line(state)


def test_the_report_dump_export_and_tune_view_say_rejected_by_bound(bound_run):
    _, events, tmp, _ = bound_run
    path = tmp / "run.jsonl"
    with Recorder(path) as rec:
        for e in events:
            rec(e)
    back = read_recording(path)
    replayed = [back.header, *back.events]
    again = [r for r in replayed if isinstance(r, DecodeResult) and not r.measured]
    assert again and all(isinstance(r.bound, SpeedupBound) for r in again)
    assert again == [r for r in _results(events) if not r.measured]  # the typed field round-trips
    report = bench_report(replayed)
    _same_columns(report, "| 64 | stock | synthetic d1 |")
    assert (
        "rejected by bound: at most 0.08× (2 × plain ≤ 10.0 ms / verify ≥ 400 ms, ×1.5 runtime "
        "allowance)" in report
    )
    state = DashboardState()
    state.apply_all(replayed)
    md = summary_markdown(state)  # what `replay --dump` and the `e` export print
    row = _same_columns(md, "| 64 | stock | synthetic d1 |")
    assert "not measured" in row and "rejected by bound: at most 0.08×" in row
    csv = summary_csv(state)
    assert "rejected_by_bound" in csv
    from mlatui.widgets.arm import TokSLayout, tok_s_lines

    stock = " ".join(t.plain for t in tok_s_lines(state, "stock", TokSLayout(narrow=False)))
    assert "d1 bound ≤ 0.08×" in stock and "d2 bound ≤ 0.11×" in stock
    patched = " ".join(t.plain for t in tok_s_lines(state, "patched", TokSLayout(narrow=False)))
    assert "bound" not in patched
    progress = RunProgress()
    for e in replayed:
        progress.apply(e)
    seg = next(s.seg for p in progress.phases for s in p.segments if s.seg.tokens)
    assert set(seg.skipped) == {("stock", 2), ("stock", 3)}


def test_with_reject_by_bound_false_every_setting_is_measured_and_still_carries_its_bound(
    tmp_path,
):
    """The switch the tests' tiny scenarios use (their blocks must run on any machine's BLAS):
    the same fixed step times, but the stock arm's settings run their blocks, are measured, and
    their results still say what the bound was."""
    status, events, _, _ = _fixed_step_run(tmp_path, "reject_by_bound = false\n")
    assert status == "completed"
    blocks = [e for e in events if isinstance(e, DecodeBlock)]
    assert {b.depth for b in blocks if b.arm == "stock"} == {0, 1, 2}
    stock = [r for r in _results(events, arm="stock") if r.depth > 0]
    assert [r.depth for r in stock] == [1, 2]
    for r in stock:
        assert r.measured and not r.rejected_by_bound and r.tok_s and r.tokens > 0
        assert r.bound is not None and r.bound.rejects  # shown, not acted on
    logged = [e.message for e in events if isinstance(e, LogMessage)]
    assert not any("rejected by bound" in m for m in logged)
    summary = next(e for e in events if isinstance(e, PhaseSummary))
    assert "by bound" not in summary.verdict


def _same_columns(md: str, start: str) -> str:
    """The row of a markdown table that starts so, checked to have its table's columns."""
    lines = md.splitlines()
    at = next(i for i, x in enumerate(lines) if x.startswith(start))
    head = next(lines[i] for i in range(at, -1, -1) if lines[i].startswith("| context"))
    assert lines[at].count(" | ") == head.count(" | "), (head, lines[at])
    return lines[at]


@pytest.mark.parametrize("value", ["1", '"no"', "0.0"])
def test_a_bad_reject_by_bound_is_refused_in_one_line(tmp_path, value):
    from mlatui.config.checks import ScenarioError
    from mlatui.config.scenario import load_scenario

    f = tmp_path / "bad.toml"
    f.write_text(f'[[phase]]\nkind = "tune"\ncontexts = [256]\nreject_by_bound = {value}\n')
    with pytest.raises(ScenarioError) as e:
        load_scenario(f)
    msg = str(e.value)
    assert str(f) in msg and "phase[0].reject_by_bound: expected true or false, got" in msg
    assert "\n" not in msg


def test_reject_by_bound_defaults_on_and_reaches_the_segments():
    """On by default (the default scenario rejects); the phase's switch reaches its block
    segments, which the forecast reads (test_budget), and survives their recording."""
    import msgspec
    from msgspec.structs import replace

    from mlatui.config.scenario import load_scenario
    from mlatui.measure.plans import phase_segments

    tune = next(p for p in load_scenario().phases if p.kind == "tune")
    assert tune.reject_by_bound
    on = [s for s in phase_segments(tune, ("mtp",)) if s.tokens]
    off = [s for s in phase_segments(replace(tune, reject_by_bound=False), ("mtp",)) if s.tokens]
    assert all(s.bound_rejects for s in on) and not any(s.bound_rejects for s in off)
    assert all(msgspec.convert(msgspec.to_builtins(s), type(s)) == s for s in on + off)
