"""The measured bandwidth limit under load: a probe on a busy device reads low, so the limit kept is
the best any probe or any run's step reached, a run's start probes again when the kept probe is
stale or a step read faster than it, and MBU against a limit a run's own steps beat is said to be
unknown on every surface rather than shown above 100%. Effects are injected (a probe that reads
what the test says, a recording whose header limit is lowered as a loaded probe would)."""

from __future__ import annotations

import dataclasses
import gzip
import json
from pathlib import Path

import pytest

from mlatui.measure.bandwidth import (
    CPU_PROBE_BYTES,
    PROBE_STALE_S,
    LimitCheck,
    Measured,
    StepBandwidth,
)
from mlatui.measure.records import BenchRecord
from mlatui.store import bandwidth as store
from mlatui.stream.recorder import read_recording
from mlatui.views.bandwidth_pane import limit_check, mbu_line
from mlatui.views.bandwidth_text import mbu_cell
from mlatui.views.bench_report import attention_report, forced_summary, read_record_file
from mlatui.views.dashboard_state import DashboardState
from mlatui.views.export import csv_rows, summary_markdown
from mlatui.views.key_figure import mbu_figure
from mlatui.views.rounding import Ci
from mlatui.views.summary import summarize

ROOT = Path(__file__).parents[1]
H100 = ROOT / "docs" / "data" / "h100-mbu-long-context.jsonl.gz"  # carries step bytes and MBU
ATTENTION = ROOT / "tests" / "fixtures" / "recordings" / "cpu-attention-tiny.jsonl.gz"
BENCH_FIELDS = {f.name for f in dataclasses.fields(BenchRecord)}
CPU = {"backend": "cpu", "device_name": "box", "device_memory_bytes": 1 << 34}
QUIET_GB_S, LOADED_GB_S = 5.3, 1.8  # the 2-core CPU's probe quiet, and at load 10-13
T0 = 1_000_000.0


class FakeProbe:
    """The probe as the device answers it: `reading` GB/s (the test sets the load)."""

    def __init__(self, reading: float):
        self.reading, self.calls = reading, 0

    def __call__(self, size: int, reps: int = 5) -> Measured:
        self.calls += 1
        return Measured(self.reading, self.reading / 2, size, reps, 0.0)


@pytest.fixture
def fake_probe(monkeypatch, tmp_path) -> FakeProbe:
    monkeypatch.setenv("MLATUI_CACHE_DIR", str(tmp_path))
    fake = FakeProbe(LOADED_GB_S)
    monkeypatch.setattr(store, "probe", fake)
    return fake


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


def test_a_step_faster_than_a_loaded_probe_raises_the_next_runs_limit(fake_probe):
    """The first probe runs under load (1.8 GB/s); a run's step reads 3.9 GB/s: the store keeps
    it, this run's limit stays (the header said it), the next run probes again and its limit is
    never below 3.9 even when the box is still busy."""
    first = store.measured_limit(CPU, T0)
    assert first.read_gb_s == LOADED_GB_S
    note = store.reached_recorder(CPU)
    note(1.2)  # below the limit: nothing to keep
    assert store.kept_limit(CPU).reached_gb_s == 0.0
    note(3.9)
    note(3.1)  # lower than already noted
    assert store.kept_limit(CPU) == dataclasses.replace(first, reached_gb_s=3.9)
    assert fake_probe.calls == 1  # mid-run: kept, not probed
    nxt = store.measured_limit(CPU, T0 + 60)
    assert fake_probe.calls == 2 and nxt.read_gb_s == 3.9 and nxt.reached_gb_s == 0.0
    fake_probe.reading = QUIET_GB_S  # a quiet probe later is above both: it becomes the limit
    note(QUIET_GB_S + 1)
    assert store.measured_limit(CPU, T0 + 120).read_gb_s == QUIET_GB_S + 1
    fake_probe.reading = LOADED_GB_S
    store.reached_recorder(CPU)(9.0)
    assert store.measured_limit(CPU, T0 + 180).read_gb_s == 9.0


def test_an_old_store_file_without_a_probe_time_is_probed_again(fake_probe):
    path = store.bandwidth_path(CPU)
    path.parent.mkdir(parents=True)
    path.write_text('{"read_gb_s": 1.81, "copy_gb_s": 1.36, "probe_bytes": 1, "reps": 5}')
    fake_probe.reading = QUIET_GB_S
    assert store.device_bandwidth(CPU)["measured_read_gb_s"] == QUIET_GB_S
    assert fake_probe.calls == 1


def test_the_step_bandwidth_notes_a_step_faster_than_its_limit(tiny_census):
    noted: list[float] = []
    bandwidth = StepBandwidth(tiny_census, limit_gb_s=1e-9, note_reached=noted.append)
    row = {"quantity": "step_ms", "arm": "stock", "width": 2, "median": 2.0}
    rows = bandwidth.rows(64, [{**row, "low": 1.0, "high": 4.0, "n": 6}])
    rate = next(r for r in rows if r["quantity"] == "gb_s")
    assert noted == [rate["median"]]
    StepBandwidth(tiny_census, 1e9, noted.append).rows(64, [{**row, "low": 1, "high": 4, "n": 6}])
    assert len(noted) == 1  # under the limit: nothing noted


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
    raw = [r["median"] for e in state.estimates.values() for r in e.rows if r["quantity"] == "mbu"]
    assert max(raw) > 2  # what the run computed: over 200%
    summary = summarize(state)
    rows = [r for p in summary.phases for r in p.sweep]
    assert rows and all(not r.mbu and not r.mbu_most for r in rows)
    assert all(r.gb_s for r in rows if r.width == 2)  # the rates stand: bytes over time
    markdown = summary_markdown(summary)
    assert "limit unknown · 229 GB/s" in markdown
    assert not any(_percent_over_100(cell) for cell in markdown.split("|"))
    exported = {r.get("quantity") for r in csv_rows(summary)}
    assert "gb_s" in exported and not exported & {"mbu", "mbu_most"}
    state.context = rows[-1].context
    for arm in ("stock", "patched"):
        assert mbu_line(state, arm, narrow=False) == (
            "MBU: limit unknown: a step read 229 GB/s, above the 100 GB/s measured"
        )
        assert mbu_line(state, arm, narrow=True) == "MBU: limit unknown (read 229 > 100 GB/s)"
    figure = mbu_figure(state)
    assert figure.empty and "limit unknown: a step read 229 GB/s" in figure.notice


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
    assert "limit unknown" not in held and "63%" in held
    assert "MBU limit unknown: a step read 1.15 GB/s, above the 0.500 GB/s measured" in report
    table_rows = [line for line in report.splitlines() if line.startswith("| 64 ")]
    assert table_rows and all("%" not in row and "limit unknown" in row for row in table_rows)


def _with_limit(record: BenchRecord, limit_gb_s: float) -> BenchRecord:
    limit = {**record.settings["bandwidth_limit"], "measured_read_gb_s": limit_gb_s}
    return dataclasses.replace(record, settings={**record.settings, "bandwidth_limit": limit})


def test_the_probe_size_is_the_cpu_one_on_cpu():
    assert store._probe_size(CPU) == CPU_PROBE_BYTES


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
        assert (
            "MBU: limit unknown" in shown and "%" not in shown.split("MBU: limit unknown")[1][:40]
        )
        assert cut_lines(app) == []
