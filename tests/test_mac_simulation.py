"""The Mac Studio path, simulated on Linux (no Mac is available here): a fake Metal backend for
the wired limit, the fit check and the memory pane; a process without `os.sched_*` or `/proc`; a
psutil without `io_counters`. Each test fails if the guard it covers is removed."""

from __future__ import annotations

import sys
import threading

import mlx.core as mx
import msgspec
import pytest
from tiny_scenario import tiny_with_phase

from mlatui.config.run_plan import RunConfig
from mlatui.stream.events import LoadProgress, RunHeader

GB = 10**9
WORKING_SET = 16 * GB
QUICK_TUNE = (
    'name = "tune"\nkind = "tune"\ncontexts = [64]\ndepths = [1]\ntokens = 6\nreps = 2\n'
    "max_rounds = 2\nwarmup = 1\nreject_by_bound = false\nverify_rounds = 2\n"
)


@pytest.fixture
def metal(monkeypatch) -> list:
    """mx.device_info as Metal reports it (a recommended working set) and mx.set_wired_limit
    recorded: the log of ("wired", bytes) calls, in order, shared with what the test adds."""
    log: list = []
    info = {
        "architecture": "applegpu_g15d",
        "device_name": "Apple M3 Ultra",
        "memory_size": 96 * GB,
        "max_recommended_working_set_size": WORKING_SET,
        "max_buffer_length": 48 * GB,
    }
    limit = [0]

    def set_wired_limit(value: int) -> int:
        log.append(("wired", int(value)))
        old, limit[0] = limit[0], int(value)
        return old

    monkeypatch.setattr(mx, "device_info", lambda: dict(info))
    monkeypatch.setattr(mx, "set_wired_limit", set_wired_limit)
    return log


@pytest.mark.system
def test_generation_runs_under_mlx_lm_wired_limit_entered_after_loading_left_after_syncs(
    metal, monkeypatch, tmp_path
):
    from mlatui.run import arms
    from tests.engine_run import run

    real_sync = arms.sync_streams

    def sync_streams() -> None:
        metal.append(("synced", threading.current_thread().name))
        real_sync()

    monkeypatch.setattr(arms, "sync_streams", sync_streams)
    arm_threads: set[str] = set()
    real_start = arms.ArmWorker.__init__

    def start(self, arm, baton, host=None):
        real_start(self, arm, baton, host)
        if host is None:
            arm_threads.add(self._thread.name)

    monkeypatch.setattr(arms.ArmWorker, "__init__", start)

    def emit(event) -> None:
        if isinstance(event, RunHeader):
            metal.append(("header", event))
        elif isinstance(event, LoadProgress) and event.done:
            metal.append(("loaded", event.what))

    scenario = tiny_with_phase(tmp_path / "tune.toml", QUICK_TUNE, 0.8)
    assert run(RunConfig(scenario=str(scenario), random_weights=True), emit) == "completed"
    kinds = [k for k, _ in metal]
    wired = [i for i, (k, _) in enumerate(metal) if k == "wired"]
    assert [metal[i][1] for i in wired] == [WORKING_SET, 0]  # entered once, restored once
    enter, leave = wired
    assert kinds.index("header") > enter > max(i for i, k in enumerate(kinds) if k == "loaded")
    synced_before_leaving = {who for k, who in metal[:leave] if k == "synced"}
    assert arm_threads and arm_threads <= synced_before_leaving
    header = next(e for k, e in metal if k == "header")
    assert header.settings.wired_limit.startswith("16.0 GB (Metal's recommended working set")
    from mlatui.views.run_meta import header_fields

    assert any(f.label == "wired memory" and "16.0 GB" in f.value for f in header_fields(header))


def test_no_wired_limit_where_the_device_has_no_working_set(monkeypatch):
    from mlatui.host.memory import wired_memory

    calls: list[int] = []
    monkeypatch.setattr(mx, "set_wired_limit", calls.append)
    with wired_memory(None) as wired:
        assert wired.limit_bytes is None
    assert calls == []


@pytest.fixture
def metal_gpu(metal, monkeypatch):
    """The fake Metal backend with the GPU as default device, as on a Mac."""
    monkeypatch.setattr(mx, "default_device", lambda: mx.gpu)
    return metal


def available_now(monkeypatch, available: int) -> None:
    import psutil

    real = psutil.virtual_memory()
    fake = real._replace(available=available)
    monkeypatch.setattr(psutil, "virtual_memory", lambda: fake)


def ranks_on_hosts(monkeypatch, *hosts: str) -> None:
    """This process as rank 0 of ranks on `hosts` (mx.distributed's world, as world() keeps it)."""
    from mlatui.host import distributed

    world = distributed.World(0, len(hosts), "ring", hosts)
    monkeypatch.setattr(distributed, "_world", world)


def test_the_fit_reads_the_smaller_of_metals_working_set_and_what_is_available_now(
    metal_gpu, monkeypatch
):
    from mlatui.models.fit import device_memory

    available_now(monkeypatch, 40 * GB)
    assert device_memory() == (WORKING_SET, "Metal working set (recommended)")
    available_now(monkeypatch, 10 * GB)  # other apps hold the rest of the unified memory
    have, what = device_memory()
    assert have == 10 * GB and what.startswith("available now, under Metal's recommended")


def test_ranks_on_one_mac_each_fit_against_their_share(metal_gpu, monkeypatch):
    from mlatui.models.fit import FitError, estimate, refuse_unless_fits

    available_now(monkeypatch, 40 * GB)
    config = {"num_hidden_layers": 2, "kv_lora_rank": 512, "qk_rope_head_dim": 64}
    ranks_on_hosts(monkeypatch, "mac-a", "mac-b")  # one rank per Mac: the whole working set
    refuse_unless_fits(estimate(config, "bfloat16", 10 * GB, 1024), force=False)
    ranks_on_hosts(monkeypatch, "mac", "mac")  # mlx.launch -n 2 on one Mac: half each
    e = estimate(config, "bfloat16", 10 * GB, 1024)
    assert e.device_bytes == WORKING_SET // 2 and "shared by 2 ranks on this host" in e.device_what
    with pytest.raises(FitError):
        refuse_unless_fits(e, force=False)


def metal_header():

    from ui_events import header

    h = header()
    return msgspec.structs.replace(
        h, platform="darwin", device=msgspec.structs.replace(h.device, backend="metal")
    )


def test_the_memory_pane_speaks_of_unified_memory(metal_gpu, monkeypatch):
    from mlatui.host.memory import sample_memory
    from mlatui.views.dashboard_state import DashboardState
    from mlatui.widgets.palette import Status, status_style
    from mlatui.widgets.render import memory_text

    monkeypatch.setattr("mlatui.host.memory.footprint_bytes", lambda: 3 * GB)
    state = DashboardState()
    state.apply(metal_header())
    first = sample_memory(1.0)
    assert first.device_limit_bytes == WORKING_SET and first.process_footprint_bytes == 3 * GB

    state.apply(
        msgspec.structs.replace(first, swap_used_bytes=2 * GB)
    )  # a Mac swaps a little all the time
    calm = memory_text(state, 160).plain
    assert "/ 16.0 GB Metal working set (recommended)" in calm and "device limit" not in calm
    assert "process footprint 3.0 GB" in calm and "RSS" not in calm
    assert "swap +0 B since start" in calm
    state.apply(msgspec.structs.replace(first, t=2.0, swap_used_bytes=2 * GB + 500 * 10**6))
    swapping = memory_text(state, 160)
    assert "swap +500.0 MB since start" in swapping.plain
    grown = swapping.plain.index("+500.0 MB")
    warn = status_style(Status.WARN)  # in the warning colour only when it grew
    assert any(s.style == warn and s.start <= grown < s.end for s in swapping.spans)


def test_a_linux_pane_keeps_its_words():
    from ui_events import header

    from mlatui.stream.events import MemorySample
    from mlatui.views.dashboard_state import DashboardState
    from mlatui.widgets.render import memory_text

    state = DashboardState()
    state.apply(header())
    state.apply(MemorySample(1.0, 1, 2, 3, 8 * GB, 5 * GB, 6 * GB, 16 * GB, 0))
    text = memory_text(state, 160).plain
    assert "device limit" in text and "process RSS 5.0 GB" in text and "swap 0 B" in text


def test_load_progress_counts_mlx_memory_where_psutil_has_no_io_counters(monkeypatch):
    import psutil

    from mlatui.models.loading import read_counter

    if hasattr(psutil.Process, "io_counters"):  # Linux: psutil has them
        assert read_counter()[1] == "process read bytes"
        monkeypatch.delattr(psutil.Process, "io_counters")  # as on macOS
    read, measure = read_counter()
    assert measure == "mlx active memory" and read() >= 0


def quick_run(tmp_path) -> str:
    from tests.engine_run import run

    scenario = tiny_with_phase(tmp_path / "tune.toml", QUICK_TUNE, 0.8)
    events: list = []
    status = run(RunConfig(scenario=str(scenario), random_weights=True), events.append)
    errors = [e for e in events if type(e).__name__ == "ErrorEvent"]
    assert not errors, errors
    return status


@pytest.mark.system
def test_a_short_run_completes_without_os_sched(monkeypatch, tmp_path):
    import os

    monkeypatch.delattr(os, "sched_getaffinity")  # as on macOS
    monkeypatch.delattr(os, "sched_setaffinity")
    assert quick_run(tmp_path) == "completed"


@pytest.mark.system
def test_a_short_run_completes_where_proc_cannot_be_read(monkeypatch, tmp_path):
    import builtins
    import os

    real_open, real_listdir = builtins.open, os.listdir

    def refuse(path) -> None:
        """mlatui's own reads of /proc fail (psutil reads it on Linux and has its own way on
        macOS, so its reads go on)."""
        caller = sys._getframe(2).f_globals.get("__name__", "")
        if str(path).startswith("/proc") and caller.startswith("mlatui"):
            raise PermissionError(13, "Permission denied", str(path))

    def open_(file, *a, **k):
        refuse(file)
        return real_open(file, *a, **k)

    def listdir(path="."):
        refuse(path)
        return real_listdir(path)

    monkeypatch.setattr(builtins, "open", open_)
    monkeypatch.setattr(os, "listdir", listdir)
    monkeypatch.delenv("MLATUI_ARM_CPUS", raising=False)  # arms pinned: decode unpins
    assert quick_run(tmp_path) == "completed"


def test_an_intel_mac_is_told_in_one_line_that_mlx_needs_apple_silicon(monkeypatch, capsys):
    import platform

    from mlatui import cli
    from mlatui.commands import thresholds

    def needs_mlx(args):
        raise ModuleNotFoundError("No module named 'mlx'", name="mlx")

    monkeypatch.setattr(thresholds, "run", needs_mlx)
    monkeypatch.setattr(sys, "platform", "darwin")
    monkeypatch.setattr(platform, "machine", lambda: "x86_64")
    assert cli.main(["thresholds", "--family", "deepseek_v3"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.startswith("mlatui: error: MLX runs on Apple silicon only")
    assert "x86_64" in err and "mlatui demo" in err


def test_an_intel_mac_installs_without_mlx_and_an_apple_silicon_one_with_it():
    import tomllib

    from packaging.requirements import Requirement

    from tests.static_checks import ROOT

    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]

    def installed(sys_platform: str, machine: str) -> set[str]:
        env = {"sys_platform": sys_platform, "platform_machine": machine}
        reqs = [Requirement(d) for d in deps]
        return {r.name for r in reqs if r.marker is None or r.marker.evaluate(env)}

    assert {"mlx", "mlx-lm"} <= installed("darwin", "arm64")
    assert {"mlx", "mlx-lm"} <= installed("linux", "x86_64")
    assert not {"mlx", "mlx-lm"} & installed("darwin", "x86_64")  # no resolver error


def test_a_data_folder_with_a_space_is_printed_quoted(monkeypatch, tmp_path, capsys):
    """macOS keeps mlatui's recordings under ~/Library/Application Support."""
    import shlex

    from mlatui.cli import main

    support = tmp_path / "Application Support"
    monkeypatch.setenv("XDG_DATA_HOME", str(support))
    assert main(["replay", str(tmp_path / "none.jsonl")]) == 2
    err = capsys.readouterr().err
    quoted = shlex.quote(str(support / "mlatui" / "runs"))
    assert quoted.startswith("'") and f"kept in {quoted})" in err


AS_ON_A_MAC = """
import json, os, sys
sys.platform = "darwin"
import mlatui, mlatui.cli
from mlatui.host import blas
chosen = blas.choose_blas()  # what the CLI's entry runs
import mlx.core as mx
mx.eval(mx.ones((8, 8)) @ mx.ones((8, 8)))
maps = sorted({l.split()[-1] for l in open("/proc/self/maps") if "openblas" in l.lower()}
    if os.path.exists("/proc/self/maps") else ())  # a real Mac has no /proc
print(json.dumps({"chosen": chosen, "blas": blas.blas_in_use(), "maps": maps,
    "finders": [type(f).__name__ for f in sys.meta_path], "preload": os.environ.get("LD_PRELOAD")}))
"""


def test_a_mac_chooses_no_blas_and_names_accelerate():
    """On macOS MLX calls Accelerate: no preload, no redirect, and the header says so."""
    import json
    import os
    import subprocess

    env = {k: v for k, v in os.environ.items() if k not in ("MLATUI_BLAS", "LD_PRELOAD")}
    done = subprocess.run(
        [sys.executable, "-c", AS_ON_A_MAC], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr
    r = json.loads(done.stdout.strip().splitlines()[-1])
    assert r["chosen"] is None and r["blas"] == "accelerate" and r["preload"] is None, r
    assert "_AfterMlxCore" not in r["finders"] and r["maps"] == [], r  # nothing redirected
