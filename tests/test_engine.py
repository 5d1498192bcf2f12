"""The engine on a tiny random model: event order, warm-up, A B B A, rollback, the L = 1 check,
record -> replay, and a run killed mid-way."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import mlx.core as mx
import pytest
from mlx_lm.models.cache import make_prompt_cache

import mlatui.run.arms
from mlatui.config.run_plan import RunConfig
from mlatui.measure.acceptance import AcceptanceCounts
from mlatui.measure.sampler import round_schedule
from mlatui.run.arms import ArmWorker, Baton, build_arms
from mlatui.run.drafts import UntrimmableCacheError, plain_step, require_trimmable
from mlatui.stream.events import (
    DecodeBlock,
    DecodeResult,
    Estimate,
    PhaseStart,
    PhaseSummary,
    RunEnd,
    RunHeader,
    Step,
    Validity,
)
from mlatui.stream.recorder import Recorder, read_recording
from tests.engine_run import run
from tests.random_models import build_model
from tools.train.acceptance import SteppedDraftModel, speculative_step

TINY = str(Path(__file__).parent / "fixtures" / "tiny.toml")
QUICK = {"reps": 3, "warmup": 1, "tokens": 8}


@pytest.fixture(scope="module")
def tiny_run():
    events = []
    status = run(RunConfig(scenario=TINY, random_weights=True, overrides=QUICK), events.append)
    return status, events


def test_event_order(tiny_run):
    status, events = tiny_run
    assert status == "completed"
    # only the loading events come before the header (they are written after it when recorded)
    at = next(i for i, e in enumerate(events) if isinstance(e, RunHeader))
    assert {e.type for e in events[:at]} == {"load_start", "load_progress"}
    assert events[0].type == "load_start" and events[at - 1].done
    header = events[at]
    assert isinstance(events[-1], RunEnd)
    assert header.geometry["kv_lora_rank"] == 512 and header.thresholds.formula_inf == 170
    assert header.synthetic_acceptance is True
    kinds = [e.type for e in events if e.type not in ("memory", "progress", "log")]
    # each phase: start, its samples, its validity verdicts, then its summary
    first_sweep_step = kinds.index("step")
    assert kinds.index("phase_start") < first_sweep_step
    assert kinds.index("validity") > first_sweep_step
    assert kinds.index("phase_summary") > kinds.index("validity")
    assert kinds.count("phase_start") == kinds.count("phase_summary") == 2
    ts = [
        e.t for e in events if e.type not in ("memory", "header")
    ]  # memory samples come from their own thread
    assert ts == sorted(ts), "event times must be monotonic"
    assert any(e.type == "memory" for e in events)


def test_warmup_excluded_and_rounds_of_abba_quads(tiny_run):
    _, events = tiny_run
    steps = [e for e in events if isinstance(e, Step) and e.phase == "sweep"]
    finals = {
        e.context: e for e in events if isinstance(e, Estimate) and e.final and e.phase == "sweep"
    }
    for context in (128, 256):
        mine = [s for s in steps if s.context == context]
        rounds = finals[context].rounds
        # reps 3 -> at least 4 rounds (whole mirrored pairs), more only while inconclusive
        assert rounds >= 4 and rounds % 2 == 0
        # warm-up calls are never emitted: every Step belongs to a round's schedule
        for r in range(rounds):
            in_round = [(s.width, s.arm) for s in mine if s.rep == r]
            assert in_round == round_schedule((1, 2, 3), r, control_quads=3)
        assert len(mine) == rounds * (3 * 4 + 2 * 4)
    # counters prove the branch: stock materialises every L >= 2 call, patched absorbs it
    for s in steps:
        if s.width >= 2:
            assert (s.absorbed_calls, s.materialised_calls) == (
                (2, 0) if s.arm == "patched" else (0, 2)
            )
        else:
            assert (s.absorbed_calls, s.materialised_calls) == (2, 0)


def test_tune_phase_reports_every_depth(tiny_run):
    _, events = tiny_run
    summary = [e for e in events if isinstance(e, PhaseSummary) and e.kind == "tune"][0]
    depths = {(r.arm, r.depth) for r in summary.rows}
    assert depths == {(a, d) for a in ("stock", "patched") for d in (0, 1, 2)}
    blocks = [e for e in events if isinstance(e, DecodeBlock)]
    results = {(e.arm, e.depth): e for e in events if isinstance(e, DecodeResult)}
    for (arm, depth), r in results.items():
        mine = [b for b in blocks if (b.arm, b.depth) == (arm, depth)]
        # every timed block: `tokens` tokens, A B B A quads per round, no warm-up block emitted
        assert all(b.tokens == 8 == len(b.token_ids) for b in mine)
        per_round = 4 if depth == 0 else 2  # plain decode: two quads per round (the L = 1 check)
        assert len(mine) == per_round * r.rounds and r.tokens == 8 * len(mine)
        if depth:
            assert r.runtime == "mlx_lm.speculative_generate_step"
            # the verify steps rebuilt from mlx-lm's from_draft flags add up to the block
            assert all(sum(b.emitted) == b.tokens for b in mine)
            assert r.counts["accepted_tokens"] == sum(sum(b.accepted) for b in mine)
            assert r.verify_ms_median and r.verify_ms_median > 0
            assert r.tok_s.low <= r.tok_s.median <= r.tok_s.high
            assert r.vs_plain.low <= r.vs_plain.median <= r.vs_plain.high
            assert len(r.acceptance_conditional) == depth == len(r.acceptance_by_position)
            assert not any("barely" in w for w in r.warnings)  # a drafting run is not flagged
        else:
            assert r.runtime == "mlx_lm.generate_step" and r.vs_plain.median == 1.0
    # same synthetic draws in both arms: identical acceptance
    assert results[("stock", 2)].counts == results[("patched", 2)].counts
    # the synthetic draft accepts each reached position with probability 0.75
    counts = AcceptanceCounts(**results[("stock", 1)].counts)
    assert 0.55 < counts.conditional[0] < 0.95
    assert "stock @" in summary.verdict and "patched @" in summary.verdict


def test_arms_never_compute_together():
    baton = Baton()
    active, peak, history = [0], [0], []
    lock = threading.Lock()

    def work(arm):
        with lock:
            history.append(arm.name)
            active[0] += 1
            peak[0] = max(peak[0], active[0])
        time.sleep(0.002)
        with lock:
            active[0] -= 1
        return arm.name

    model = build_model("deepseek_v3")
    stock, patched = build_arms(model)
    workers = [ArmWorker(stock, baton), ArmWorker(patched, baton)]
    threads = [
        threading.Thread(target=lambda w=w: [w.call(work) for _ in range(20)]) for w in workers
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for w in workers:
        w.close()
        assert not w.alive
    assert peak[0] == 1
    assert sorted(history) == ["patched"] * 20 + ["stock"] * 20


@pytest.mark.parametrize("depth", [1, 2, 3])
def test_greedy_speculative_equals_plain(depth):
    target = build_model("deepseek_v3", seed=1)
    draft_model = build_model("deepseek_v3", seed=2, layers=1)
    prompt = list(range(3, 67))
    n = 24

    def plain():
        cache = make_prompt_cache(target)
        target(mx.array([prompt[:-1]]), cache=cache)
        last, out = prompt[-1], []
        for _ in range(n):
            out.append(last)
            last, _ = plain_step(target, cache, last)
        return out[1:] + [last]

    def speculative():
        cache = make_prompt_cache(target)
        target(mx.array([prompt[:-1]]), cache=cache)
        draft = SteppedDraftModel(draft_model)
        draft.prefill(mx.array([prompt[:-1]]))
        last, out, hidden = prompt[-1], [], None
        while len(out) < n:
            result, hidden = speculative_step(target, cache, draft, last, depth, hidden)
            out += list(result.emitted)
            last = result.emitted[-1]
            # rollback keeps the caches aligned with the emitted text
            assert cache[0].offset == len(prompt) - 1 + len(out)
            assert draft.cache[0].offset + len(draft.pending) == cache[0].offset
        return out[:n]

    assert speculative() == plain()


def test_injected_l1_slowdown_is_flagged(monkeypatch):
    original = mlatui.run.arms.build_arms

    def slow_patched(model, threshold="formula", *args, **kwargs):
        stock, patched = original(model, threshold, *args, **kwargs)
        inner = patched.model

        class Slow:
            def __call__(self, x, cache=None):
                start = time.perf_counter()
                out = inner(x, cache=cache)
                if x.shape[1] == 1:  # triple every L = 1 step of this arm only, and add 10 ms:
                    # a loaded host's scheduling jitter on the other arm's ~1 ms step must not
                    # leave the check inconclusive
                    mx.eval(out)
                    time.sleep(2 * (time.perf_counter() - start) + 0.010)
                return out

            def __getattr__(self, name):
                return getattr(inner, name)

        patched.model = Slow()
        return stock, patched

    monkeypatch.setattr(mlatui.run.engine, "build_arms", slow_patched)
    events = []
    sweep_only = QUICK | {"only_phases": ["sweep"]}  # the checks are the sweep's
    run(RunConfig(scenario=TINY, random_weights=True, overrides=sweep_only), events.append)
    verdicts = [e for e in events if isinstance(e, Validity)]
    assert verdicts and not any(v.valid for v in verdicts)
    assert all(v.outcome == "invalid" for v in verdicts)
    assert all(v.patched_l1_ms > 1.3 * v.stock_l1_ms for v in verdicts)
    assert all(v.ratio.high < 0.98 for v in verdicts)  # stock/patched CI wholly below 1 - 2%
    sweep = next(e for e in events if isinstance(e, PhaseSummary) and e.kind == "sweep")
    assert not any(r.valid for r in sweep.rows)
    assert "no valid context" in sweep.verdict
    assert set(events[-1].invalid_contexts) == {v.context for v in verdicts}


def recorded(tmp_path, events):
    """The events written by the recorder and read back."""
    path = tmp_path / "run.jsonl"
    with Recorder(path) as rec:
        for e in events:
            rec(e)
    return read_recording(path)


def test_record_replay_round_trip(tmp_path, tiny_run):
    _, events = tiny_run
    back = recorded(tmp_path, events)
    assert not back.truncated
    # the recorder writes the header first, the loading events that came before it just after
    at = next(i for i, e in enumerate(events) if isinstance(e, RunHeader))
    written = [events[at], *events[:at], *events[at + 1 :]]
    assert [e.to_dict() for e in [back.header, *back.events]] == [e.to_dict() for e in written]


@pytest.mark.slow  # the default run's test_signal_matrix[bench-SIGKILL] kills the same bench
def test_killed_run_leaves_readable_file(tmp_path):
    out = tmp_path / "killed.jsonl"
    scenario = tmp_path / "long.toml"
    scenario.write_text(
        Path(TINY)
        .read_text()
        .replace("contexts = [128, 256]", "contexts = [128, 256, 512, 1024, 2048]")
        .replace("reps = 3", "reps = 50")
        .replace("max_rounds = 4", "max_rounds = 50")
    )
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "mlatui",
            "bench",
            str(scenario),
            "--random-weights",
            "--out",
            str(out),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.time() + 120
    while time.time() < deadline:
        if out.exists() and out.read_text().count('"type":"step"') >= 10:
            break
        time.sleep(0.2)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    rec = read_recording(out)
    steps = [e for e in rec.events if isinstance(e, Step)]
    assert len(steps) >= 10
    assert rec.header.scenario.name == "tiny"
    assert not any(isinstance(e, RunEnd) for e in rec.events)


def test_untrimmable_cache_is_refused_with_the_model_name():
    model = build_model("kimi_linear")
    cache = make_prompt_cache(model)
    with pytest.raises(UntrimmableCacheError, match="kimi-tiny: its cache cannot be trimmed"):
        require_trimmable(cache, "kimi-tiny")


def test_a_hybrid_model_sweeps_and_its_tune_is_refused_with_its_name(monkeypatch):
    """kimi_linear's linear-attention state cannot be trimmed back: a sweep restores it from a
    snapshot after each timed step (mlatui.models.mx_typed), while speculative decoding (mlx-lm's,
    which trims) says so in one line instead of silently growing the context."""
    from mlatui.models.loading import Loaded

    model = build_model("kimi_linear")
    monkeypatch.setattr(
        mlatui.run.engine,
        "load_target",
        lambda *a, **k: Loaded(model, None, "kimi-tiny", "kimi_linear", None, True),
    )
    events = []
    assert (
        run(RunConfig(scenario=TINY, random_weights=True, overrides=QUICK), events.append)
        == "error"
    )
    assert [e.phase for e in events if isinstance(e, PhaseSummary)] == ["sweep"]
    error = next(e for e in events if e.type == "error")
    assert error.message.startswith("kimi-tiny: its cache cannot be trimmed")
    assert "speculative decoding" in error.message


def test_phase_start_counts_planned_steps(tiny_run):
    _, events = tiny_run
    start = next(e for e in events if isinstance(e, PhaseStart) and e.kind == "sweep")
    steps = sum(1 for e in events if isinstance(e, Step) and e.phase == "sweep")
    finals = [e for e in events if isinstance(e, Estimate) and e.final and e.phase == "sweep"]
    # planned: the first rounds; rounds added while the L = 1 check is inconclusive raise the total
    assert start.planned_steps == 2 * 4 * (3 * 4 + 2 * 4)
    for phase in (e for e in events if isinstance(e, PhaseStart)):  # the plan the engine runs
        assert sum(s.planned_calls for s in phase.plan) == phase.planned_steps
    last = [e for e in events if e.type == "progress" and e.phase == "sweep"][-1]
    assert last.done == last.total == steps
    assert steps == sum(e.rounds for e in finals) * (3 * 4 + 2 * 4)


def test_shared_arm_thread_runs_both_arms_on_one_thread():
    model = build_model("deepseek_v3")
    stock, patched = build_arms(model)
    baton = Baton()
    host = ArmWorker(stock, baton)
    guest = ArmWorker(patched, baton, host=host)
    names = {w.call(lambda a: (a.name, threading.current_thread().name)) for w in (host, guest)}
    assert {n for n, _ in names} == {"stock", "patched"}
    assert len({t for _, t in names}) == 1
    guest.close()
    assert host.alive
    host.close()
    assert not host.alive


def test_engine_drafts_with_the_checkpoints_mtp_head(tmp_path):
    """`--model` on a checkpoint that carries an MTP layer: the engine finds it (draft "auto"),
    speculates with it in both arms, and the emitted text equals plain greedy decoding."""
    from tests.checkpoints import tiny_tokenizer
    from tests.test_mtp import save_checkpoint

    folder = tmp_path / "glm-mtp"
    save_checkpoint(folder, "glm4_moe_lite", "index", overrides={"vocab_size": 64})
    tiny_tokenizer(folder, 64)
    scenario = tmp_path / "mtp.toml"
    scenario.write_text(
        '[model]\nsource = "path"\n[draft]\nsource = "auto"\n'
        '[[phase]]\nkind = "decode"\ncontexts = [64]\ndepths = [2]\ntokens = 12\nwarmup = 1\n'
        "reps = 2\nmax_rounds = 2\n"  # the drafting path, not its speed: no rounds added
    )
    events = []
    status = run(RunConfig(model=str(folder), scenario=str(scenario)), events.append)
    assert status == "completed", [e for e in events if e.type == "error"]
    header = next(e for e in events if isinstance(e, RunHeader))
    assert header.draft == "mtp" and header.synthetic_acceptance is False
    blocks = [e for e in events if isinstance(e, DecodeBlock) and e.depth == 2]
    assert {e.arm for e in blocks} == {"stock", "patched"}
    results = [e for e in events if isinstance(e, DecodeResult) and e.depth == 2]
    assert {r.runtime for r in results} == {"mlatui MTP loop (pipelined)"}
    assert all(r.acceptance_rule == "exact-match" for r in results)
    assert not [e for e in events if e.type == "log" and "diverged" in e.message]


def test_engine_with_local_model_and_draft_model_folders(tmp_path):
    """The real-checkpoint path: `--model` and `--draft-model` are local mlx-lm folders, loaded
    by mlx_lm.load; a bad path is one line that says what to do."""
    from tests.checkpoints import save_random_checkpoint

    target = save_random_checkpoint(tmp_path / "target", "deepseek_v3", seed=1)
    draft = save_random_checkpoint(tmp_path / "draft", "deepseek_v3", layers=1, seed=2)
    scenario = tmp_path / "d.toml"
    scenario.write_text(
        '[model]\nsource = "path"\n'
        '[[phase]]\nkind = "decode"\ncontexts = [80]\ndepths = [1]\ntokens = 10\nwarmup = 1\n'
        "reps = 2\nmax_rounds = 2\n"  # the loading path, not its speed: no rounds added
    )
    events = []
    config = RunConfig(model=str(target), draft_model=str(draft), scenario=str(scenario))
    assert run(config, events.append) == "completed"
    header = next(e for e in events if isinstance(e, RunHeader))
    assert header.draft == f"draft-model:{draft}" and header.model == str(target)
    loads = [e for e in events if e.type == "load_start"]
    assert [(e.what, e.source) for e in loads] == [
        ("model", str(target)),
        ("draft model", str(draft)),
    ]
    results = [e for e in events if e.type == "decode_result"]
    assert {(r.arm, r.depth) for r in results} == {
        (a, d) for a in ("stock", "patched") for d in (0, 1)
    }
    assert not [
        e for e in events if e.type == "log" and "diverged" in e.message and "stock" in e.message
    ]

    events = []
    config = RunConfig(model=str(tmp_path / "missing"), scenario=str(scenario))
    assert run(config, events.append) == "error"
    error = next(e for e in events if e.type == "error")
    assert "no such folder" in error.message and "\n" not in error.message


def _reestimate(events):
    """Every sweep context's estimates recomputed from the recorded Step events alone, with the
    seeds the run used: a replay reproduces the recorded summary and CIs exactly (and an older
    recording can be read with this version's estimator)."""
    from mlatui.config.phase_kind import rules_for
    from mlatui.measure.estimates import Timing, estimate_context, stable_seed
    from mlatui.stream.events import ARMS
    from mlatui.views.run_meta import run_seed

    h = next((e for e in events if isinstance(e, RunHeader)), None)
    base = (run_seed(h) if h else None) or 0
    kinds = {e.phase: e.kind for e in events if isinstance(e, PhaseStart)}
    steps: dict[tuple[str, int], list] = {}
    for e in events:
        if isinstance(e, Step) and rules_for(kinds.get(e.phase)).model_widths:
            steps.setdefault((e.phase, e.context), []).append(
                Timing(e.rep, e.width, e.arm, e.ms, e.t)
            )
    out = {}
    for (phase, context), timings in steps.items():
        control = 1 if any(t.width == 1 for t in timings) else None
        out[(phase, context)] = estimate_context(
            timings, ARMS, control, 2.0, stable_seed(base, phase, context)
        )
    return out


def test_replay_reproduces_the_recorded_estimates_exactly(tmp_path, tiny_run):
    from mlatui.run.phases.base import estimate_rows
    from mlatui.stream.phase_rows import Quantity

    _, events = tiny_run
    back = recorded(tmp_path, events)
    again = _reestimate([back.header, *back.events])
    finals = {
        (e.phase, e.context): e
        for e in back.events
        if isinstance(e, Estimate) and e.final and e.phase == "sweep"
    }
    assert set(again) == set(finals) and finals
    for key, est in again.items():
        sampled = tuple(
            r
            for r in finals[key].rows
            if r.quantity not in (Quantity.GB_S, Quantity.MBU, Quantity.MBU_MOST)
        )
        assert estimate_rows(est) == sampled  # GB/s and MBU rows derive from these and the bytes
        v = next(e for e in back.events if isinstance(e, Validity) and (e.phase, e.context) == key)
        assert est.control_outcome.value == v.outcome


def test_the_scenario_seed_plus_cli_seed_seeds_weights_draft_context_and_sampler(
    tmp_path, monkeypatch
):
    """scenario `seed = 3` with `--seed 4`: every seeded part of the run gets 7 (a scenario's seed
    used to reach only the sampler), and the recorded header keeps both parts."""
    import mlatui.run.engine as engine
    from mlatui.run.phases.base import Stopped

    seen: dict[str, int] = {}

    def spy(name, fn, index):
        def wrapped(*args, **kwargs):
            seen[name] = args[index]
            return fn(*args, **kwargs)

        monkeypatch.setattr(engine, name, wrapped)

    spy("load_target", engine.load_target, 3)
    spy("load_draft", engine.load_draft, 3)
    spy("draft_factories", engine.draft_factories, 2)
    spy("text_tokens", engine.text_tokens, 1)

    def context(*args, **kwargs):
        seen["RunContext"] = kwargs["seed"]
        raise Stopped()

    monkeypatch.setattr(engine, "RunContext", context)
    scenario = tmp_path / "seeded.toml"
    scenario.write_text(Path(TINY).read_text().replace("seed = 0", "seed = 3", 1))
    events = []
    config = RunConfig(scenario=str(scenario), random_weights=True, seed=4, overrides=QUICK)
    assert run(config, events.append) == "interrupted"
    assert seen == dict.fromkeys(
        ("load_target", "load_draft", "draft_factories", "text_tokens", "RunContext"), 7
    )
    h = next(e for e in events if e.type == "header")
    assert h.scenario.seed == 3 and h.settings.seed == 4


def test_sweep_estimates_carry_bytes_per_step_gb_s_and_mbu(tiny_run):
    """Every final sweep estimate says each width's necessary bytes, and each arm's GB/s and MBU
    are those bytes over the same rounds' step time against the header's measured limit."""
    _, events = tiny_run
    header = next(e for e in events if isinstance(e, RunHeader))
    assert header.device.bandwidth is not None
    limit = header.device.bandwidth.measured_read_gb_s
    finals = [e for e in events if isinstance(e, Estimate) and e.final and e.phase == "sweep"]
    assert finals
    for e in finals:
        rows = {(r.quantity, r.arm, r.width): r for r in e.rows}
        assert sorted(map(int, e.step_bytes)) == [1, 2, 3]
        for (quantity, arm, width), step in rows.items():
            if quantity != "step_ms":
                continue
            needed = e.step_bytes[str(width)]
            total = needed["weights_low"] + needed["cache_low"]
            assert needed["cache_low"] == 2 * (e.context + width) * (512 + 16) * 4  # 2 layers, f32
            rate = rows["gb_s", arm, width]
            assert rate.median == pytest.approx(total / step.median / 1e6)
            assert rate.low == pytest.approx(total / step.high / 1e6)
            mbu = rows["mbu", arm, width]
            assert mbu.median == pytest.approx(rate.median / limit)


def test_mbu_reaches_the_arm_panes_and_the_export(tiny_run):
    """Against the limit the probe measured; where a step of the tiny run read faster than it (a
    probe on a busy box), every surface says it read from cache instead
    (tests/test_bandwidth_limit.py injects both cases)."""
    from mlatui.views.dashboard_state import DashboardState
    from mlatui.views.export import csv_rows
    from mlatui.views.summary import limit_check, summarize
    from mlatui.views.units import sig
    from mlatui.widgets.arm import mbu_line

    _, events = tiny_run
    state = DashboardState()
    for e in events:
        state.apply(e)
    final = [e for e in events if isinstance(e, Estimate) and e.final and e.phase == "sweep"][-1]
    state.context = final.context
    mbu = {(r.arm, r.width): r for r in final.rows if r.quantity == "mbu"}
    limit = limit_check(state)
    assert limit is not None
    if limit.contradicted:
        assert mbu_line(state, "stock", narrow=True).startswith("MBU: from cache? (read ")
        assert not any(r.mbu for p in summarize(state).phases for r in p.sweep)
        return
    for arm in ("stock", "patched"):
        line = mbu_line(state, arm, narrow=True)
        assert line.startswith(f"MBU @{final.context} L=1 ")
        assert f"L=3 {sig(mbu[arm, 3].median * 100, 2)}%" in line
    summary = summarize(state)
    exported = [r for r in csv_rows(summary) if r.get("quantity") in ("gb_s", "mbu", "mbu_most")]
    assert {
        (r["arm"], r["width"], r["quantity"]) for r in exported if r["context"] == final.context
    } == {
        (arm, width, q)
        for arm in ("stock", "patched")
        for width in (1, 2, 3)
        for q in ("gb_s", "mbu", "mbu_most")
    }
    row = next(
        r for p in summary.phases for r in p.sweep if (r.context, r.width) == (final.context, 2)
    )
    assert row.mbu["patched"].median == mbu["patched", 2].median
