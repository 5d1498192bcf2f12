"""`mlatui compare A B`: two recordings side by side on one screen, and as text with --dump."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest
import ui_events
from test_import_hygiene import no_mlx_env

from mlatui.cli import main
from mlatui.stream.events import Estimate, PhaseStart, Validity
from mlatui.stream.phase_rows import EstimateRow, Quantity
from mlatui.views.compare import Run, compare, compare_files
from mlatui.views.dashboard_state import DashboardState
from mlatui.views.summary import Check
from mlatui.widgets.compare_app import CompareApp
from mlatui.widgets.help import HelpScreen

ROOT = Path(__file__).resolve().parents[1]
# fixed recordings (tests/fixtures/recordings/README.md): the numbers below are read from them
DEMO = ROOT / "tests" / "fixtures" / "recordings" / "cpu-default-full.jsonl.gz"
REFBLAS = ROOT / "tests" / "fixtures" / "recordings" / "cpu-launch-refblas.jsonl.gz"
TINY = ROOT / "tests" / "fixtures" / "ui_tiny_run.jsonl"
H200 = ROOT / "tests" / "fixtures" / "recordings" / "h200-real-patch.jsonl.gz"
BENCH_RECORD = ROOT / "tests" / "fixtures" / "recordings" / "bench-attention-glm-h200.jsonl"


def _run(label: str, marginal: dict[str, tuple], valid: bool = True, **header) -> Run:
    """A run with one sweep context (2048) whose estimates are given by hand."""
    h = msgspec.structs.replace(ui_events.header(), **header)
    rows = tuple(
        EstimateRow(quantity=Quantity.MARGINAL_MS, arm=arm, width=2, median=m, low=lo, high=hi, n=8)
        for arm, (m, lo, hi) in marginal.items()
    )
    s = DashboardState()
    s.apply_all(
        [
            h,
            PhaseStart(0.1, "sweep", "sweep", 0, 1, 10, (2048,)),
            Validity(
                0.5, "sweep", 2048, 10.0, 10.0, 0.1, 2.0, valid, "valid" if valid else "invalid"
            ),
            Estimate(0.6, "sweep", 2048, 8, True, "valid", rows),
        ]
    )
    return Run(label, Path(f"{label.lower()}.jsonl"), s)


def test_ratio_range_and_significance_from_hand_built_estimates():
    a = _run("A", {"stock": (100.0, 90.0, 110.0), "patched": (4.0, 3.0, 5.0)})
    device = msgspec.structs.replace(
        ui_events.header().device, name="NVIDIA H200", blas="n/a (gpu)"
    )
    b = _run(
        "B",
        {"stock": (25.0, 20.0, 30.0), "patched": (4.4, 3.5, 5.5)},
        device=device,
        mlx_version="0.33.0",
    )
    cmp = compare(a, b)
    stock, patched = cmp.section(Quantity.MARGINAL_MS)
    assert (stock.arm, stock.context, patched.arm) == ("stock", 2048, "patched")
    assert stock.ratio == pytest.approx(0.25)
    assert stock.ratio_range == pytest.approx((20 / 110, 30 / 90))
    assert stock.differs and stock.valid  # CIs apart: a real difference
    assert patched.ratio == pytest.approx(1.1) and not patched.differs  # CIs overlap
    assert {f.key for f in cmp.differing} == {"device", "blas", "mlx"}
    assert "started" not in {f.key for f in cmp.differing}
    invalid = compare(a, _run("B", {"stock": (25.0, 20.0, 30.0)}, valid=False))
    (row,) = invalid.section(Quantity.MARGINAL_MS)
    assert row.check_b == Check.INVALID and not row.valid


def test_dump_prints_the_header_diff_both_verdicts_and_the_shared_numbers(capsys):
    assert main(["compare", str(DEMO), str(REFBLAS), "--dump"]) == 0
    out = capsys.readouterr().out
    assert "| BLAS | openblas | bundled reference BLAS" in out.replace(
        " (/usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3)", ""
    )
    assert "- A: stock spec rejected (slower at 2000) · patched spec wins 1.60× [1.24, 1.74]" in out
    assert "- B: Δ2 @ 2K:" in out
    # the recorded estimates of both runs and their ratio (reference BLAS: ~30× slower)
    assert (
        "| 4096 | stock | 241.0 [233.3, 244.3] | 7323 [7311, 7525] | 30.4× [29.9, 32.2] ≠ | ✓ … |"
        in out
    )
    assert (
        "| 2048 | 1 | stock | 20.37 [19.69, 21.12] | 39.8 [38.8, 42.4] | 1.95× [1.84, 2.15] ≠ | ✓ ✓ |"
        in out
    )
    assert "## stock/patched paired ratio per width L" in out


def test_dump_of_runs_with_nothing_in_common_says_so(capsys):
    assert main(["compare", str(TINY), str(H200), "--dump"]) == 0
    out = capsys.readouterr().out
    assert "No shared sweep contexts (A: 128, 256, 512; B: 2048, 8192, 16384)." in out
    assert "| device | AMD EPYC x86_64 | NVIDIA H200 sm_90 |" in out


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (
            lambda d: d / "missing.jsonl",
            "missing.jsonl: no such recording — compare takes event recordings",
        ),
        (
            lambda d: BENCH_RECORD,
            "a `mlatui bench attention` record file, not a run recording (26 records at T=8192)",
        ),
        (lambda d: _bad(d), "bad.jsonl:2: line: expected an object, got [1, 2]"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, make, expected):
    assert main(["compare", str(DEMO), str(make(tmp_path)), "--dump"]) == 2
    captured = capsys.readouterr()
    (line,) = captured.err.strip().splitlines()
    assert line.startswith("mlatui: error: ") and expected in line
    assert captured.out == ""


def _bad(folder: Path) -> Path:
    path = folder / "bad.jsonl"
    path.write_text(ui_events.header().to_json() + "\n[1, 2]\n")
    return path


def test_compare_runs_where_mlx_cannot_be_imported(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "mlatui", "compare", str(DEMO), str(TINY), "--dump"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=no_mlx_env(tmp_path),
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert "# mlatui compare" in out.stdout and "| 512 | stock |" in out.stdout


def _visible(app, selector: str) -> str:
    w = app.query_one(selector)
    assert w.region.width > 0 and w.region.height > 0, selector
    return w.render().plain


@pytest.mark.parametrize("size", [(160, 50), (100, 30)])
async def test_both_runs_are_on_screen(tmp_path, size):
    cmp = compare_files(DEMO, REFBLAS)
    app = CompareApp(cmp, out_dir=tmp_path)
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        header = _visible(app, "#cmp-header")
        assert "A cpu-default-full" in header and "B cpu-launch-refblas" in header
        assert "BLAS openblas → bundled reference BLAS" in header
        verdicts = _visible(app, "#cmp-verdicts").splitlines()
        assert verdicts[0].startswith("A verdict")
        assert any(line.startswith("B verdict") for line in verdicts[1:])
        plot = _visible(app, "#cmp-plot")
        grid = "\n".join(plot.splitlines()[:-4])  # the data area, without axis and legend
        # every context of both runs, both arms: a shape per run and arm, filled where the
        # L = 1 check passed (hollow where not: A's stock ○ and patched △ at the invalid ones)
        for filled, hollow in (("●", "○"), ("▲", "△"), ("■", "□"), ("◆", "◇")):
            assert grid.count(filled) + grid.count(hollow) >= 3, (filled, grid)
        assert (
            "A cpu-default-full.jsonl (embedded · AMD EPYC): ● stock ▲ patched" in plot
            and "B cpu-launch-refblas.jsonl (embedded · AMD EPYC): ■ stock ◆ patched" in plot
        )
        assert "lower is better" in plot and "4K" in plot
        table = app.query_one("#cmp-table-box").plain
        assert re.search(r"30\.4× \[29\.9, 32\.2\] +≠", table)
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        assert "export the comparison" in app.screen.text
        await pilot.press("tab")
        assert "● ▲ run A: stock, patched" in " ".join(app.screen.text.split())
        await pilot.press("escape", "e")
        await pilot.pause()
        (md,) = tmp_path.glob("mlatui-compare-*.md")
        assert "30.4× [29.9, 32.2] ≠" in md.read_text()
        await pilot.press("s")
        await pilot.pause()
        (svg,) = tmp_path.glob("*.svg")
        assert "<svg" in svg.read_text()[:400] and "cpu-default-full" in svg.read_text()


def test_the_compare_command_opens_the_screen_and_exits_0(monkeypatch, tmp_path):
    shown = {}
    original = CompareApp.run

    def headless(self, **kw):
        async def look_then_quit(pilot):
            await pilot.pause()
            shown["plot"] = pilot.app.query_one("#cmp-plot").render().plain
            await pilot.press("q")

        return original(self, headless=True, size=(120, 40), auto_pilot=look_then_quit)

    monkeypatch.setattr(CompareApp, "run", headless)
    assert main(["compare", str(DEMO), str(TINY), "--out-dir", str(tmp_path)]) == 0
    assert "A cpu-default-full" in shown["plot"] and "B ui_tiny_run" in shown["plot"]
    assert "■ stock ◆ patched" in shown["plot"]


def test_compare_never_imports_mlx_and_its_core_never_imports_textual():
    code = (
        "import sys, mlatui.views.compare, mlatui.views.export\n"
        "print('textual' in sys.modules)\n"
        "import mlatui.widgets.compare_app, mlatui.commands.compare\n"
        "print('mlx' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "False"]


async def test_the_table_scrolls_sideways_on_a_small_screen_and_the_runs_have_their_own_styles(
    tmp_path,
):
    from mlatui.widgets.compare_render import _differing, series_looks

    app = CompareApp(compare_files(DEMO, REFBLAS), out_dir=tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        box = app.query_one("#cmp-table-box")

        def shown() -> str:
            return "\n".join(
                "".join(seg.text for seg in strip)
                for strip in app.screen._compositor.render_strips()
            )

        assert "53.8]" not in shown()  # the B/A range is past the right edge
        assert "A [95% CI]" in shown()
        await pilot.press("tab", *["right"] * 30)
        await pilot.pause()
        assert box.scroll_x > 0 and "[46.8, 53.8]" in shown()
        # the keys of each row stay put: ctx and arm, beside the scrolled B/A
        row = next(line for line in shown().splitlines() if "[46.8, 53.8]" in line)
        assert row.startswith("│   512     stock"), row
        assert "A [95% CI]" not in shown() and "  ctx     arm" in shown()
    looks = series_looks(app.cmp)  # each run's arms in their own colours and shapes
    for arm in ("stock", "patched"):
        assert looks["A", arm].style != looks["B", arm].style
    a = "openblas (/usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3)"
    b = "openblas (/opt/venv/lib/python3.11/site-packages/scipy_openblas32/lib/libblas.so)"
    shown_a, shown_b = _differing(a, b, 26)
    assert shown_a != shown_b and shown_a.startswith("openblas …") and "pthread" not in shown_b


@pytest.mark.parametrize("size", [(60, 16), (100, 30)])
def test_the_compare_figure_puts_each_run_and_arm_where_its_ms_belongs(size):
    from test_ui_plots import drawn_axes, expected_row, plot_rows

    from mlatui.widgets.compare_render import marginal_points, plot_text

    cmp = compare_files(DEMO, REFBLAS)
    lines = plot_text(cmp, *size).plain.split("\n")
    x_cols, y_rows = drawn_axes(lines)
    contexts = sorted(
        {
            c
            for run in cmp.runs
            for arm in ("stock", "patched")
            for c, *_ in marginal_points(run, arm)
        }
    )
    col_of = dict(zip(contexts, x_cols, strict=True))
    shapes = {
        ("A", "stock"): "●○",
        ("A", "patched"): "▲△",
        ("B", "stock"): "■□",
        ("B", "patched"): "◆◇",
    }
    for run in cmp.runs:
        dx = 1 if run.label == "B" else 0  # B a column right of A
        for arm in ("stock", "patched"):
            for c, ci, _ in marginal_points(run, arm):
                col = col_of[c] + dx
                cells = [(i, lines[i][col : col + 1]) for i in plot_rows(lines)]
                rows = [i for i, ch in cells if ch and ch in shapes[run.label, arm]]
                assert rows, (run.label, arm, c, "\n".join(lines))
                want = expected_row(ci.median, y_rows)
                assert min(abs(r - want) for r in rows) <= 0.5 + 1e-6, (run.label, arm, c, want)


GREY_STYLE = "grey42"


def test_the_ne_column_is_one_column_and_each_runs_figures_have_their_own_colour():
    from mlatui.widgets.compare_render import series_looks, table_lines

    cmp = compare_files(DEMO, REFBLAS)
    lines = table_lines(cmp)
    header = next(line.text.plain for line in lines if "B/A" in line.text.plain)
    at = header.index("≠")
    rows = [t.text for t in lines if t.row and "[" in t.text.plain and "CI]" not in t.text.plain]
    assert rows and all(r.plain[at] in "≠ " for r in rows)
    assert sum(r.plain[at] == "≠" for r in rows) >= 3 and "≠" not in "".join(
        r.plain[:at] + r.plain[at + 1 :] for r in rows
    )
    looks = series_looks(cmp)
    stock = next(r for r in rows if " stock " in r.plain and GREY_STYLE not in str(r.spans))
    styles = {str(span.style) for span in stock.spans}
    assert looks["A", "stock"].style in styles and f"{looks['B', 'stock'].style} italic" in styles
    assert looks["A", "stock"].style != looks["B", "stock"].style


def test_a_file_compared_with_itself_says_so(tmp_path):
    from mlatui.widgets.compare_render import header_text

    same = compare_files(DEMO, DEMO)
    assert "nothing: A and B are the same file" in header_text(same, 200).plain
    copy = tmp_path / DEMO.name
    copy.write_bytes(DEMO.read_bytes())
    assert "the two files are identical" in header_text(compare_files(DEMO, copy), 200).plain
    from mlatui.views.compare import compare_markdown

    assert "identical" in compare_markdown(compare_files(DEMO, copy))


@pytest.mark.parametrize("size", [(80, 24), (100, 34), (120, 40), (160, 50), (220, 60)])
async def test_compare_never_cuts_a_verdict_or_a_field(tmp_path, size):
    app = CompareApp(compare_files(DEMO, REFBLAS), out_dir=tmp_path)
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        verdicts = app.query_one("#cmp-verdicts")
        text = verdicts.render().plain
        assert "…" not in text and verdicts.region.height == text.count("\n") + 1
        assert "Δ2 @ 4K: 241 vs 4.21 ms" in text or "Δ2 4K 241 vs 4.21 ms" in text, text
        assert "Δ2 @ 2K: 3659 vs 33.0 ms" in text or "Δ2 2K 3659 vs 33.0 ms" in text, text
        lines = [
            "".join(seg.text for seg in strip) for strip in app.screen._compositor.render_strips()
        ]
        if size[0] >= 160:
            assert "MLA geometry r/n/v 512/128/128, 4 heads" in lines[2]
