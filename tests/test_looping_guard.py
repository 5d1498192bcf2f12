"""The looping-text guard: greedy text from the first embedded model fell into a loop, every round
restarts from one context, so every block was the same looping text and any draft "predicted" it
(acceptance 1.00 at every position). The end-to-end greedy run here uses a checkpoint built to
loop (tests/looping_model.py), so it does not hang on what a trained model does with greedy text. The guard measures the distinct-4-gram share of each result's
blocks, warns below `min_distinct_4gram` (or when every block is the same text), and a warned
result enters no verdict; the share is recorded and shown. The default scenario's tune samples."""

from __future__ import annotations

import random
from dataclasses import replace
from pathlib import Path

import msgspec
import pytest

import tools.train.acceptance
from mlatui.config.scenario import ScenarioError, load_scenario
from mlatui.measure.acceptance import (
    AcceptanceCounts,
    VerifyStep,
    distinct_ngram_share,
    repetition_of,
)
from mlatui.measure.plans import Setting
from mlatui.run.phases.decode_verdict import Guard, GuardSettings, guard_warnings, tune_verdict
from mlatui.stream.event_base import Interval
from mlatui.stream.phase_rows import DecodeRow
from mlatui.stream.recorder import read_recording
from mlatui.views.dashboard_state import DashboardState
from mlatui.views.verdict_strip import verdict_line
from tests.summaries import csv as summary_csv
from tests.summaries import csv_rows
from tests.summaries import markdown as bench_markdown
from tests.summaries import markdown as dump_markdown

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = ROOT / "scenarios" / "default.toml"
GREEDY = ROOT / "tests" / "fixtures" / "recordings" / "launch-greedy.jsonl.gz"
LOOP = [281, 2617, 1182, 12] * 4  # what every greedy block of that greedy launch emitted
SETTINGS = GuardSettings(min_draft_share=0.25, min_verify_steps=4)
DRAFTING = AcceptanceCounts(1).add_all([VerifyStep(1, 1, 2)] * 20)  # passes the other guards


def _varied(blocks: int, n: int = 16, seed: int = 0) -> list[list[int]]:
    rng = random.Random(seed)
    return [[rng.randrange(4000) for _ in range(n)] for _ in range(blocks)]


def _looping(warnings: list[str]) -> list[str]:
    return [w for w in warnings if w.startswith(str(Guard.LOOPING))]


# -- the measure and the guard -------------------------------------------------------------------


def test_one_definition_pooled_within_blocks_and_across_them():
    # the training report and the guard read the same function
    assert tools.train.acceptance.distinct_ngram_share is distinct_ngram_share
    assert repetition_of([LOOP]).within == distinct_ngram_share(LOOP) == pytest.approx(4 / 13)
    # pooled: distinct 4-grams within each block summed / 4-grams summed (2 + 1 of 2 + 3)
    rep = repetition_of([[1, 2, 3, 4, 5], [7, 7, 7, 7, 7, 7]])
    assert rep.within == pytest.approx(3 / 5) and rep.across == pytest.approx(3 / 5)
    # across: each different block once, so rounds that replay one text are no loop ...
    a, b = _varied(2)
    replayed = repetition_of([a, b, a, b])
    assert replayed.within == replayed.across == 1.0 and replayed.distinct_blocks == 2
    assert not replayed.same_text and repetition_of([a, a]).same_text
    # ... but a loop longer than a block is: its blocks catch it at different phases
    stream = list(range(10)) * 10
    long_loop = repetition_of([stream[i : i + 16] for i in (0, 3, 5, 8)])
    assert long_loop.within == pytest.approx(10 / 13)  # 3 of 13 4-grams repeat in a block
    assert long_loop.across == pytest.approx(10 / 52)  # the loop's 10 4-grams, 4 blocks
    assert repetition_of([[1, 2, 3]]).within is None  # too short to tell
    assert not repetition_of([[1, 2, 3, 4, 5, 6]]).same_text  # one block is not "every block"


def test_the_guard_fires_on_a_looping_stream_and_not_on_a_varied_one():
    (w,) = guard_warnings(DRAFTING, 1.1, SETTINGS, repetition_of([LOOP] * 8))
    assert w == (
        "looping text: 31% distinct 4-grams (< 50%), every block the same text: "
        "acceptance describes a repeat, not the draft"
    )
    assert guard_warnings(DRAFTING, 1.1, SETTINGS, repetition_of(_varied(8))) == []
    a, b = _varied(2)  # greedy rounds replaying one varied text: not a loop
    assert guard_warnings(DRAFTING, 1.1, SETTINGS, repetition_of([a, b] * 4)) == []
    # a 10-token loop in 16-token blocks: 77% within a block, 19% across them
    stream = list(range(10)) * 10
    blocks = [stream[i : i + 16] for i in (0, 3, 5, 8)] * 2
    (w,) = guard_warnings(DRAFTING, 1.1, SETTINGS, repetition_of(blocks))
    assert w == (
        "looping text: 19% distinct 4-grams across its 4 different blocks (< 50%; 77% within "
        "each): acceptance describes a repeat, not the draft"
    )
    # looping inside each block, but each block its own loop: still looping text
    loops = [[b, b + 1, b + 2] * 5 + [b] for b in range(0, 80, 10)]
    (w,) = guard_warnings(DRAFTING, 1.1, SETTINGS, repetition_of(loops))
    assert w.startswith("looping text: 23% distinct 4-grams (< 50%): ") and "every block" not in w
    # an 8-token phrase loops at 62% distinct within a 16-token block: every block the same text
    (w,) = guard_warnings(DRAFTING, 1.1, SETTINGS, repetition_of([list(range(8)) * 2] * 8))
    assert w.startswith("looping text: every block the same text (8 blocks, 62% distinct 4-grams)")
    # the threshold is the scenario's
    strict = replace(SETTINGS, min_distinct_4gram=0.9)
    mild = repetition_of([list(range(10)) + list(range(6))])  # 10 distinct of 13: 77%
    assert guard_warnings(DRAFTING, 1.1, SETTINGS, mild) == []
    (w,) = guard_warnings(DRAFTING, 1.1, strict, mild)
    assert w.startswith("looping text: 77% distinct 4-grams (< 90%)")


def _row(kind: str, depth: int, vs: tuple[float, float, float], warnings=()) -> DecodeRow:
    return DecodeRow(
        context=1024,
        arm="patched",
        depth=depth,
        draft_kind=kind,
        tok_s=60.0 * vs[0],
        vs_plain=vs[0],
        vs_plain_low=vs[1],
        vs_plain_high=vs[2],
        valid=True,
        warnings=tuple(warnings),
    )


def test_a_looping_row_is_left_out_of_the_tune_verdict():
    plain = DecodeRow(context=1024, arm="patched", depth=0, tok_s=60.0, valid=True)
    looping = guard_warnings(DRAFTING, 1.3, SETTINGS, repetition_of([LOOP] * 8))
    varied = guard_warnings(DRAFTING, 1.1, SETTINGS, repetition_of(_varied(8)))
    rows = [
        plain,
        _row("mtp", 1, (1.5, 1.3, 1.7), looping),
        _row("draft-model", 1, (1.2, 1.1, 1.3), varied),
    ]
    v = tune_verdict(rows)
    assert "patched @ 1024: draft-model depth 1 wins 1.20× [1.10, 1.30] plain" in v
    assert "(mtp d1 left out: see warnings)" in v
    # the same rows without the guard's warning: the looping result would have won
    assert "mtp depth 1 wins 1.50×" in tune_verdict([plain, _row("mtp", 1, (1.5, 1.3, 1.7))])


@pytest.mark.parametrize("value", ["1.5", "-0.1", '"half"', "true", "nan"])
def test_a_bad_min_distinct_4gram_is_refused_in_one_line(tmp_path, value):
    f = tmp_path / "bad.toml"
    f.write_text(f'[[phase]]\nkind = "tune"\ncontexts = [256]\nmin_distinct_4gram = {value}\n')
    with pytest.raises(ScenarioError) as e:
        load_scenario(f)
    msg = str(e.value)
    assert str(f) in msg and "phase[0].min_distinct_4gram: expected a number in [0, 1], got" in msg
    assert "\n" not in msg


def test_the_threshold_is_a_phase_key_with_a_default():
    f = DEFAULT.parent / "default.toml"
    tune = next(p for p in load_scenario(f).phases if p.kind == "tune")
    assert tune.min_distinct_4gram == 0.5 and msgspec.to_builtins(tune)["min_distinct_4gram"] == 0.5


def test_the_default_scenarios_tune_samples():
    """The shipped default samples its tune (greedy rounds replay one text; the first model's
    looped) with top_p off;
    the other shipped scenarios do not run the embedded model."""
    s = load_scenario(DEFAULT)
    tune = next(p for p in s.phases if p.kind == "tune")
    assert tune.temperature == 0.8 and tune.top_p == 0.0
    for other in ("glm47-flash", "deepseek-v3", "glm53-flash-sparse"):
        assert load_scenario(DEFAULT.parent / f"{other}.toml").model.source != "embedded"


# -- an older recording: the share is computed from its blocks, no guard is claimed -------------


def test_an_older_greedy_recording_shows_its_text_share_without_claiming_a_guard():
    rec = read_recording(GREEDY)
    s = DashboardState()
    s.apply(rec.header)
    s.apply_all(rec.events)
    a = s.arms["patched"]
    rep = s.text_repeat("patched", a.setting)
    assert rep is not None and rep.within == pytest.approx(4 / 13)
    assert not rep.looping and not rep.live  # the run's own guards did not look at the text
    assert all(r.distinct_4gram_share is None for r in s.decode_results)
    row = next(line for line in dump_markdown(s).splitlines() if "| patched | mtp d1 |" in line)
    assert "| exact match, greedy | – |" in row  # the rule is shown; no share was recorded


# -- the engine: the default scenario's tune, sampled; and the same tune greedy ------------------


def _run(scenario: Path, overrides: dict) -> list:
    from mlatui.config.run_plan import RunConfig
    from tests.engine_run import run

    events: list = []
    # measured blocks on any machine: on a slow BLAS the stock settings' bound would reject them
    overrides = overrides | {"reject_by_bound": False}
    status = run(RunConfig(scenario=str(scenario), overrides=overrides, budget_s=0), events.append)
    assert status in ("completed", "invalid"), status
    return events


@pytest.fixture(scope="module")
def sampled() -> list:
    """The shipped default scenario's tune (temperature 0.8 from the file), cut short."""
    ov = {"reps": 2, "warmup": 1, "tokens": 8, "contexts": [64], "max_rounds": 2}
    return _run(DEFAULT, ov | {"only_phases": ["tune"], "verify_rounds": 2})


@pytest.fixture(scope="module")
def greedy(tmp_path_factory) -> list:
    """A greedy tune at 1024 (MTP depth 1, as the default scenario's first kind) on a checkpoint
    built to loop (tests/looping_model.py): whatever the context, its greedy text is one 4-token
    phrase over and over, and its MTP head drafts it. The embedded model's greedy text looped
    like this once (LOOP); a retrained one need not, so the loop is the fixture's, not luck."""
    from looping_model import save_looping_checkpoint

    folder = tmp_path_factory.mktemp("looping")
    checkpoint = save_looping_checkpoint(folder / "model")
    path = folder / "greedy-loop.toml"
    path.write_text(
        f'name = "greedy-loop"\nseed = 0\n[model]\nsource = "path"\npath = "{checkpoint}"\n'
        'dtype = "float32"\n[draft]\nsource = "mtp"\n'
        '[[phase]]\nname = "tune"\nkind = "tune"\ncontexts = [1024]\ndepths = [1]\n'
        "temperature = 0\ntokens = 16\n"
    )
    ov = {"reps": 2, "warmup": 1, "contexts": [1024], "max_rounds": 2, "verify_rounds": 2}
    return _run(path, ov)


def _results(events: list) -> list:
    return [e for e in events if e.type == "decode_result"]


def test_a_sampled_tune_of_the_default_scenario_records_the_share_and_its_rules(sampled):
    results = _results(sampled)
    assert len(results) == 2 * 4  # plain, mtp d1 and d2, draft-model d1; both arms
    # only the tune ran: no sweep rounds at 64 to take the verify steps from, so it measured
    # its own and said so
    said = [e.message for e in sampled if e.type == "log"]
    assert any("did not measure L = 1, 2, 3 at 64" in m for m in said), said
    for r in results:
        assert r.sampling["temperature"] == 0.8
        assert r.distinct_4gram_share is not None and 0 < r.distinct_4gram_share <= 1
        assert 0 < r.distinct_4gram_share_across <= 1
        assert not _looping(list(r.warnings))  # sampled blocks do not loop here
    rules = {(r.draft_kind, r.acceptance_rule) for r in results if r.depth}
    assert rules == {("mtp", "rejection-sampling"), ("draft-model", "exact-match")}
    summary = next(e for e in sampled if e.type == "phase_summary")
    assert all(row.distinct_4gram_share is not None for row in summary.rows)
    assert all(row.temperature == 0.8 for row in summary.rows)


def test_a_greedy_tune_on_looping_text_is_left_out(greedy):
    # both arms measured their blocks (no bound rejection here), and every block loops
    spec = [r for r in _results(greedy) if r.depth]
    assert {r.arm for r in spec} == {"stock", "patched"} and all(r.measured for r in spec)
    assert all(r.distinct_4gram_share == pytest.approx(4 / 13) for r in spec)
    for r in spec:
        (w,) = _looping(list(r.warnings))
        assert "31% distinct 4-grams (< 50%), every block the same text" in w
        assert r.acceptance_conditional == (1.0,)  # what the guard is there for
    summary = next(e for e in greedy if e.type == "phase_summary")
    assert " wins " not in summary.verdict
    # whatever this CPU made of the L = 1 check, the warned rows are in no verdict
    v = tune_verdict(
        [
            msgspec.structs.replace(r, valid=True, outcome="valid")
            for r in summary.rows_of(DecodeRow)
        ]
    )
    for arm in ("stock", "patched"):
        assert f"{arm} @ 1024: no usable speculative result (mtp d1 left out: see warnings)" in v


def _state(events: list) -> DashboardState:
    s = DashboardState()
    s.apply_all(events)
    return s


def test_the_report_dump_and_csv_show_the_share_and_the_rule(sampled, greedy):
    md = bench_markdown(sampled)
    assert "distinct 4-grams (block / across)" in md and "acceptance rule" in md
    mtp = next(line for line in md.splitlines() if "| patched | mtp d1 |" in line)
    shown = next(
        f"{r.distinct_4gram_share:.0%} / {r.distinct_4gram_share_across:.0%}"
        for r in _results(sampled)
        if r.arm == "patched" and r.draft_kind == "mtp" and r.depth == 1
    )
    assert "rejection sampling, T=0.8" in mtp and f"| {shown} |" in mtp
    dm = next(line for line in md.splitlines() if "| patched | draft-model d1 |" in line)
    assert "exact match, T=0.8" in dm
    assert "distinct_4gram_share" in summary_csv(sampled)
    # the greedy run: the share beside its warning, in the bench table and the --dump/export
    for md in (bench_markdown(greedy), dump_markdown(_state(greedy))):
        row = next(line for line in md.splitlines() if "| patched | mtp d1 |" in line)
        assert "| exact match, greedy | 31% / 31% |" in row and "looping text: 31%" in row
    rows = [r for r in csv_rows(_state(greedy)) if r.get("quantity") == "distinct_4gram_share"]
    assert {r["median"] for r in rows} == {"0.308"}


def test_the_dashboard_reads_the_share_and_the_rule_from_its_state(sampled, greedy):
    from mlatui.widgets.arm import arm_text, rule_line

    s = _state(greedy)
    mtp = Setting("mtp", 1)
    rep = s.text_repeat("patched", mtp)
    assert rep is not None and rep.looping and not rep.live
    assert rep.within == pytest.approx(4 / 13)
    line = rule_line(s, "patched", narrow=False).plain
    assert line == "  exact match, greedy · text 31% distinct 4-grams looping"
    assert "text 31% distinct 4-grams looping" in arm_text(s, "patched", 90, 20).plain
    assert "no verdict" in verdict_line(s) and "wins" not in verdict_line(s)
    for key, v in s.validity.items():  # valid or not on this CPU: the warned results stay out
        s.validity[key] = msgspec.structs.replace(v, valid=True, outcome="valid")
    assert verdict_line(s).startswith("tune: no verdict (every result warned at 1K)")
    # mid-run, from the blocks so far: the same figure, marked live, the guard applied
    blocks = [i for i, e in enumerate(greedy) if e.type == "decode_block" and e.depth]
    live = _state(greedy[: blocks[3] + 1])
    rep = live.text_repeat("patched", mtp)
    assert rep is not None and rep.live and rep.looping
    assert "text ~31% distinct 4-grams looping" in rule_line(live, "patched", False).plain
    s = _state(sampled)
    line = rule_line(s, "patched", narrow=False).plain
    assert line.startswith("  exact match, T=0.8 · text ") and "looping" not in line


def test_a_loop_longer_than_a_block_shows_its_share_across_blocks_on_the_dashboard():
    from mlatui.stream.events import DecodeBlock, DecodeResult
    from mlatui.widgets.arm import rule_line

    stream = list(range(10)) * 10
    blocks = [stream[i : i + 16] for i in (0, 3, 5, 8)]
    rep = repetition_of(blocks)
    (warning,) = guard_warnings(DRAFTING, 1.1, SETTINGS, rep)
    s = DashboardState()
    for i, b in enumerate(blocks):
        s.apply(
            DecodeBlock(
                float(i), "tune", "patched", 2048, 3, i // 2, 16, 40.0, (3,), (3,), (4,),
                tuple(b), "exact-match", 0.0, "mtp",
            )
        )  # fmt: skip
    live = rule_line(s, "patched", narrow=False).plain
    assert live == "  exact match, greedy · text ~77% distinct 4-grams (19% across blocks) looping"
    s.apply(
        DecodeResult(
            5.0, "tune", "patched", 2048, 3, 64, 1.0, Interval(60.0, 60.0, 60.0, 0), warnings=(warning,),
            draft_kind="mtp", distinct_4gram_share=rep.within,
            distinct_4gram_share_across=rep.across, acceptance_rule="exact-match",
        )
    )  # fmt: skip
    line = rule_line(s, "patched", narrow=False).plain
    assert line == "  exact match, greedy · text 77% distinct 4-grams (19% across blocks) looping"
    assert rule_line(s, "patched", narrow=True).plain == "  exact, greedy · 4g 77%/19% !"
