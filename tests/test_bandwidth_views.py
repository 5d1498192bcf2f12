"""The device's bandwidth limit as the dashboard header and the system pane say it."""

import msgspec

from mlatui.stream.recorder import read_recording
from mlatui.stream.run_settings import BandwidthLimit
from mlatui.views.dashboard_state import DashboardState
from mlatui.views.run_meta import header_fields
from mlatui.views.units import Ci, limit_short, limit_text, mbu_cell
from mlatui.widgets.header import header_pieces

H100 = BandwidthLimit(
    measured_read_gb_s=2891.4,
    measured_copy_gb_s=2650.0,
    probe_bytes=1 << 30,
    published_gb_s=3350.0,
    published_name="NVIDIA H100 SXM",
    published_source="NVIDIA H100 datasheet",
)


def test_limit_texts():
    assert limit_text(H100) == (
        "measured 2891 GB/s read, 2650 GB/s copy; published 3350 GB/s (NVIDIA H100 SXM)"
    )
    assert limit_short(H100) == "mem 2891 GB/s meas. / 3350 pub."
    cpu = BandwidthLimit(measured_read_gb_s=1.81, measured_copy_gb_s=1.7)
    assert limit_short(cpu) == "mem 1.81 GB/s meas." and "published" not in limit_text(cpu)
    assert mbu_cell(Ci(0.05, 0.04, 0.06), Ci(0.075, 0.07, 0.08), Ci(174.0, 150.0, 190.0)) == (
        "5.0% [4.0, 6.0] .. 7.5% · 174 GB/s"
    )


def test_the_header_line_and_the_system_pane_show_the_limit():
    header = read_recording("tests/fixtures/ui_tiny_run.jsonl").header
    header = msgspec.structs.replace(
        header, device=msgspec.structs.replace(header.device, bandwidth=H100)
    )
    _, second = header_pieces(DashboardState(), header)
    assert any(p.long.plain == f"memory {limit_text(H100)}" for p in second)
    fields = {f.key: f.value for f in header_fields(header)}
    assert fields["bandwidth"] == limit_text(H100)
