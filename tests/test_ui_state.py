"""DashboardState and the pure renderers, on a real engine recording and on hand-built events."""

from __future__ import annotations

from pathlib import Path

import pytest
import ui_events

from mlatui.measure.plans import Setting
from mlatui.stream.event_base import Interval
from mlatui.stream.events import RunEnd, Thresholds
from mlatui.stream.recorder import read_recording
from mlatui.views.dashboard_state import DashboardState
from mlatui.views.dashboard_views import pressure
from mlatui.views.keys import KEYS
from mlatui.views.progress_view import duration
from mlatui.views.summary import acceptance_of, progress_of
from mlatui.widgets import render as r
from mlatui.widgets import validity_pane as vp
from mlatui.widgets.header import thresholds_text
from mlatui.widgets.help import keys_text
from mlatui.widgets.palette import GREY_TEXT

FIXTURE = Path(__file__).parent / "fixtures" / "ui_tiny_run.jsonl"


def state_of(events) -> DashboardState:
    s = DashboardState()
    s.apply_all(events)
    return s


@pytest.fixture(scope="module")
def real() -> DashboardState:
    rec = read_recording(FIXTURE)
    return state_of([rec.header, *rec.events])


def test_marginal_cost_is_median_l2_minus_median_l1():
    s = state_of(ui_events.events())
    stock = dict(s.marginal("stock"))
    # stock at 2048: L=1 1+2.048 = 3.048 ms, L=2 base + 2*2048/500 = 11.24 ms
    assert stock[2048] == pytest.approx(11.24 - 3.048)
    patched = dict(s.marginal("patched"))
    assert patched[2048] == pytest.approx(3.048 * 0.1)
    assert list(stock) == list(ui_events.CONTEXTS)


def test_validity_acceptance_throughput_and_counts():
    s = state_of(ui_events.events())
    assert s.is_invalid(ui_events.INVALID) and not s.is_invalid(256)
    assert s.sweep_invalid(ui_events.INVALID)
    a = s.arms["stock"]
    # depth 3, steps alternate (1,0) and (1,1,0): position 1 always accepted, 2 half the time
    assert acceptance_of(s, "stock").conditional == (1.0, 0.5, 0.0)
    assert a.plain_tok_s == 150.0
    assert a.tok_s_by_setting() == {Setting("", 3): (80.0, False)}
    assert s.arms["patched"].tok_s_by_setting() == {Setting("", 3): (210.0, False)}
    assert a.materialised_calls > 0 and s.arms["patched"].materialised_calls < a.materialised_calls
    assert s.status == "completed" and progress_of(s).fraction == 1.0


def test_live_tok_s_estimate_before_results():
    evts = [e for e in ui_events.events() if e.type not in ("decode_result", "run_end")]
    a = state_of(evts).arms["stock"]
    tok_s, live = a.tok_s_by_setting()[Setting("", 3)]
    assert live and tok_s == pytest.approx(25 / (10 * 4.5) * 1e3)  # 25 tokens in 10 steps of 4.5 ms


def test_error_event_sets_status_and_log():
    s = state_of(ui_events.events(error=True))
    assert s.status == "error" and "boom" in s.error
    assert s.log[-1][1] == "error"
    assert "ERROR: RuntimeError: boom" in r.phase_text(s, 80).plain


def test_changed_sections_are_reported_once():
    s = DashboardState()
    s.take_changed()
    s.apply(RunEnd(1.0, "completed"))
    assert {"header", "phase", "log"} <= s.take_changed()
    assert s.take_changed() == set()


def test_pressure_levels():
    assert pressure(1, None) == "ok"
    assert (
        pressure(70, 100) == "ok"
        and pressure(80, 100) == "high"
        and pressure(95, 100) == "critical"
    )


def test_real_recording_fills_every_section(real):
    assert real.header.synthetic_acceptance
    assert real.status == "completed"
    assert real.contexts() == [128, 256, 512]
    assert all(real.marginal(arm) for arm in ("stock", "patched"))
    assert real.memory is not None and real.validity and real.log
    for arm in ("stock", "patched"):
        a = real.arms[arm]
        assert acceptance_of(real, arm).conditional and a.plain_tok_s and a.tok_s_by_setting()
        assert any(key[1] == arm and key[2] >= 2 for key in real.steps.samples)  # verify steps
    # the patched arm never materialises; stock does at every verify width
    assert real.arms["patched"].materialised_calls == 0 < real.arms["stock"].materialised_calls


def test_header_names_geometry_threshold_device_and_synthetic(real):
    text = r.header_text(real, r.ViewInfo("replay", 4.0, True, 1.0, 6.0), 160).plain
    for needle in (
        "REPLAY ×4",
        "PAUSED",
        "r/n/v 512/128/128",
        "L* formula 170",
        "not calibrated",
        "openblas",
        "scenario tiny",
        "acceptance synthetic",
        "phase 2/2",
    ):
        assert needle in text, needle


def test_threshold_shown_for_current_context():
    t = Thresholds(formula_inf=170, formula_at={128: 73, 1024: 146}, calibrated={1024: 900})
    assert thresholds_text(t, 2000) == "L* formula 170 (T→∞) · 146 at T=1K · calibrated 900 at T=1K"
    assert "73–146 at T=200" in thresholds_text(t, 200)  # between two entries: both
    assert "73 at T=128" in thresholds_text(t, 100)  # below the table: its first entry


def test_arm_text_labels_synthetic_acceptance_and_fits_width(real):
    from mlatui.widgets.arm import arm_text

    for width in (36, 70):
        t = arm_text(real, "stock", width, 14)
        assert "(synthetic)" in t.plain
        assert "materialised" in t.plain and "plain" in t.plain
        assert len(t.plain.split("\n")) == 14


def test_sparkline_scales_and_greys():
    t = r.sparkline([1.0, 2.0, 3.0], [False, True, False], 3, 1, "red")
    assert t.plain == "▁▅█"
    grey = [span for span in t.spans if span.style == GREY_TEXT]
    assert [(g.start, g.end) for g in grey] == [(1, 2)]
    assert r.sparkline([1.0] * 10, [False] * 10, 4, 2).plain.count("\n") == 1


def test_marginal_plot_marks_invalid_contexts():
    from mlatui.views.key_figure import PointStatus, key_figure

    s = state_of(ui_events.events())
    fig = key_figure(s)
    stock = {p.context: p.status for p in fig.series[0].points}
    assert stock[ui_events.INVALID] is PointStatus.INVALID
    assert {st for c, st in stock.items() if c != ui_events.INVALID} == {PointStatus.VALID}
    plot = r.marginal_plot(s, 60, 16).plain
    assert "✗ L=1 invalid" in plot and "context (tokens)" in plot and "✗" in plot.split("\n", 2)[2]


def test_marginal_plot_waits_for_data():
    assert "waiting" in r.marginal_plot(DashboardState(), 60, 16).plain


def test_validity_table_marks_verdicts(real):
    text = vp.validity_text(real, 80).plain
    assert "greyed" in text and text.count("\n") >= 6
    rows = {tuple(line.split()[:2]): line for line in text.splitlines()}
    for (phase, context), v in real.validity.items():
        row = rows[(phase[:5], vp.fmt_context(context))]
        assert ("✓" if v.valid else "✗") in row, (phase, context, v.verdict)
    assert any(v.valid for v in real.validity.values())
    assert not all(v.valid for v in real.validity.values())


def test_memory_and_log_text(real):
    m, mem = real.memory, r.memory_text(real, 80).plain
    assert f"process RSS {r.bytes_text(m.process_rss_bytes)}" in mem
    assert (
        f"active {r.bytes_text(m.mlx_active_bytes)} · cache {r.bytes_text(m.mlx_cache_bytes)}"
        in mem
    )
    assert f"swap {r.bytes_text(m.swap_used_bytes)}" in mem
    log = r.log_text(real).plain
    assert len(log.split("\n")) == len(real.log) and "run completed" in log.split("\n")[-1]


def test_formatters():
    assert vp.ms_text(None) == "–" and vp.ms_text(123.4) == "123" and vp.ms_text(0.1234) == "0.123"
    assert r.bytes_text(2.5e9) == "2.5 GB" and duration(75) == "1m15s"
    assert vp.fmt_context(2048) == "2K" and vp.fmt_context(300) == "300"
    assert r.bar(0.5, 10).plain == "█████░░░░░"


def test_keys_text_groups_the_keys_under_their_headings():
    t = keys_text([k for k in KEYS if k.id in ("export", "pause")]).plain
    assert t.index("RUN") < t.index("p  pause") < t.index("FILES") < t.index("e  export")
    assert "NAVIGATION" not in t and "[" not in t  # no empty group, no binding ids


def test_observer_bench_counts_verify_shaped_forwards():
    from mlatui.commands.bench_observer import verify_samples

    evts = ui_events.events()
    got = verify_samples(evts)
    widths_ge2 = sum(1 for e in evts if e.type == "step" and e.width >= 2 and e.arm == "stock")
    assert len(got["stock"]) == widths_ge2


def test_the_validity_pane_shows_pooled_contexts_apart_from_valid_ones():
    import msgspec

    from mlatui.stream.events import Basis, PhaseStart, PooledValidity, Validity
    from mlatui.widgets.palette import Status, status_style
    from mlatui.widgets.symbols import symbols

    own = Validity(
        1.0, "sweep", 1024, 10.0, 10.1, -1.0, 2.0, True, "valid", Interval(0.99, 0.985, 0.995, 6), 6
    )
    alone = Validity(1.0, "sweep", 2048, 20.0, 20.0, 0.4, 2.0, False, "inconclusive", Interval(1.004, 0.97, 1.04, 6), 6)  # fmt: skip
    pooled = PooledValidity(
        2.0,
        "sweep",
        (1024, 2048),
        12,
        36,
        Interval(1.001, 0.992, 1.009, 36),
        2.0,
        "valid",
        "e",
        "c",
        (2048,),
    )
    decided = msgspec.structs.replace(alone, t=2.0, valid=True, outcome="valid", basis=Basis.POOLED)
    header = [ui_events.header(), PhaseStart(0.5, "sweep", "sweep", 0, 1, 10)]
    before = state_of([*header, own, alone])
    after = state_of([*header, own, alone, pooled, decided])
    text = vp.validity_text(after, 80)
    rows = {line.split()[1]: line for line in text.plain.splitlines()[2:-1]}
    assert "✓ 0.9900× [0.9850, 0.9950]" in rows["1K"] and "✓p" not in rows["1K"]
    assert "✓p 1.004× [0.970, 1.040]" in rows["2K"]  # each ratio with its CI
    assert "? 1.004× [0.970, 1.040]" in vp.validity_text(before, 80).plain
    summary = vp.validity_summary(after).plain
    assert summary == (
        "✓ every checked context valid (±2%) · ✓p 2K by the pooled check 1.0010× [0.9920, 1.0090]"
    )
    # the pooled mark has its own colour, never the plain valid one
    styles = {text.plain[s.start : s.end].strip(): str(s.style) for s in text.spans}
    assert styles["✓p 1.004× [0.970, 1.040]"] == status_style(Status.POOLED)
    assert styles["✓p 1.004× [0.970, 1.040]"] != styles["✓ 0.9900× [0.9850, 0.9950]"]
    said = {s.glyph: s.meaning for _, rows in symbols() for s in rows}
    assert said["✓p"].startswith("bluish green: valid by the pooled check")
    log = [m for _, _, m in after.log]
    assert any(m.startswith("L=1 check pooled after sweep: 1.0010× [0.9920, 1.0090]") for m in log)
    assert any(
        "2048: ✓p valid (pooled; its own 1.004× [0.970, 1.040] contains 1.00)" in m for m in log
    )
