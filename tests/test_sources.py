"""Event sources: replay clock controls, the live engine thread and the isolated child process."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest
import ui_events

from mlatui.config.run_plan import RunConfig, resolve_plan
from mlatui.stream.events import RunEnd, RunHeader
from mlatui.stream.recorder import RecordingError, read_recording
from mlatui.stream.replay_source import UNSEEN
from mlatui.stream.sources import DrawTurns, LiveSource, ProcessSource, ReplaySource

FIXTURE = Path(__file__).parent / "fixtures" / "ui_tiny_run.jsonl"
TINY = str(Path(__file__).parent / "fixtures" / "tiny.toml")


def wait_until(cond, timeout_s=60.0):
    end = time.monotonic() + timeout_s
    while not cond():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.01)


def drain_all(src, timeout_s=60.0):
    out = []
    end = time.monotonic() + timeout_s
    while not src.finished:
        out += src.drain()
        assert time.monotonic() < end, "source never finished"
        time.sleep(0.01)
    return out + src.drain()


# -- replay -----------------------------------------------------------------------------------


def test_replay_releases_on_the_recording_clock():
    src = ReplaySource(FIXTURE, speed=1.0)
    assert src.drain() == []  # nothing before start
    src.start()
    first = src.drain()
    assert isinstance(first[0], RunHeader)
    # released on the replay clock: recorded gaps, each capped at the UI tick (max_gap_s)
    assert src._times[len(first) - 1] <= src.position_s + 0.05
    assert not src.finished


def test_replay_pause_step_speed_and_seek():
    src = ReplaySource(FIXTURE, speed=1.0)
    src.start()
    src.drain()
    src.pause()
    pos = src.position_s
    time.sleep(0.05)
    assert src.position_s == pos and src.drain() == []
    src.step()
    stepped = src.drain()
    assert any(e.type not in UNSEEN for e in stepped)  # up to the next event that shows
    assert src.paused
    src.set_speed(8.0)
    assert src.speed == 8.0
    src.seek(+2.0)
    ahead = src.drain()
    assert ahead and src.position_s >= 2.0
    epoch = src.epoch
    src.seek(-100.0)
    assert src.epoch == epoch + 1 and src.position_s == 0.0
    again = src.drain()
    assert isinstance(again[0], RunHeader)  # the consumer rebuilds from the header
    src.resume()
    src.set_speed(1024)
    assert len(drain_all(src)) + len(again) == 1 + len(read_recording(FIXTURE).events)


def test_replay_bad_recordings_name_file_and_line(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        ui_events.header().to_json() + "\n{not json}\n" + ui_events.header().to_json() + "\n"
    )
    with pytest.raises(RecordingError, match=r"bad\.jsonl:2: not a JSON line"):
        ReplaySource(bad)
    trunc = tmp_path / "trunc.jsonl"
    trunc.write_text(ui_events.header().to_json() + '\n{"type":"step","t":')
    src = ReplaySource(trunc)
    assert src.warnings and "truncated" in src.warnings[0]
    with pytest.raises(ValueError):
        ReplaySource(FIXTURE, speed=0)


# -- live (in-process worker thread) -----------------------------------------------------------


def test_live_source_tees_every_event_into_the_recording(tmp_path):
    rec = tmp_path / "run.jsonl"
    src = LiveSource(RunConfig(), engine=ui_events.fake_engine, record=rec)
    src.start()
    events = drain_all(src)
    src.stop()
    assert src.status == "completed" and isinstance(events[-1], RunEnd)
    assert len(read_recording(rec).events) == len(events) - 1


def test_live_source_stop_leaves_no_thread_and_a_readable_recording(tmp_path):
    rec = tmp_path / "run.jsonl"
    src = LiveSource(
        RunConfig(overrides={"delay_s": 0.05}), engine=ui_events.fake_engine, record=rec
    )
    src.start()
    wait_until(lambda: len(src._buffer) > 3)
    src.stop()
    assert not src.alive
    assert not [t for t in threading.enumerate() if t.name == "mlatui-engine"]
    recording = read_recording(rec)
    assert recording.events[-1] == RunEnd(recording.events[-1].t, "interrupted")


def test_live_source_reports_an_engine_exception(tmp_path):
    src = LiveSource(
        RunConfig(overrides={"raise_at": "validity"}),
        engine=ui_events.fake_engine,
        record=tmp_path / "r.jsonl",
    )
    src.start()
    events = drain_all(src)
    src.stop()
    assert [e.type for e in events[-2:]] == ["error", "run_end"]
    assert "injected engine failure" in events[-2].message
    assert read_recording(tmp_path / "r.jsonl").events[-2].type == "error"


def test_live_source_runs_the_real_engine_on_a_tiny_model(tmp_path):
    rec = tmp_path / "live.jsonl"
    config = RunConfig(
        scenario=TINY, random_weights=True, overrides={"reps": 1, "contexts": [64], "tokens": 4}
    )
    src = LiveSource(resolve_plan(config), record=rec)
    src.start()
    events = drain_all(src, timeout_s=240)
    src.stop()
    assert src.status == "completed", [e for e in events if e.type == "error"]
    kinds = {e.type for e in events}
    assert {"header", "phase_start", "step", "decode_block", "validity", "run_end"} <= kinds
    assert len(read_recording(rec).events) == len(events) - 1


# -- isolated (child process) ------------------------------------------------------------------


def child_env() -> dict:
    env = dict(os.environ)
    tests = str(Path(__file__).parent)
    env["PYTHONPATH"] = os.pathsep.join([tests, *filter(None, [env.get("PYTHONPATH")])])
    return env


def test_process_source_streams_events_over_a_pipe(tmp_path):
    rec = tmp_path / "iso.jsonl"
    src = ProcessSource(RunConfig(), engine="ui_events:fake_engine", record=rec, env=child_env())
    src.start()
    events = drain_all(src)
    src.stop()
    assert events == ui_events.events()
    assert src.proc.returncode == 0
    assert len(read_recording(rec).events) == len(events) - 1


def test_process_source_stop_ends_the_child(tmp_path):
    config = RunConfig(overrides={"delay_s": 0.2})
    src = ProcessSource(
        config, engine="ui_events:fake_engine", record=tmp_path / "r.jsonl", env=child_env()
    )
    src.start()
    wait_until(lambda: len(src._buffer) > 2, 30)
    t0 = time.monotonic()
    src.stop()
    assert src.proc.poll() is not None and time.monotonic() - t0 < 10
    events = src.drain()
    assert events[-1].type == "run_end" and events[-1].status == "interrupted"


def test_a_hangup_stops_the_child_after_its_step_with_a_run_end(tmp_path):
    """Closing the Terminal window sends SIGHUP to the engine's process too."""
    config = RunConfig(overrides={"delay_s": 0.2})
    src = ProcessSource(
        config, engine="ui_events:fake_engine", record=tmp_path / "r.jsonl", env=child_env()
    )
    src.start()
    wait_until(lambda: len(src._buffer) > 2, 30)
    src.proc.send_signal(signal.SIGHUP)  # stdin stays open: only the signal asks
    assert src.proc.wait(timeout=10) == 0
    wait_until(lambda: src._buffer and src._buffer[-1].type == "run_end", 10)
    events = src.drain()
    src.stop()
    assert events[-1].type == "run_end" and events[-1].status == "interrupted"


def test_process_source_reports_a_dead_child(tmp_path):
    src = ProcessSource(
        RunConfig(), engine="no_such_module:run", record=tmp_path / "r.jsonl", env=child_env()
    )
    src.start()
    events = drain_all(src)
    src.stop()
    assert events[-2].type == "error" and "no_such_module" in events[-2].message
    assert events[-1] == RunEnd(events[-1].t, "error")


def test_process_source_runs_the_real_engine(tmp_path):
    config = RunConfig(
        scenario=TINY, random_weights=True, overrides={"reps": 1, "contexts": [64], "tokens": 4}
    )
    src = ProcessSource(resolve_plan(config), record=tmp_path / "iso.jsonl")
    src.start()
    events = drain_all(src, timeout_s=240)
    src.stop()
    assert events[-1].type == "run_end" and events[-1].status == "completed", list(src.stderr_tail)[
        -5:
    ]
    assert any(e.type == "decode_block" and e.depth > 0 for e in events)


# -- the dashboard's drawing turns (DrawTurns) -------------------------------------------------


def test_a_draw_waits_for_the_arm_call_in_progress_and_holds_the_next_one():
    turns = DrawTurns(wait_s=30, hold_s=30)
    log: list[str] = []
    in_call, release = threading.Event(), threading.Event()

    def arm() -> None:
        with turns.arm_call():
            log.append("call 1")
            in_call.set()
            release.wait(30)
        with turns.arm_call():  # after the draw's turn
            log.append("call 2")

    arm_thread = threading.Thread(target=arm)
    arm_thread.start()
    assert in_call.wait(30)
    drawer = threading.Thread(target=lambda: log.append(f"draw held={turns.begin_draw()}"))
    drawer.start()
    wait_until(lambda: turns._wanted)
    assert log == ["call 1"] and turns.busy  # the draw waits for the call to end
    release.set()
    drawer.join(30)
    assert log == ["call 1", "draw held=True"] and turns.drawing
    time.sleep(0.1)
    assert "call 2" not in log  # no call starts while the draw has its turn
    turns.end_draw()
    arm_thread.join(30)
    assert log == ["call 1", "draw held=True", "call 2"] and not turns.busy


def test_a_draw_that_finds_a_long_arm_call_draws_beside_it_and_holds_nothing():
    turns = DrawTurns(wait_s=0.05, hold_s=30)
    in_call, release = threading.Event(), threading.Event()

    def arm() -> None:
        with turns.arm_call():
            in_call.set()
            release.wait(30)
        with turns.arm_call():
            pass

    arm_thread = threading.Thread(target=arm)
    arm_thread.start()
    assert in_call.wait(30)
    assert turns.begin_draw() is False and not turns.drawing
    release.set()
    arm_thread.join(30)  # the next call did not wait for an end_draw that never comes
    assert not arm_thread.is_alive()


def test_a_draw_that_never_ends_loses_its_turn_and_the_arms_go_on():
    turns = DrawTurns(wait_s=30, hold_s=0.05)
    assert turns.begin_draw() is True and turns.drawing  # no call in progress: held at once
    done = threading.Event()

    def arm() -> None:
        with turns.arm_call():
            pass
        with turns.arm_call():
            done.set()

    threading.Thread(target=arm).start()
    assert done.wait(30) and not turns.drawing
