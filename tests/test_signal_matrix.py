"""The issue's signal bar: SIGINT, SIGTERM, SIGHUP and SIGKILL into `bench SCENARIO`, `bench
attention`, `bench indexer`, `calibrate`, `bench observer` and `launch` (under a pseudo-terminal;
also `launch --isolate`, whose engine is a child process), once a step has completed and about
SIGNAL_AT_S into the run: the recording (or JSONL) parses and holds every step completed before
the signal, the exit status says which signal, and no process of the run survives.

The default run takes a representative pair (SIGKILL, which no handler sees, into the scenario
bench and into an isolated launch), signalled QUICK_SIGNAL_AT_S into the run; `pytest -m slow`
the whole matrix. With MLATUI_SIGNAL_TABLE
set, each case appends one JSON row there (the table in the report)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest
from test_signals import TINY, drain_and_wait, launch_in_pty, lines, long_tiny, read_until

from mlatui.stream.events import RunEnd, Step
from mlatui.stream.recorder import read_recording

SIGNAL_AT_S = 10.0
# the default run's pair: SIGKILL keeps every whole line whenever it lands, after the first steps
QUICK_SIGNAL_AT_S = 3.0
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGKILL)


@dataclass(frozen=True)
class Target:
    name: str
    argv: Callable[[Path], list[str]]
    units: Callable[[Path], int]  # completed steps (or records) on disk now
    min_units: int
    recording: Callable[[Path], Path] | None = None  # an event recording to read back
    jsonl: Callable[[Path], list[Path]] = lambda tmp: []  # JSONL files whose lines must parse
    pty: bool = False


def _steps(path: Path) -> int:
    return sum('"type":"step"' in x for x in lines(path))


def _records(path: Path) -> int:
    return len(lines(path))


def _contexts(first: int, step: int, n: int) -> str:
    return ",".join(str(first + step * k) for k in range(n))


def _observer_scenario(tmp: Path) -> Path:
    scenario = tmp / "obs.toml"
    sweep_only = TINY.read_text().split('[[phase]]\nname = "tune"')[0]
    scenario.write_text(
        sweep_only.replace("contexts = [128, 256]", "contexts = [64, 128, 256, 512]").replace(
            "reps = 3", "reps = 12"
        )
    )
    return scenario


def _observer_files(tmp: Path) -> list[Path]:
    return sorted(tmp.glob("mlatui-observer-*/*.jsonl"))


TARGETS = {
    t.name: t
    for t in (
        Target(
            "bench",
            lambda tmp: [
                "bench",
                str(long_tiny(tmp)),
                "--random-weights",
                "--out",
                str(tmp / "r.jsonl"),
            ],
            lambda tmp: _steps(tmp / "r.jsonl"),
            3,
            recording=lambda tmp: tmp / "r.jsonl",
        ),
        Target(
            "attention",
            lambda tmp: [
                *("bench", "attention", "--family", "deepseek_v3", "--size", "tiny", "--part", "a"),
                *("--contexts", _contexts(64, 64, 40), "--widths", "1,2", "--reps", "6"),
                *("--out", str(tmp / "a.jsonl")),
            ],
            lambda tmp: _records(tmp / "a.jsonl"),
            4,
            jsonl=lambda tmp: [tmp / "a.jsonl"],
        ),
        Target(
            "indexer",
            lambda tmp: [
                *("bench", "indexer", "--contexts", _contexts(2100, 8, 40), "--widths", "1,2"),
                *("--rounds", "2", "--layer-contexts", "none", "--quiet"),
                *("--out", str(tmp / "i.jsonl")),
            ],
            lambda tmp: _records(tmp / "i.jsonl"),
            4,
            jsonl=lambda tmp: [tmp / "i.jsonl"],
        ),
        Target(
            "calibrate",
            lambda tmp: [
                *("calibrate", "--family", "deepseek_v3", "--size", "tiny"),
                *("--contexts", _contexts(64, 64, 40), "--max-width", "64", "--reps", "4"),
                *("--out", str(tmp / "c.jsonl")),
            ],
            lambda tmp: _records(tmp / "c.jsonl"),
            2,
            jsonl=lambda tmp: [tmp / "c.jsonl"],
        ),
        Target(
            "observer",
            lambda tmp: [
                *("bench", "observer", "--scenario", str(_observer_scenario(tmp))),
                *("--random-weights", "--out", str(tmp / "o.jsonl")),
            ],
            lambda tmp: sum(_steps(p) for p in _observer_files(tmp)),
            8,
            jsonl=lambda tmp: [tmp / "o.jsonl", *_observer_files(tmp)],
        ),
        Target(
            "launch",
            lambda tmp: [
                *("--scenario", str(long_tiny(tmp)), "--random-weights"),
                *("--record", str(tmp / "l.jsonl")),
            ],
            lambda tmp: _steps(tmp / "l.jsonl"),
            3,
            recording=lambda tmp: tmp / "l.jsonl",
            pty=True,
        ),
        Target(
            "launch-isolate",
            lambda tmp: [
                *("--scenario", str(long_tiny(tmp)), "--random-weights", "--isolate"),
                *("--record", str(tmp / "l.jsonl")),
            ],
            lambda tmp: _steps(tmp / "l.jsonl"),
            3,
            recording=lambda tmp: tmp / "l.jsonl",
            pty=True,
        ),
    )
}


def _wait(cond: Callable[[], bool], timeout_s: float, what: str) -> None:
    end = time.monotonic() + timeout_s
    while not cond():
        assert time.monotonic() < end, f"timed out waiting for {what}"
        time.sleep(0.05)


def _family(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def _alive(procs: list[psutil.Process]) -> list[psutil.Process]:
    out = []
    for p in procs:
        try:
            if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                out.append(p)
        except psutil.NoSuchProcess:
            pass
    return out


def _check_jsonl(path: Path, killed: bool) -> None:
    rows = lines(path)
    for i, row in enumerate(rows):
        try:
            json.loads(row)
        except ValueError:
            # only a SIGKILL may cut the line being written, and only the last one
            assert killed and i == len(rows) - 1, f"{path}:{i + 1} does not parse"


def run_case(
    target: Target, sig: signal.Signals, tmp: Path, signal_at_s: float = SIGNAL_AT_S
) -> dict:
    env = {**os.environ, "TMPDIR": str(tmp), "MLATUI_CACHE_DIR": str(tmp / "cache")}
    env["XDG_DATA_HOME"] = str(tmp / "data")
    argv = target.argv(tmp)
    t0 = time.monotonic()
    seen = bytearray()
    if target.pty:
        pid, fd = launch_in_pty(tmp, *argv, env=env)
        assert read_until(fd, b"\x1b[?1000h", 60, seen), "the dashboard did not start"
        proc = None
    else:
        proc = subprocess.Popen(
            [sys.executable, "-m", "mlatui", *argv],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        pid = proc.pid
    _wait(lambda: target.units(tmp) >= target.min_units, 120, "the first completed steps")
    while time.monotonic() - t0 < signal_at_s and (proc is None or proc.poll() is None):
        time.sleep(0.1)
    family = _family(pid)
    before = target.units(tmp)
    at_s = time.monotonic() - t0
    os.kill(pid, sig)
    t1 = time.monotonic()
    if proc is not None:
        out, err = proc.communicate(timeout=90)
        code, text = proc.returncode, out + err
    else:
        code = drain_and_wait(pid, fd, seen, timeout_s=90)
        text = bytes(seen).decode(errors="replace")
    exit_s = time.monotonic() - t1
    killed = sig == signal.SIGKILL
    end = time.monotonic() + 15
    while _alive(family) and time.monotonic() < end:
        time.sleep(0.1)
    survivors = _alive(family)
    for p in survivors:  # leave nothing behind, then fail
        p.kill()
    after = target.units(tmp)
    row = {
        "command": target.name,
        "signal": sig.name,
        "signal_at_s": round(at_s, 1),
        "exit_after_s": round(exit_s, 1),
        "exit": code,
        "units_before": before,
        "units_after": after,
        "children": len(family),
        "survivors": len(survivors),
    }
    if os.environ.get("MLATUI_SIGNAL_TABLE"):
        with open(os.environ["MLATUI_SIGNAL_TABLE"], "a") as f:
            f.write(json.dumps(row) + "\n")
    assert not survivors, f"{len(survivors)} processes survived: {survivors}"
    assert code == (-9 if killed else 128 + sig), f"exit {code}; output tail {text[-1500:]!r}"
    assert "Traceback" not in text
    assert after >= before > 0, "steps completed before the signal were lost"
    for path in target.jsonl(tmp):
        _check_jsonl(path, killed)
    if target.recording is not None:
        rec = read_recording(target.recording(tmp))  # the replay's own validation
        assert sum(isinstance(e, Step) for e in rec.events) >= before
        if not killed:
            assert isinstance(rec.events[-1], RunEnd) and rec.events[-1].status == "interrupted"
        replay = subprocess.run(
            [sys.executable, "-m", "mlatui", "replay", str(target.recording(tmp)), "--dump"],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert replay.returncode == 0 and "Traceback" not in replay.stderr, replay.stderr[-800:]
    return row


DEFAULT = {("bench", "SIGKILL"), ("launch-isolate", "SIGKILL")}
CASES = [
    pytest.param(
        name,
        sig,
        id=f"{name}-{sig.name}",
        marks=() if (name, sig.name) in DEFAULT else pytest.mark.slow,
    )
    for name in TARGETS
    for sig in SIGNALS
]


@pytest.mark.parametrize(("name", "sig"), CASES)
def test_a_signal_keeps_every_completed_step_and_leaves_no_process(name, sig, tmp_path):
    quick = (name, sig.name) in DEFAULT and not os.environ.get("MLATUI_SIGNAL_TABLE")
    run_case(TARGETS[name], sig, tmp_path, QUICK_SIGNAL_AT_S if quick else SIGNAL_AT_S)
