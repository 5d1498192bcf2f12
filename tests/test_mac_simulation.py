"""The Mac Studio path, simulated on Linux (no Mac is available here): a fake Metal backend for
the wired limit, the fit check and the memory pane; a process without `os.sched_*` or `/proc`; a
psutil without `io_counters`. Each test fails if the guard it covers is removed."""

from __future__ import annotations

import threading

import mlatui  # noqa: F401  (preloads OpenBLAS; must precede mlx)

# isort: split
import mlx.core as mx
import pytest
from tiny_scenario import tiny_with_phase

from mlatui.config.runconfig import RunConfig
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
    from mlatui.run.engine import run

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
    assert header.settings["wired_limit"].startswith("16.0 GB (Metal's recommended working set")
    from mlatui.views.run_meta import header_fields

    assert any(f.label == "wired memory" and "16.0 GB" in f.value for f in header_fields(header))


def test_no_wired_limit_where_the_device_has_no_working_set(monkeypatch):
    from mlatui.host.wired import wired_memory

    calls: list[int] = []
    monkeypatch.setattr(mx, "set_wired_limit", calls.append)
    with wired_memory(None) as wired:
        assert wired.limit_bytes is None
    assert calls == []
