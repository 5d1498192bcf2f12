"""SIGINT, SIGTERM and SIGHUP stop every command after the current step and keep what was
measured; a second SIGINT exits at once; launch restores the terminal.
Each case is a small subprocess run on the tiny fixtures, a few seconds."""

from __future__ import annotations

import json
import os
import pty
import select
import signal
import struct
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest

from mlatui.stream.events import RunEnd, Step
from mlatui.stream.recorder import read_recording

TINY = Path(__file__).parent / "fixtures" / "tiny.toml"
STOPS = [signal.SIGINT, signal.SIGTERM, signal.SIGHUP]


def one_in_default(sigs: list[signal.Signals], default: signal.Signals) -> list:
    """One signal in the default run, the others under `pytest -m slow` (the commands below
    stop on each of the three in the default run too: attention SIGTERM, calibrate SIGHUP,
    indexer SIGINT)."""
    return [
        pytest.param(sig, id=sig.name, marks=() if sig == default else pytest.mark.slow)
        for sig in sigs
    ]


def mlatui(*argv: str, **kw) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "mlatui", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kw,
    )


def wait_for(cond, timeout_s: float = 60.0) -> None:
    end = time.monotonic() + timeout_s
    while not cond():
        assert time.monotonic() < end, "timed out waiting for the run to produce output"
        time.sleep(0.05)


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def stop_and_wait(proc: subprocess.Popen, sig: int, timeout_s: float = 30.0) -> tuple[str, str]:
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=timeout_s)
    assert "Traceback" not in out + err
    return out, err


def long_tiny(tmp_path: Path) -> Path:
    scenario = tmp_path / "long.toml"
    scenario.write_text(
        TINY.read_text()
        .replace("contexts = [128, 256]", "contexts = [128, 256, 512, 1024]")
        .replace("reps = 3", "reps = 60")
        .replace("max_rounds = 4", "max_rounds = 60")
    )
    return scenario


@pytest.mark.parametrize("sig", one_in_default(STOPS, signal.SIGTERM))
def test_bench_scenario_keeps_its_run_end_on_every_stop_signal(sig, tmp_path):
    out = tmp_path / "run.jsonl"
    proc = mlatui("bench", str(long_tiny(tmp_path)), "--random-weights", "--out", str(out))
    wait_for(lambda: sum('"type":"step"' in x for x in lines(out)) >= 5)
    _, err = stop_and_wait(proc, sig)
    assert proc.returncode == 128 + sig
    rec = read_recording(out)
    assert isinstance(rec.events[-1], RunEnd) and rec.events[-1].status == "interrupted"
    assert sum(isinstance(e, Step) for e in rec.events) >= 5
    assert f"stopped by {signal.Signals(sig).name}" in err


def test_bench_attention_streams_completed_contexts(tmp_path):
    out = tmp_path / "a.jsonl"
    contexts = ",".join(str(64 * k) for k in range(1, 30))
    proc = mlatui(
        *("bench", "attention", "--family", "deepseek_v3", "--size", "tiny", "--part", "a"),
        *("--contexts", contexts, "--widths", "1,2", "--reps", "6", "--out", str(out)),
    )
    wait_for(lambda: len(lines(out)) >= 4)
    stop_and_wait(proc, signal.SIGTERM)
    assert proc.returncode == 128 + signal.SIGTERM
    records = [json.loads(x) for x in lines(out)]
    assert records and len(records) % 4 == 0  # whole contexts: 2 widths x 2 branches
    assert len(records) < 29 * 4  # stopped early
    assert {r["arm"] for r in records} == {"absorbed", "materialised"}


def test_calibrate_streams_probes_and_stops_on_sighup(tmp_path):
    out = tmp_path / "c.jsonl"
    contexts = ",".join(str(64 * k) for k in range(1, 30))
    env = {**os.environ, "MLATUI_CACHE_DIR": str(tmp_path / "cache")}
    proc = mlatui(
        *("calibrate", "--family", "deepseek_v3", "--size", "tiny", "--contexts", contexts),
        *("--max-width", "64", "--reps", "4", "--out", str(out)),
        env=env,
    )
    wait_for(lambda: len(lines(out)) >= 2)
    stop_and_wait(proc, signal.SIGHUP)
    assert proc.returncode == 128 + signal.SIGHUP
    probes = [json.loads(x) for x in lines(out)]
    assert probes and all(p["type"] in ("probe", "crossover") for p in probes)
    assert any(p["type"] == "probe" for p in probes)


def test_bench_indexer_streams_parts_and_stops_on_sigint(tmp_path):
    out = tmp_path / "i.jsonl"
    contexts = ",".join(str(2100 + 8 * k) for k in range(20))
    proc = mlatui(
        *("bench", "indexer", "--contexts", contexts, "--widths", "1,2", "--rounds", "2"),
        *("--max-rounds", "2"),  # no rounds added while the S = 1 check is undecided
        *("--layer-contexts", "none", "--quiet", "--out", str(out)),
    )
    wait_for(lambda: len(lines(out)) >= 4)
    stop_and_wait(proc, signal.SIGINT)
    assert proc.returncode == 128 + signal.SIGINT
    records = [json.loads(x) for x in lines(out)]
    assert records and len(records) % 4 == 0 and len(records) < 20 * 4


def test_a_second_sigint_exits_at_once(tmp_path):
    # a loop that never looks at the stop flag: only the second signal can end it
    code = (
        "import time\n"
        "from mlatui.host.signals import StopOnSignals\n"
        "with StopOnSignals():\n"
        "    print('ready', flush=True)\n"
        "    while True: time.sleep(0.01)\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert proc.stdout.readline().strip() == "ready"
    proc.send_signal(signal.SIGINT)
    time.sleep(0.3)
    assert proc.poll() is None  # the first one only asks
    t0 = time.monotonic()
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=30)  # the loop never ends by itself: any exit is the second signal's
    assert proc.returncode == 130 and time.monotonic() - t0 < 10
    assert "again: exiting now" in proc.stderr.read()


# ---- launch under a pseudo-terminal ---------------------------------------------------------


def launch_in_pty(tmp_path: Path, *argv: str, env: dict | None = None) -> tuple[int, int]:
    pid, fd = pty.fork()
    if pid == 0:  # the child: the dashboard on the pty
        os.environ.update(env or {})
        os.environ.update(TERM="xterm-256color", COLUMNS="120", LINES="40")
        os.execv(sys.executable, [sys.executable, "-m", "mlatui", "launch", *argv])
    return pid, fd


def read_until(fd: int, needle: bytes, timeout_s: float, seen: bytearray) -> bool:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        ready, _, _ = select.select([fd], [], [], 0.1)
        if ready:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                return needle in seen
            if not chunk:
                return needle in seen
            seen += chunk
            if needle in seen:
                return True
    return needle in seen


def drain_and_wait(pid: int, fd: int, seen: bytearray, timeout_s: float = 30.0) -> int:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        read_until(fd, b"\x00never", 0.2, seen)
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            read_until(fd, b"\x00never", 0.3, seen)
            return os.waitstatus_to_exitcode(status)
    os.kill(pid, signal.SIGKILL)
    raise AssertionError("launch did not exit")


def restored(seen: bytes) -> bool:
    """Alternate screen left and mouse reporting off after they were last turned on."""
    return seen.rfind(b"\x1b[?1049l") > seen.rfind(b"\x1b[?1049h") >= 0 and seen.rfind(
        b"\x1b[?1000l"
    ) > seen.rfind(b"\x1b[?1000h")


@pytest.mark.parametrize("sig", one_in_default([signal.SIGTERM, signal.SIGHUP], signal.SIGHUP))
def test_launch_restores_the_terminal_on_a_signal(sig, tmp_path):
    record = tmp_path / "launch.jsonl"
    pid, fd = launch_in_pty(
        tmp_path,
        "--scenario",
        str(long_tiny(tmp_path)),
        "--random-weights",
        "--record",
        str(record),
    )
    seen = bytearray()
    assert read_until(fd, b"\x1b[?1000h", 30, seen)  # the dashboard is up
    wait_for(lambda: sum('"type":"step"' in x for x in lines(record)) >= 3)
    os.kill(pid, sig)
    code = drain_and_wait(pid, fd, seen)
    assert code == 128 + sig
    assert restored(bytes(seen))
    rec = read_recording(record)
    assert isinstance(rec.events[-1], RunEnd) and rec.events[-1].status == "interrupted"


def weightless_folder(tmp_path: Path) -> Path:
    """Passes the up-front check (config, a safetensors header) but holds no tensors: the
    engine's mlx_lm.load fails, after the dashboard is up."""
    folder = tmp_path / "weightless"
    folder.mkdir()
    config = tomllib.loads(TINY.read_text())["model"]["config"]
    (folder / "config.json").write_text(json.dumps({"model_type": "deepseek_v3", **config}))
    (folder / "model.safetensors").write_bytes(struct.pack("<Q", 2) + b"{}")
    return folder


def test_launch_exits_non_zero_after_an_engine_error(tmp_path):
    model = weightless_folder(tmp_path)
    pid, fd = launch_in_pty(tmp_path, "--model", str(model), "--scenario", str(TINY))
    seen = bytearray()
    # the error is on screen: its line starts "ERROR: model '<path>' could not be loaded: Missing
    # ..."; a long temporary path (pytest-xdist's) cuts the line before "Missing", which then
    # showed only when the log caught up, 30 s later
    assert read_until(fd, b"ERROR: model", 60, seen)
    os.write(fd, b"q")
    code = drain_and_wait(pid, fd, seen)
    assert code == 1 and restored(bytes(seen))
    tail = bytes(seen).rsplit(b"\x1b[?1049l", 1)[-1].decode(errors="replace")
    last = [x for x in tail.splitlines() if x.strip()][-1]
    assert last.startswith("mlatui: error: engine error:") and "Missing" in last


def test_launch_refuses_a_missing_model_folder_before_the_screen_opens(tmp_path):
    proc = mlatui("launch", "--model", str(tmp_path / "missing"), "--scenario", str(TINY))
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 2 and "\x1b[?1049h" not in out + err
    assert err.strip().splitlines()[-1].startswith("mlatui: error: --model ")
    assert "no such folder" in err


def test_bench_observer_keeps_the_completed_and_the_stopped_mode_runs(tmp_path):
    scenario = tmp_path / "obs.toml"
    sweep_only = TINY.read_text().split('[[phase]]\nname = "tune"')[0]
    scenario.write_text(sweep_only.replace("contexts = [128, 256]", "contexts = [64]"))
    out = tmp_path / "o.jsonl"
    env = {**os.environ, "TMPDIR": str(tmp_path)}  # its per-mode recordings land here
    proc = mlatui(
        *("bench", "observer", "--scenario", str(scenario), "--random-weights", "--out", str(out)),
        "--max-seconds",
        "12",  # 2 s a mode run: the headless one is not what it checks
        env=env,
    )

    def tui_steps() -> int:
        return sum(
            '"type":"step"' in x
            for p in tmp_path.glob("mlatui-observer-*/tui-0.jsonl")
            for x in lines(p)
        )

    wait_for(lambda: tui_steps() >= 8)  # headless done, the in-process dashboard measuring
    stop_and_wait(proc, signal.SIGTERM)
    assert proc.returncode == 128 + signal.SIGTERM
    runs = [json.loads(x) for x in lines(out)]
    assert [(r["mode"], r["completed"]) for r in runs] == [("headless", True), ("tui", False)]
    assert runs[1]["samples_ms"]  # the dashboard's run kept what it measured
