"""Two ranks on this machine (mlx.launch -n 2 --backend ring, localhost): sharded parity, a
whole scenario in lockstep, a rank that dies or hangs, and `replay --follow`."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mlatui.stream.recorder import iter_recording
from mlatui.stream.run_settings import WorldRecord

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
TINY = ROOT / "tests" / "fixtures" / "tiny.toml"
TINY_DIST = ROOT / "tests" / "fixtures" / "tiny_dist.toml"


def free_ports(n: int = 2) -> int:
    """A first port p with p .. p+n-1 free (the ring backend listens on one per rank)."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            base = s.getsockname()[1]
        if base + n > 65535:
            continue
        try:
            socks = []
            for p in range(base, base + n):
                t = socket.socket()
                socks.append(t)
                t.bind(("127.0.0.1", p))
        except OSError:
            continue
        finally:
            for t in socks:
                t.close()
        return base
    raise RuntimeError("no free ports")


def launch(args: list[str], env: dict | None = None, **kw) -> subprocess.Popen:
    """`mlx.launch -n 2 --backend ring` as installed, its ranks given no input
    (tests/quiet_launch.py: the launcher relays their output without spinning a core)."""
    cmd = [
        sys.executable,
        str(ROOT / "tests" / "quiet_launch.py"),
        "-n",
        "2",
        "--backend",
        "ring",
        "-p",
        str(free_ports()),
        "--",
        *args,
    ]
    return subprocess.Popen(
        cmd,
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kw,
    )


def rank_pid(launcher: int, rank: int, timeout_s: float = 30) -> int:
    """The pid of the process mlx.launch started for `rank` (its MLX_RANK); psutil reads
    children and environments on Linux and macOS alike."""
    import psutil

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for child in psutil.Process(launcher).children(recursive=True):
            try:
                if child.environ().get("MLX_RANK") == str(rank):
                    return child.pid
            except psutil.Error:  # ended meanwhile, or not ours to read
                continue
        time.sleep(0.2)
    raise AssertionError(f"no rank {rank} under {launcher}")


def events_of(path: Path) -> list:
    return [e for _, e in iter_recording(path)]


def wait_for_steps(path: Path, n: int, proc: subprocess.Popen, timeout_s: float = 90) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().count('"type":"step"') >= n:
            return
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.2)
    raise AssertionError(f"fewer than {n} steps in {timeout_s} s")


@pytest.fixture(scope="module")
def parity_rows() -> dict[str, list[dict]]:
    """Both shard modes in one launch (two ranks start once): mode -> one row per family and rank."""
    proc = launch(
        [sys.executable, "tests/parity_worker.py", "deepseek_v3", "glm4_moe_lite", "--both"]
    )
    out, err = proc.communicate(timeout=180)
    assert proc.returncode == 0, err
    rows: dict[str, list[dict]] = {}
    for line in out.splitlines():
        if line.startswith("{"):
            row = json.loads(line)
            rows.setdefault(row["mode"], []).append(row)
    return rows


FAMILY_RANKS = [("deepseek_v3", 0), ("deepseek_v3", 1), ("glm4_moe_lite", 0), ("glm4_moe_lite", 1)]


def test_sharded_patched_equals_unsharded_stock_on_both_ranks(parity_rows):
    rows = parity_rows["tensor"]
    assert sorted((r["family"], r["rank"]) for r in rows) == FAMILY_RANKS
    for r in rows:
        assert r["heads_per_rank"] == 1  # the tiny configs' 2 heads, split: the patch saw 1
        for width in ("1", "2", "3", "4"):
            cell = r["widths"][width]
            assert cell["close"] and cell["argmax_equal"], (r["family"], r["rank"], cell)
        # the patched arm took the absorbed branch at every width, in both layers
        assert r["absorbed"] == {"1": 2, "2": 2, "3": 2, "4": 2} and r["materialised"] == {}
    by_family = {}
    for r in rows:
        by_family.setdefault(r["family"], []).append((r["absorbed"], r["materialised"]))
    for family, counters in by_family.items():
        assert counters[0] == counters[1], f"{family}: ranks' branch counters differ"


def test_pipeline_sharded_patched_equals_unsharded_stock_on_both_ranks(parity_rows):
    """mlx-lm's pipeline(): each rank keeps one of the two layers, with all its heads; the patch
    after sharding gates the layer it holds, and the logits match the unsharded stock model."""
    rows = parity_rows["pipeline"]
    assert sorted((r["family"], r["rank"]) for r in rows) == FAMILY_RANKS
    for r in rows:
        assert r["heads_per_rank"] == 2  # heads are not split
        for width in ("1", "2", "3", "4"):
            cell = r["widths"][width]
            assert cell["close"] and cell["argmax_equal"], (r["family"], r["rank"], cell)
        # one layer per rank: one gated call per width, absorbed every time
        assert r["absorbed"] == {"1": 1, "2": 1, "3": 1, "4": 1} and r["materialised"] == {}


@pytest.mark.slow  # 20-30 s idle, minutes on a loaded 2-core box: every collective waits for both
def test_scenario_under_mlx_launch_records_on_rank_0(tmp_path):
    out = tmp_path / "run.jsonl"
    proc = launch(
        [
            str(BIN / "mlatui"),
            "bench",
            str(TINY_DIST),
            "--out",
            str(out),
            "--format",
            "json",
        ]
    )
    stdout, stderr = proc.communicate(timeout=400)
    assert proc.returncode in (0, 3), stderr  # 3: an L = 1 check not passed (contended CPU)
    events = events_of(out)
    header = events[0]
    assert header.distributed == WorldRecord(
        world_size=2, backend="ring", shard="tensor", hosts=(socket.gethostname(),) * 2
    )
    assert header.geometry["num_heads"] == 1  # per rank
    assert events[-1].type == "run_end" and events[-1].status == "completed"
    kinds = {e.type for e in events}
    assert {"step", "decode_block", "phase_summary"} <= kinds
    assert not list(tmp_path.glob("*.jsonl.*")), "only rank 0 writes a recording"
    assert stdout.count('"phase"') >= 1  # rank 0's tables; rank 1 prints none
    dump = subprocess.run(
        [str(BIN / "mlatui"), "replay", "--dump", str(out)], capture_output=True, text=True
    )
    assert dump.returncode == 0, dump.stderr
    assert "distributed: 2 ranks · ring · tensor" in dump.stdout


def test_killing_rank_1_ends_rank_0_with_one_line_error(tmp_path):
    out = tmp_path / "run.jsonl"
    proc = launch(
        [
            str(BIN / "mlatui"),
            "bench",
            str(TINY),
            "--out",
            str(out),
            "--phases",
            "sweep",
            "--reps",
            "40",
        ],
        # the stop grace is the watchdog's limit when that is shorter: 10 s, not 20
        env={"MLATUI_DIST_TIMEOUT_S": "10"},
    )
    wait_for_steps(out, 6, proc)
    os.kill(rank_pid(proc.pid, 1), signal.SIGKILL)
    started = time.monotonic()
    _, stderr = proc.communicate(timeout=60)
    # either the collective fails at once, or mlx.launch's SIGTERM starts the stop grace (10 s
    # here, STOP_GRACE_S = 20 by default) after which the watchdog names the lost rank
    assert time.monotonic() - started < 45
    errors = [line for line in stderr.splitlines() if line.startswith("mlatui: error:")]
    assert len(errors) == 1, stderr
    # the collective fails ("lost rank 1"), or mlx.launch's SIGTERM finds it stuck
    assert errors[0].startswith("mlatui: error: rank 0: ") and str(out) in errors[0]
    assert "lost rank 1" in errors[0] or "no answer from rank 1" in errors[0]
    events = events_of(out)  # replays: every line is whole
    assert events[0].distributed.world_size == 2
    assert events[-1].type == "run_end" and events[-1].status == "error"
    assert sum(e.type == "step" for e in events) >= 6


@pytest.mark.slow
def test_a_hung_rank_ends_every_rank_at_the_watchdog_deadline(tmp_path):
    out = tmp_path / "run.jsonl"
    proc = launch(
        [str(BIN / "mlatui"), "bench", str(TINY), "--out", str(out), "--phases", "sweep"],
        env={"MLATUI_DIST_TIMEOUT_S": "4"},
    )
    wait_for_steps(out, 4, proc)
    hung = rank_pid(proc.pid, 1)
    os.kill(hung, signal.SIGSTOP)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and '"type":"run_end"' not in out.read_text():
            time.sleep(0.2)
    finally:
        os.kill(hung, signal.SIGKILL)  # a stopped process never sees mlx.launch's SIGTERM
    _, stderr = proc.communicate(timeout=30)
    events = events_of(out)
    assert events[-1].type == "run_end" and events[-1].status == "error"
    error = next(e for e in events if e.type == "error")
    assert error.message.startswith("rank 0: no answer from rank 1 for ")
    assert "MLATUI_DIST_TIMEOUT_S" in error.message
    assert "mlatui: error: rank 0: no answer from rank 1" in stderr


@pytest.fixture
def growing(tmp_path):
    """A finished recording, and a function that writes it again line by line, slowly."""
    source = ROOT / "tests" / "fixtures" / "ui_tiny_run.jsonl"
    lines = source.read_text().splitlines(keepends=True)
    target = tmp_path / "growing.jsonl"

    def write(pause_s: float, cut: int):
        with open(target, "w") as f:
            f.writelines(lines[:cut])
            f.flush()
            time.sleep(pause_s)
            rest = "".join(lines[cut:])
            f.write(rest[:50])  # half a line: the reader must wait for its newline
            f.flush()
            time.sleep(pause_s)
            f.write(rest[50:])

    return target, lines, write


def test_replay_follow_shows_a_run_still_being_written_and_ends_with_it(growing):
    import threading

    target, lines, write = growing
    writer = threading.Thread(target=write, args=(2.0, len(lines) // 2))
    started = time.monotonic()
    writer.start()
    dump = subprocess.run(
        [str(BIN / "mlatui"), "replay", "--follow", "--dump", str(target)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    writer.join()
    assert dump.returncode == 0, dump.stderr
    assert time.monotonic() - started >= 4.0  # it waited for the writer, then ended
    assert f"followed {len(lines)} events" in dump.stdout
    assert "status completed" in dump.stdout


def test_follow_source_reads_whole_lines_and_finishes_at_run_end(growing):
    from mlatui.stream.replay_source import FollowSource

    target, lines, _ = growing
    source = FollowSource(target)
    source.start()
    assert source.drain() == [] and not source.finished  # no file yet
    target.write_text("".join(lines[:3]) + lines[3][:20])
    first = source.drain()
    assert [e.type for e in first][0] == "header" and len(first) == 3
    with open(target, "a") as f:
        f.write(lines[3][20:] + "".join(lines[4:]))
    rest = source.drain()
    while not source.finished:
        more = source.drain()
        assert more, "the end of the file was reached without run_end"
        rest += more
    assert len(first) + len(rest) == len(lines) and rest[-1].type == "run_end"
    assert source.drain() == []
