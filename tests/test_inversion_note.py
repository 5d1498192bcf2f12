"""The L = 2 < L = 1 inversion gets its own note under a sweep's verdict when a run measures it
(an arm's L = 2 step significantly cheaper than its own L = 1 step, at a valid context)."""

from mlatui.stream.events import PhaseStart, PhaseSummary
from mlatui.stream.phase_rows import SweepRow
from mlatui.views.export import inversion_note
from tests.summaries import markdown


def row(context, width, arm, ms, vs_l1=None, low=None, high=None, valid=True):
    return SweepRow(
        context=context,
        width=width,
        arm=arm,
        median_ms=ms,
        ci_low_ms=ms * 0.9,
        ci_high_ms=ms * 1.1,
        rounds=6,
        ratio=1.0,
        ratio_low=0.9,
        ratio_high=1.1,
        vs_l1=vs_l1 if width > 1 else 1.0,
        vs_l1_low=low if width > 1 else 1.0,
        vs_l1_high=high if width > 1 else 1.0,
        valid=valid,
        outcome="valid" if valid else "inconclusive",
    )


def summary(rows):
    return PhaseSummary(1.0, "sweep", "sweep", tuple(rows), "at context 131072, L = 2: ...")


def summary_markdown(rows) -> str:
    """The run's summary (bench, replay --dump, the export) of a sweep phase with these rows."""
    return markdown([PhaseStart(0.5, "sweep", "sweep", 0, 1, 10), summary(rows)])


def test_an_inverted_step_gets_its_line():
    rows = [
        row(131072, 1, "stock", 33.7),
        row(131072, 1, "patched", 33.7),
        row(131072, 2, "stock", 729.7, 21.6, 20.0, 23.0),
        row(131072, 2, "patched", 28.7, 0.85, 0.80, 0.90),
    ]
    note = inversion_note(summary(rows))
    assert note.startswith("plain decode is slower than a 2-query verify here: the runtime's L = 1")
    assert "patched at T=131072: L=2/L=1 0.850× [0.800, 0.900], 28.7 vs 33.7 ms" in note
    assert "stock at" not in note
    text = summary_markdown(rows)
    assert "\n\nNote: plain decode is slower" in text.split("## Phase sweep (sweep)")[1]


def test_no_line_where_the_ci_reaches_1_or_the_check_failed():
    rows = [
        row(4096, 2, "patched", 28.7, 0.95, 0.90, 1.01),
        row(8192, 2, "patched", 28.7, 0.85, 0.80, 0.90, valid=False),
    ]
    assert inversion_note(summary(rows)) is None
    assert "Note:" not in summary_markdown(rows)
