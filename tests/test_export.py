"""The dashboard's export (`e`, `replay --dump`): metadata, verdict, L = 1 table, marginal cost,
per-phase tables, numbers rounded to their CI, and a mid-run export with what exists so far."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import msgspec
import pytest

from mlatui.stream.recorder import iter_recording
from mlatui.stream.run_settings import WorldRecord
from mlatui.views.dashboard_state import DashboardState
from mlatui.views.units import Ci, sig
from mlatui.views.verdict_strip import verdict_line
from tests import summaries

ROOT = Path(__file__).resolve().parents[1]
# a fixed recording (tests/fixtures/recordings/README.md): the numbers below are read from it
DEMO = ROOT / "tests" / "fixtures" / "recordings" / "cpu-default-full.jsonl.gz"
FIXTURE = ROOT / "tests" / "fixtures" / "ui_tiny_run.jsonl"


def fold(path: Path, upto: int | None = None) -> DashboardState:
    s = DashboardState()
    for i, (_, e) in enumerate(iter_recording(path)):
        if upto is not None and i >= upto:
            break
        s.apply(e)
    return s


@pytest.fixture(scope="module")
def demo() -> DashboardState:
    return fold(DEMO)


def test_ci_rounding_follows_the_half_width():
    assert Ci(49.299604599999995, 48.54, 51.83).text() == "49.3 [48.5, 51.8]"
    assert Ci(0.98113, 0.97062, 0.99329).text("×") == "0.981× [0.971, 0.993]"
    assert Ci(81.9, 61.4, 94.5).text() == "82 [61, 94]"
    assert Ci(9.079016666, 9.079016666, 9.079016666).text() == "9.08"  # one round: no CI
    assert Ci(1234.5).cells() == ("1234", "", "")  # 3 significant digits, never fewer integers
    assert sig(0.000123456) == "0.000123"


def test_markdown_has_metadata_verdict_l1_marginal_and_each_phase(demo):
    md = summaries.markdown(demo)
    for line in (
        "- model: embedded (mlatui_mla)",
        "- device: AMD EPYC x86_64",
        "- BLAS: openblas (/usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3)",
        "- mlx: 0.32.4",
        "- mlx-lm: 0.32.2",
        "- scenario: default",
        "- seed: 0",
        "- threshold: gate formula, L* formula 170 (T→∞), not calibrated, indexer patched",
        f"**Verdict:** {verdict_line(demo)}",
        "## L = 1 check (both arms take the same branch: paired ratio 1 ± 2%)",
        "## Marginal cost of a second query (L=2 − L=1, median over rounds)",
        "## Phase sweep (sweep)",
        "## Phase tune (tune)",
    ):
        assert line in md, line
    # the recorded numbers, rounded to what their CI supports (never 49.37... or 241.03...)
    assert "| 4096 | 241.0 [233.3, 244.3] | 4.2 [3.1, 5.2] | ✓ valid |" in md
    assert (
        "| sweep | 512 | 9.93 | 10.1 | 0.981× [0.971, 0.993] | -1.9% | 22 | ? inconclusive |" in md
    )
    assert "| 1024 | 3 | 49.4 [48.5, 51.8] |" in md
    assert (
        "| 2000 | patched | draft-model d3 | 82 [61, 94] | 1.60× [1.24, 1.74] |" in md
    )  # schema 3: the header names the kind
    assert "Left out of verdicts (L=1 check invalid or inconclusive): 512, 1024" in md


def test_csv_sections_are_filterable_and_never_mix_phases(demo):
    rows = list(csv.DictReader(io.StringIO(summaries.csv(demo))))
    tables = {r["table"] for r in rows}
    assert tables == {"meta", "verdict", "l1_check", "marginal", "sweep", "decode"}
    meta = {r["quantity"]: r["text"] for r in rows if r["table"] == "meta"}
    assert meta["model"] == "embedded (mlatui_mla)" and meta["mlx_lm"] == "0.32.2"
    assert meta["seed"] == "0" and meta["status"] == "completed"
    assert next(r["text"] for r in rows if r["table"] == "verdict") == verdict_line(demo)
    assert {r["kind"] for r in rows if r["table"] == "sweep"} == {"sweep"}
    assert {r["kind"] for r in rows if r["table"] == "decode"} == {"tune"}
    marg = {(r["context"], r["arm"]): r for r in rows if r["table"] == "marginal"}
    assert (marg[("4096", "stock")]["median"], marg[("4096", "stock")]["low"]) == ("241.0", "233.3")
    assert (
        marg[("4096", "stock")]["check"] == "valid"
        and marg[("512", "stock")]["check"] == "inconclusive"
    )
    tok = next(
        r
        for r in rows
        if r["table"] == "decode"
        and r["context"] == "2000"
        and r["arm"] == "patched"
        and r["width"] == "3"
        and r["quantity"] == "vs_plain"
    )
    assert (tok["median"], tok["low"], tok["high"]) == ("1.60", "1.24", "1.74")
    for r in rows:  # no unrounded float anywhere
        for key in ("median", "low", "high"):
            assert len(r[key].split(".")[-1]) <= 6, r


def test_a_mid_run_export_has_what_exists_so_far():
    s = fold(DEMO, upto=600)  # in the sweep: 512 decided, 1024 under way
    assert s.status == "running"
    md = summaries.markdown(s)
    assert "status: running (phase 1/2 sweep" in md
    assert "## Phase sweep (sweep) — in progress" in md
    assert "| 512 | 18.33 [17.90, 19.04] | 0.59 [0.50, 1.04] | ? inconclusive |" in md
    assert "| 1024 |" in md and "… pending" in md
    rows = list(csv.DictReader(io.StringIO(summaries.csv(s))))
    assert sum(r["table"] == "sweep" for r in rows) > 10
    assert any(r["table"] == "marginal" and r["context"] == "1024" for r in rows)


def test_a_run_without_estimates_exports_medians_without_cis():
    s = fold(FIXTURE)
    md = summaries.markdown(s)
    assert "- schema: 8" in md and "| 128 | 2 | 12.6 | 5.77 | – |" in md
    assert "✗ invalid" in md and "acceptance (synthetic)" in md


async def test_e_mid_replay_writes_what_the_dashboard_has_so_far(tmp_path):
    import time

    from mlatui.stream.events import Estimate
    from mlatui.stream.sources import ReplaySource
    from mlatui.widgets.app import MlatuiApp

    class PausesAfterTwoEstimates(ReplaySource):
        """Stops itself mid-run, however late or early the UI drains it: at the estimate that
        makes two (phase, context) cells, the dashboard's own key. A drain on a busy host covers
        more of the recording; what it read past that estimate never reaches the dashboard."""

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.seen: set[tuple[str, int]] = set()

        def drain(self):
            kept = []
            for e in super().drain():
                if len(self.seen) >= 2:
                    break
                kept.append(e)
                if isinstance(e, Estimate):
                    self.seen.add((e.phase, e.context))
            if len(self.seen) >= 2:
                self.pause()
            return kept

    app = MlatuiApp(PausesAfterTwoEstimates(DEMO, speed=64.0), ui_hz=20, out_dir=tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        end = time.monotonic() + 60
        while len(app.dash.estimates) < 2:
            assert time.monotonic() < end, "timed out"
            await pilot.pause(0.05)
        await pilot.press("e")
        await pilot.pause()
        assert app.dash.status == "running"
    (csv_path,) = tmp_path.glob("mlatui-summary-*.csv")
    rows = list(csv.DictReader(io.StringIO(csv_path.read_text())))
    assert {"meta", "verdict", "marginal", "sweep"} <= {r["table"] for r in rows}
    assert next(r["text"] for r in rows if r["quantity"] == "status").startswith("running")
    (md_path,) = tmp_path.glob("mlatui-summary-*.md")
    assert "## Phase sweep (sweep) — in progress" in md_path.read_text()


def test_both_summaries_name_the_device_drifts_in_one_wording():
    from mlatui.stream.events import DriftEvent
    from tests.summaries import markdown as summary_markdown

    events = [e for _, e in iter_recording(FIXTURE)]
    drifts = [DriftEvent(9.0 + i, "sweep", 256, i, 10.0, 12.0, 20.0) for i in range(13)]
    state = fold(FIXTURE)
    state.apply_all(drifts)
    want = (
        "Device drift: 13 step(s) of the L = 1 level > 10% between rounds (both arms; paired "
        "figures cancel them): sweep @ 256 round 1 +20%, "
    )
    for text in (summaries.markdown(state), summary_markdown([*events, *drifts])):
        (line,) = [x for x in text.splitlines() if x.startswith("Device drift")]
        assert line.startswith(want) and line.endswith("sweep @ 256 round 12 +20%, … (1 more)"), (
            line
        )


def test_the_metadata_block_names_the_run_seed_and_the_ranks():

    from tests.summaries import markdown as summary_markdown

    events = [e for _, e in iter_recording(FIXTURE)]
    h = events[0]
    world = WorldRecord(world_size=2, backend="ring", shard="tensor", hosts=("vm", "vm"))
    seeded = msgspec.structs.replace(
        h,
        scenario=msgspec.structs.replace(h.scenario, seed=3),
        settings=msgspec.structs.replace(h.settings, seed=4),
        distributed=world,
    )
    state = DashboardState()
    state.apply_all([seeded, *events[1:]])
    for md in (summaries.markdown(state), summary_markdown([seeded, *events[1:]])):
        assert "- seed: 7" in md.splitlines()
        assert "- distributed: 2 ranks · ring · tensor · vm ×2 (heads and memory: rank 0's)" in md


def test_the_metadata_names_the_blas_threading_when_recorded():

    import ui_events

    from mlatui.views.run_meta import header_fields

    h = ui_events.header()
    assert "blas_threading" not in {f.key for f in header_fields(h)}  # older recordings
    text = "2 threads; idle workers sleep at once (OPENBLAS_THREAD_TIMEOUT=4, mlatui's default)"
    h = msgspec.structs.replace(h, device=msgspec.structs.replace(h.device, blas_threading=text))
    fields = {f.key: f for f in header_fields(h)}
    assert (
        fields["blas_threading"].value == text
        and fields["blas_threading"].label == "BLAS threading"
    )
