"""The memory estimate that refuses, before loading, a run that cannot fit."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from mlatui.config.run_plan import resolve_plan
from mlatui.config.scenario import load_scenario
from mlatui.models.fit import (
    CACHE_COPIES,
    cache_bytes_per_token,
    estimate,
    largest_context,
    materialised_bytes,
)

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "tests" / "fixtures" / "tiny.toml"
GLM = {
    "num_hidden_layers": 47,
    "kv_lora_rank": 512,
    "qk_rope_head_dim": 64,
    "qk_nope_head_dim": 192,
    "v_head_dim": 256,
    "num_attention_heads": 20,
}


def test_cache_bytes_follow_the_mla_geometry():
    # GLM-4.7-Flash in bf16: 47 layers x (512 latent + 64 rope) x 2 bytes per token and copy
    assert cache_bytes_per_token(GLM, "bfloat16") == 47 * 576 * 2
    # the stock arm's materialised K and V of one layer: 20 heads x (192 + 64 + 256) per token
    assert materialised_bytes(GLM, "bfloat16", 16384) == 16384 * 20 * 512 * 2
    e = estimate(GLM, "bfloat16", 17 * 1024**3, 16384, device=(141 * 1024**3, "GPU memory"))
    assert e.cache_bytes == CACHE_COPIES * 16384 * 47 * 576 * 2 and e.fits
    assert "needs ~" in e.describe() and "at context 16384" in e.describe()
    assert not estimate(GLM, "bfloat16", 17 * 1024**3, 2_000_000, device=(141 * 1024**3, "")).fits


def test_largest_context_counts_the_widest_step_and_a_decode_round():
    s = load_scenario(TINY)
    # sweep: 256 + width 3; tune: 128 + 12 tokens x 2 blocks x (plain twice + 2 depths)
    assert largest_context(s) == max(256 + 3, 128 + 12 * 2 * (2 + 2))


def test_a_run_that_cannot_fit_is_refused_before_loading_in_one_line(tmp_path):
    # --overwrite replaces yesterday's recording and nothing else: the memory guard still holds
    out = tmp_path / "big.jsonl"
    out.write_text("yesterday\n")
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "mlatui",
            "bench",
            str(TINY),
            "--random-weights",
            "--contexts",
            "1000000000",
            "--out",
            str(out),
            "--overwrite",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert p.returncode == 2, p.stderr[-1500:]
    last = p.stderr.strip().splitlines()[-1]
    assert last.startswith("mlatui: error: needs ~") and "at context 1000000" in last
    assert "--force" in last and "--overwrite" not in last and "Traceback" not in p.stderr
    assert '"type":"step"' not in out.read_text()  # nothing ran; the recording says why
    assert '"refused":true' in out.read_text()


def test_contexts_past_what_a_model_was_built_or_trained_for_are_warned():
    from mlatui.models.fit import context_warnings

    assert context_warnings({"max_position_embeddings": 4096}, 4000, 2048) == [
        "context 4000 is beyond the 2048 tokens the model and its drafts were trained and measured at: its text and "
        "acceptance there are out of distribution"
    ]
    (w,) = context_warnings({"max_position_embeddings": 4096}, 5000)
    assert "max_position_embeddings 4096" in w
    assert context_warnings({"max_position_embeddings": 4096}, 2000, 2048) == []


def test_the_embedded_model_says_when_a_run_goes_past_its_training_window():
    from mlatui.config.run_plan import RunConfig
    from mlatui.models.embedded import trained_window
    from tests.engine_run import run

    window = trained_window()
    assert window == 32768  # where the shipped model's drafts were measured good (MANIFEST)
    events = []
    run(
        RunConfig(overrides={"contexts": [window + 52], "reps": 3, "warmup": 1}, scenario=None),
        events.append,
        stop=_stop_after_header(events),
    )
    warned = [e.message for e in events if e.type == "log" and e.level == "warning"]
    assert any(f"beyond the {window} tokens" in m for m in warned), warned


def test_only_decoded_text_is_held_to_the_training_window():
    """A sweep's or indexer's step costs the same on any tokens, so only the tune and decode
    phases' extent (context + one round of blocks) is compared with the training window: the
    default scenario's 4K sweep steps reach 4099; against a 4096-token window its tune stays
    inside and says nothing."""
    from mlatui.config.scenario import load_scenario
    from mlatui.models.fit import context_warnings, largest_context

    scenario = load_scenario(None)
    assert largest_context(scenario) == 4099
    decoded = largest_context(scenario, decoded_only=True)
    assert decoded <= 4096 < largest_context(scenario)
    assert context_warnings({}, decoded, 4096) == []
    assert context_warnings({}, largest_context(scenario), 4096) != []


def _stop_after_header(events):
    """A stop flag that is set as soon as the run header is out (nothing needs to be measured)."""
    import threading

    class Stop(threading.Event):
        def is_set(self) -> bool:
            return any(e.type == "log" for e in events) or super().is_set()

    return Stop()


def test_a_stop_during_loading_leaves_a_header_and_says_so():
    import threading

    from mlatui.config.run_plan import RunConfig
    from tests.engine_run import run

    stop = threading.Event()
    events = []

    def sink(e):  # the signal arrives while the model is loading: as soon as loading starts
        events.append(e)
        if e.type == "load_start":
            stop.set()

    status = run(RunConfig(scenario=str(TINY), random_weights=True), sink, stop)
    assert status == "interrupted"
    # the loading phase came first (its events precede the header in the stream)
    kinds = [e.type for e in events]
    assert kinds[0] == "load_start" and "header" in kinds and kinds[-1] == "run_end"
    # the load stops at once (it runs on a thread): progress events may not have come yet
    assert {k for k in kinds[: kinds.index("header")]} <= {"load_start", "load_progress"}
    assert any(
        e.type == "log" and e.message == "stopped while loading the model, before any step"
        for e in events
    )
    assert not [e for e in events if e.type in ("step", "decode_block")]


def test_a_stop_during_a_long_checkpoint_read_takes_effect_at_once(monkeypatch):
    import threading
    import time

    import mlatui.run.engine as engine
    from mlatui.config.run_plan import RunConfig

    def slow_read(*args, **kw):  # a minutes-long read, inside C where no handler runs
        time.sleep(60)
        raise AssertionError("the read should have been left behind")

    monkeypatch.setattr(engine, "load_target", slow_read)
    stop = threading.Event()
    threading.Timer(0.5, stop.set).start()
    events = []
    t0 = time.monotonic()
    status = engine.run(
        resolve_plan(RunConfig(scenario=str(TINY), random_weights=True)), events.append, stop
    )
    assert time.monotonic() - t0 < 30  # the read takes 60 s; the stop came after 0.5 s
    assert status == "interrupted" and events[0].type == "header"
    assert [e.message for e in events if e.type == "log"] == [
        "stopped while loading the model, before any step"
    ]
    assert events[-1].type == "run_end" and events[-1].status == "interrupted"


def test_the_abandoned_load_thread_reports_nothing_after_the_run_ended(monkeypatch):
    import threading
    import time

    import mlatui.run.engine as engine
    from mlatui.config.run_plan import RunConfig

    ended = threading.Event()

    def slow_read(model_ref, scenario, random_weights, seed, hooks):
        # LoadStart now; the read goes on in C after the engine has stopped waiting, and the
        # watch's exit reports a last LoadProgress, which would land after run_end
        with hooks.watch("model", "test", kind="checkpoint", total_bytes=20):
            ended.wait(10)
        raise AssertionError("left behind")

    monkeypatch.setattr(engine, "load_target", slow_read)
    stop = threading.Event()
    events = []

    def sink(e):
        events.append(e)
        if e.type == "load_start":
            stop.set()
        if e.type == "run_end":
            ended.set()

    assert engine.run(
        resolve_plan(RunConfig(scenario=str(TINY), random_weights=True)), sink, stop
    ) == ("interrupted")
    time.sleep(0.5)  # the load thread has woken and tried to report
    assert events[-1].type == "run_end"
    assert "load_progress" not in [e.type for e in events]


def test_run_interruptibly_hands_back_the_result_or_the_error():
    import threading

    import pytest

    from mlatui.host.signals import run_interruptibly

    assert run_interruptibly(lambda: 42, threading.Event()) == 42
    with pytest.raises(ZeroDivisionError):
        run_interruptibly(lambda: 1 / 0, threading.Event())
