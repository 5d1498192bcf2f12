"""The measured bandwidth limit is main memory's: the CPU probe is sized past the largest cache; a
probe on a busy device reads low, so the limit kept is the best any probe of that size reached, a
run's start probes again when the kept probe is stale or smaller; a step faster than the limit
(served from cache) never moves it, and its MBU is labelled as such on every surface rather than
shown above 100%. Effects are injected (cache sizes, a probe that reads what the test says, a
recording whose header limit is lowered as a loaded probe would)."""

from __future__ import annotations

import dataclasses
import gzip
import json
from pathlib import Path

import pytest

from mlatui import store
from mlatui.measure.bandwidth import (
    CPU_PROBE_MIN_BYTES,
    GPU_PROBE_BYTES,
    PROBE_STALE_S,
    LimitCheck,
    Measured,
    StepBandwidth,
    cache_sizes,
    cpu_probe_bytes,
)
from mlatui.measure.records import BenchRecord
from mlatui.stream.phase_rows import EstimateRow, Quantity
from mlatui.stream.recorder import read_recording
from mlatui.views.bench_report import attention_report, forced_summary, read_record_file
from mlatui.views.dashboard_state import DashboardState
from mlatui.views.export import csv_rows, summary_markdown
from mlatui.views.key_figure import mbu_figure
from mlatui.views.summary import limit_check, summarize
from mlatui.views.units import Ci, mbu_cell
from mlatui.widgets.arm import mbu_line

ROOT = Path(__file__).parents[1]
H100 = ROOT / "docs" / "data" / "h100-mbu-long-context.jsonl.gz"  # carries step bytes and MBU
ATTENTION = ROOT / "tests" / "fixtures" / "recordings" / "cpu-attention-tiny.jsonl.gz"
BENCH_FIELDS = {f.name for f in dataclasses.fields(BenchRecord)}
CPU = {"backend": "cpu", "device_name": "box", "device_memory_bytes": 24 << 30}
QUIET_GB_S, LOADED_GB_S = 5.3, 1.8  # the 2-core CPU's probe quiet, and at load 10-13
T0 = 1_000_000.0


class FakeProbe:
    """The probe as the device answers it: `reading` GB/s (the test sets the load)."""

    def __init__(self, reading: float):
        self.reading, self.calls = reading, 0

    def __call__(self, size: int, reps: int = 5, budget_s: float = 0.5) -> Measured:
        self.calls += 1
        return Measured(self.reading, self.reading / 2, size, reps, 0.0)


MB = 1 << 20
XEON_CACHES = [48 << 10, 32 << 10, 2 << 20, 260 * MB]  # this box's sysfs: a 260 MB L3


@pytest.fixture
def fake_probe(monkeypatch, tmp_path) -> FakeProbe:
    monkeypatch.setenv("MLATUI_CACHE_DIR", str(tmp_path))
    fake = FakeProbe(LOADED_GB_S)
    monkeypatch.setattr(store, "probe", fake)
    monkeypatch.setattr(store, "cache_sizes", lambda: XEON_CACHES)
    monkeypatch.setattr(store, "available_bytes", lambda: 22 << 30)  # this box, 24 GB
    monkeypatch.delenv(store.PROBE_MB_ENV, raising=False)  # conftest's small probe
    return fake


def _sysfs(root: Path, sizes: dict[str, list[str]]) -> Path:
    for cpu, levels in sizes.items():
        for i, size in enumerate(levels):
            index = root / cpu / "cache" / f"index{i}"
            index.mkdir(parents=True)
            (index / "size").write_text(size + "\n")
    return root


def test_the_caches_are_read_from_sysfs_or_sysctl(tmp_path, monkeypatch):
    root = _sysfs(tmp_path / "cpu", {"cpu0": ["48K", "32K", "2048K", "266240K"], "cpu1": ["4M"]})
    (root / "cpufreq").mkdir()  # not a CPU
    assert sorted(cache_sizes(root)) == sorted([48 << 10, 32 << 10, 2 * MB, 260 * MB, 4 * MB])
    asked: list[str] = []

    def sysctl(name: str) -> int | None:  # Apple silicon: no L3, the P cores' L2
        asked.append(name)
        return {"hw.l2cachesize": 4 * MB, "hw.perflevel0.l2cachesize": 16 * MB}.get(name)

    monkeypatch.setattr("sys.platform", "darwin")
    assert sorted(cache_sizes(tmp_path / "none", sysctl)) == [4 * MB, 16 * MB]
    assert "hw.l3cachesize" in asked
    monkeypatch.setattr("sys.platform", "win32")
    assert cache_sizes(tmp_path / "none", sysctl) == []


@pytest.mark.parametrize(
    ("caches", "available", "expected"),
    [
        (XEON_CACHES, 22 << 30, 1040 * MB),  # this box: 4 x its 260 MB L3
        ([16 * MB, 4 * MB], 64 << 30, CPU_PROBE_MIN_BYTES),  # Apple silicon: the SLC unreported
        ([], 64 << 30, CPU_PROBE_MIN_BYTES),  # nothing reported
        ([260 * MB], 2 << 30, 256 * MB),  # little memory free: 1/8 of it
        ([260 * MB], 8 << 20, MB),
    ],
)
def test_the_cpu_probe_is_past_the_largest_cache(caches, available, expected):
    size = cpu_probe_bytes(caches, available)
    assert size == expected and size % MB == 0
    if available >= 16 << 30:
        assert size >= 4 * max(caches, default=0) and size >= 4 * 96 * MB  # Apple's largest SLC


def test_the_probe_sizes_of_each_backend(fake_probe):
    assert store._probe_size(CPU) == 1040 * MB
    assert store._probe_size({**CPU, "device_memory_bytes": 8 << 30}) == CPU_PROBE_MIN_BYTES
    h100 = {"backend": "cuda", "device_name": "NVIDIA H100", "device_memory_bytes": 80 << 30}
    assert store._probe_size(h100) == GPU_PROBE_BYTES >= 4 * 50 * MB  # past H100's 50 MB L2
    mac = {"backend": "metal", "device_name": "Apple M2 Max", "device_memory_bytes": 32 << 30}
    assert store._probe_size(mac) >= 4 * 96 * MB  # past the Max/Ultra SLC


def test_the_probe_size_set_by_hand(fake_probe, monkeypatch):
    monkeypatch.setenv(store.PROBE_MB_ENV, "64")
    assert store._probe_size(CPU) == 64 * MB
    monkeypatch.setenv(store.PROBE_MB_ENV, "1G")
    with pytest.raises(ValueError, match="MLATUI_PROBE_MB='1G': expected a whole number of MB"):
        store._probe_size(CPU)


def test_a_probe_smaller_than_the_caches_is_replaced_not_kept(fake_probe):
    """A file kept by a 32 MB probe read the L3 (26 GB/s copying here, 1.3 past it): the next
    start probes past the cache and keeps that reading, lower though it is."""
    path = store.bandwidth_path(CPU)
    path.parent.mkdir(parents=True)
    cached = Measured(25.0, 26.0, 32 * MB, 5, T0)
    path.write_text(json.dumps(dataclasses.asdict(cached)))
    fresh = store.measured_limit(CPU, T0 + 60)
    assert fake_probe.calls == 1 and fresh.read_gb_s == LOADED_GB_S
    assert fresh.probe_bytes == 1040 * MB
    assert store.measured_limit(CPU, T0 + 120) == fresh and fake_probe.calls == 1


def test_a_loaded_probe_never_lowers_the_limit_and_a_stale_one_is_probed_again(fake_probe):
    fake_probe.reading = QUIET_GB_S
    assert store.measured_limit(CPU, T0).read_gb_s == QUIET_GB_S
    assert store.measured_limit(CPU, T0 + 60).read_gb_s == QUIET_GB_S and fake_probe.calls == 1
    fake_probe.reading = LOADED_GB_S  # a day on, the box is busy: probed again, kept the best
    later = store.measured_limit(CPU, T0 + PROBE_STALE_S + 1)
    assert fake_probe.calls == 2 and later.read_gb_s == QUIET_GB_S
    assert later.probed_at_s == T0 + PROBE_STALE_S + 1  # fresh: not probed again at once
    store.measured_limit(CPU, T0 + PROBE_STALE_S + 2)
    assert fake_probe.calls == 2


def test_a_step_faster_than_the_limit_leaves_the_kept_limit_alone(fake_probe, tiny_census):
    """A small model's step served from cache reads far above memory bandwidth: the run's MBU
    says so, and neither this run's nor the next run's limit moves."""
    fake_probe.reading = QUIET_GB_S
    first = store.measured_limit(CPU, T0)
    bandwidth = StepBandwidth(tiny_census, first.read_gb_s)
    row = EstimateRow(
        quantity=Quantity.STEP_MS, arm="stock", width=2, median=1e-6, low=1e-6, high=2e-6, n=6
    )
    rows = bandwidth.rows(64, [row])
    rate = next(r for r in rows if r.quantity == "gb_s")
    assert LimitCheck(first.read_gb_s, rate.median).contradicted
    assert store.kept_limit(CPU) == first
    assert store.measured_limit(CPU, T0 + 60) == first and fake_probe.calls == 1
    fake_probe.reading = LOADED_GB_S  # a day on, under load: probed again, the best kept
    later = store.measured_limit(CPU, T0 + PROBE_STALE_S + 1)
    assert fake_probe.calls == 2 and later.read_gb_s == QUIET_GB_S


def test_an_old_store_file_without_a_probe_time_is_probed_again(fake_probe):
    path = store.bandwidth_path(CPU)
    path.parent.mkdir(parents=True)
    path.write_text('{"read_gb_s": 1.81, "copy_gb_s": 1.36, "probe_bytes": 1, "reps": 5}')
    fake_probe.reading = QUIET_GB_S
    assert store.device_bandwidth(CPU)["measured_read_gb_s"] == QUIET_GB_S
    assert fake_probe.calls == 1


@pytest.fixture
def tiny_census():
    from test_step_bytes import built

    return built(1, None)[1]


def _loaded_copy(folder: Path, limit_gb_s: float) -> Path:
    """The H100 recording as it would read had its probe run on a busy device at `limit_gb_s`:
    the header's limit replaced and the MBU rows computed against it (the steps' own GB/s
    unchanged: they reach 229 GB/s)."""
    out = folder / f"h100-limit-{limit_gb_s:g}.jsonl"
    lines = []
    with gzip.open(H100, "rt", encoding="utf-8") as f:
        for line in f:
            record = json.loads(line)
            if record["type"] == "header":
                bandwidth = record["device"]["bandwidth"]
                ratio = bandwidth["measured_read_gb_s"] / limit_gb_s
                bandwidth["measured_read_gb_s"] = limit_gb_s
            for row in record.get("rows", []) if record["type"] == "estimate" else []:
                if row["quantity"] in ("mbu", "mbu_most"):
                    row.update({k: row[k] * ratio for k in ("median", "low", "high")})
            lines.append(json.dumps(record, separators=(",", ":")))
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return out


def _state(path: Path = H100) -> DashboardState:
    rec = read_recording(path)
    state = DashboardState()
    state.apply_all([rec.header, *rec.events])
    return state


def test_mbu_against_a_limit_the_run_beat_is_unknown_on_every_surface(tmp_path):
    state = _state(_loaded_copy(tmp_path, 100.0))  # steps read up to 229 GB/s: contradicted
    check = limit_check(state)
    assert check is not None and check.contradicted
    assert check.reached_gb_s == pytest.approx(228.83, abs=0.01)  # the final estimates
    raw = [r.median for e in state.estimates.values() for r in e.rows if r.quantity == "mbu"]
    assert max(raw) > 2  # what the run computed: over 200%
    summary = summarize(state)
    rows = [r for p in summary.phases for r in p.sweep]
    assert rows and all(not r.mbu and not r.mbu_most for r in rows)
    assert all(r.gb_s for r in rows if r.width == 2)  # the rates stand: bytes over time
    markdown = summary_markdown(summary)
    assert "limit unknown · 229 GB/s" in markdown  # no MBU: the rate alone
    assert not any(_percent_over_100(cell) for cell in markdown.split("|"))
    exported = {r.get("quantity") for r in csv_rows(summary)}
    assert "gb_s" in exported and not exported & {"mbu", "mbu_most"}
    state.context = rows[-1].context
    for arm in ("stock", "patched"):
        wide = mbu_line(state, arm, narrow=False)
        assert wide == "MBU: a step read 229 GB/s > 100 GB/s measured: served from cache?"
        assert mbu_line(state, arm, narrow=True) == "MBU: from cache? (read 229 > 100 GB/s)"
        assert len(wide) <= 72  # one line in an arm pane at 160 columns, 4-digit figures too
    figure = mbu_figure(state)
    assert figure.empty and "a step read 229 GB/s > 100 GB/s measured: served" in figure.notice


def test_mbu_against_a_limit_that_holds_is_shown():
    state = _state()  # the recording as it is: 2447 GB/s measured, steps at most 229
    check = limit_check(state)
    assert check is not None and not check.contradicted
    rows = [r for p in summarize(state).phases for r in p.sweep]
    assert all(r.mbu for r in rows if r.width == 2)
    state.context = rows[-1].context
    assert mbu_line(state, "patched", narrow=True).startswith("MBU @128K L=1 ")
    assert not mbu_figure(state).empty


def test_a_rate_without_an_mbu_says_the_limit_is_unknown():
    assert mbu_cell(None, None, Ci(3.91, 3.5, 4.2)) == "limit unknown · 3.91 GB/s"
    assert mbu_cell(None, None, None) == "–"
    assert LimitCheck(1.81, 3.91).contradicted and not LimitCheck(5.3, 3.91).contradicted


def _percent_over_100(cell: str) -> bool:
    head = cell.strip().split("%")[0]
    try:
        return "%" in cell and float(head) > 100
    except ValueError:
        return False


def test_bench_attention_mbu_against_a_contradicted_limit_is_unknown():
    """The kept CPU file's steps read up to ~1.2 GB/s against its 1.81 GB/s limit; the same
    records against a limit a busy probe read at 0.5 GB/s say the limit is unknown."""
    records = [
        BenchRecord(**{k: v for k, v in line.items() if k in BENCH_FIELDS})
        for line in read_record_file(ATTENTION).lines
    ]
    held = attention_report(forced_summary(records), [1, 2])
    loaded = [_with_limit(r, 0.5) for r in records]
    report = attention_report(forced_summary(loaded), [1, 2])
    assert "from cache?" not in held and "63%" in held
    assert "MBU a step read 1.15 GB/s > 0.500 GB/s measured: served from cache?" in report
    table_rows = [line for line in report.splitlines() if line.startswith("| 64 ")]
    assert table_rows and all("%" not in row and "from cache?" in row for row in table_rows)


def _with_limit(record: BenchRecord, limit_gb_s: float) -> BenchRecord:
    limit = {**record.settings["bandwidth_limit"], "measured_read_gb_s": limit_gb_s}
    return dataclasses.replace(record, settings={**record.settings, "bandwidth_limit": limit})


@pytest.mark.parametrize("size", [(80, 24), (160, 50)])
async def test_the_arm_panes_say_the_limit_is_unknown_uncut(tmp_path, size):
    from test_ui_cut_text import cut_lines
    from ui_settled import settled

    from mlatui.stream.sources import ReplaySource
    from mlatui.widgets.app import MlatuiApp
    from mlatui.widgets.panes import Pane

    path = _loaded_copy(tmp_path, 100.0)
    app = MlatuiApp(ReplaySource(path, speed=4096.0), mode="replay", ui_hz=20, out_dir=tmp_path)
    async with app.run_test(size=size) as pilot:
        await settled(pilot)
        if app.compact:
            await pilot.press("2")  # the arm panes' page
            await pilot.pause()
        shown = " ".join(p.render().plain for p in app.query(Pane).results())
        said = "MBU: from cache?" if app.compact else "MBU: a step read"
        assert said in shown and "%" not in shown.split(said)[1][:40]
        assert cut_lines(app) == []
