"""`--format json` (one document per run: bench, replay --dump, the `e` export) against its schema,
and `--expect` on a recording and on a bench run: passed, failed and undecided."""

from __future__ import annotations

import contextlib
import io
import json

import msgspec
import pytest
from replay_dumps import recordings

from mlatui.cli import main
from mlatui.stream.recorder import read_recording
from mlatui.views import expect, export, summary_doc
from mlatui.views.summary import summarize_events

DEMO = "scenarios/demo.jsonl"
# the document's fields, pinned here: a field dropped from the Struct and the output alike fails
DOCUMENT = {
    "schema_version", "status", "status_text", "verdict", "header", "header_fields", "checks",
    "pooled", "tolerance_pct", "marginal", "sweep", "decode", "phases", "left_out",
    "synthetic_acceptance", "expectations",
}  # fmt: skip
SWEEP = {
    "phase", "context", "width", "stock_ms", "patched_ms", "ratio", "patched_vs_l1", "rounds",
    "drifting_rounds", "check", "gb_s", "mbu", "mbu_most",
}  # fmt: skip
CHECK = {"phase", "context", "check", "ratio", "rounds", "stock_l1_ms", "patched_l1_ms"}
FIGURE = {"median", "low", "high", "text"}


def read_document(text: str | bytes) -> summary_doc.RunDocument:
    """A document back, checked against the schema (msgspec.ValidationError when it does not fit)."""
    return msgspec.json.decode(text, type=summary_doc.RunDocument)


def _document(path) -> dict:
    rec = read_recording(path)
    return json.loads(export.summary_json(summarize_events([rec.header, *rec.events])))


def test_the_schema_names_every_field():
    assert set(summary_doc.RunDocument.__struct_fields__) == DOCUMENT
    assert set(summary_doc.SweepDoc.__struct_fields__) == SWEEP
    assert set(summary_doc.CheckDoc.__struct_fields__) == CHECK
    assert set(summary_doc.Figure.__struct_fields__) == FIGURE


@pytest.mark.parametrize("path", recordings(), ids=lambda p: p.name)
def test_every_kept_recording_gives_a_document_that_fits_the_schema(path):
    text = export.summary_json(summarize_events([*_events(path)]))
    doc = read_document(text)  # raises when a field is missing or mistyped
    raw = json.loads(text)
    assert set(raw) == DOCUMENT
    assert doc.header is not None and doc.header["type"] == "header"
    assert doc.verdict and doc.status in ("completed", "interrupted")
    for row in raw["sweep"]:
        assert set(row) == SWEEP
        for name in ("stock_ms", "patched_ms", "ratio"):
            if row[name] is not None:
                assert set(row[name]) == FIGURE
    for c in raw["checks"]:
        assert set(c) == CHECK


def _events(path):
    rec = read_recording(path)
    return [rec.header, *rec.events]


def test_the_document_carries_the_markdowns_figures():
    doc = read_document(export.summary_json(summarize_events(_events(_demo()))))
    md = export.summary_markdown(summarize_events(_events(_demo())))
    assert doc.verdict in md
    row = next(r for r in doc.sweep if r.context == 4096 and r.width == 2)
    assert row.ratio is not None and row.ratio.low < row.ratio.median < row.ratio.high
    assert row.ratio.text in md and row.check == "valid (pooled)"
    with pytest.raises(msgspec.ValidationError):
        read_document(json.dumps({k: v for k, v in json.loads(
            summary_doc.document_json(doc)).items() if k != "verdict"}))  # fmt: skip


def _demo():
    from pathlib import Path

    return Path(__file__).resolve().parent.parent / DEMO


def _replay(*argv) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(["replay", "--dump", str(_demo()), *argv])
    return status, out.getvalue(), err.getvalue()


@pytest.mark.parametrize(
    "assertion,status,line",
    [
        # the demo's stock/patched at L = 2, 4K: 4.64× [4.41, 5.02]
        (
            "stock/patched@L=2,4K >= 4",
            0,
            "passed, measured 4.64× [4.41, 5.02] (the whole CI is >= 4)",
        ),
        (
            "stock/patched@L=2,4K >= 30",
            1,
            "FAILED, measured 4.64× [4.41, 5.02] (the whole CI is below 30)",
        ),
        (
            "stock/patched@L=2,4K >= 5",
            3,
            "undecided, measured 4.64× [4.41, 5.02] (the CI straddles 5)",
        ),
        (
            "patched/stock@L=2,4096 < 0.1",
            1,
            "FAILED, measured 0.216× [0.199, 0.227] (the whole CI is above 0.1)",
        ),
        ("stock/patched@L=2,3K >= 2", 3, "undecided, not measured (the run has no such sweep row)"),
    ],
)
def test_expect_on_a_recording(assertion, status, line):
    code, out, err = _replay("--expect", assertion)
    assert code == status
    assert err.strip() == f"mlatui: expect {assertion}: {line}"
    assert "# mlatui run summary" in out  # the summary is printed as without --expect


def test_replay_dump_json_is_the_document_with_its_expectations():
    code, out, err = _replay("--format", "json", "--expect", "stock/patched@L=2,4K >= 5")
    assert code == 3
    doc = read_document(out)
    (e,) = doc.expectations
    assert (
        e.outcome == "undecided" and e.measured is not None and e.measured.low < 5 < e.measured.high
    )
    assert e.line == err.strip()
    assert out == summary_doc.document_json(
        summary_doc.document(summarize_events(_events(_demo())), doc.expectations)
    )


def test_the_worst_expectation_decides():
    code, _, err = _replay(
        "--expect", "stock/patched@L=2,4K >= 4", "--expect", "stock/patched@L=2,4K >= 5"
    )
    assert code == 3 and len(err.strip().splitlines()) == 2
    code, _, _ = _replay(
        "--expect", "stock/patched@L=2,4K >= 30", "--expect", "stock/patched@L=2,4K >= 5"
    )
    assert code == 1


@pytest.mark.parametrize(
    "bad", ["stock/patched@L=2 >= 5", "stock@L=2,4K >= 5", "stock/patched@L=2,4K => 5", "x"]
)
def test_a_bad_assertion_is_refused_in_one_line(bad, capsys):
    assert main(["replay", "--dump", str(_demo()), "--expect", bad]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("mlatui: error: --expect: ") and "\n" not in err


def test_the_grammar():
    e = expect.parse("  patched/stock @ L = 3 , 128k<0.5 ")
    assert (e.ratio, e.width, e.context, e.op, e.bound) == ("patched/stock", 3, 131072, "<", 0.5)
    assert e.text == "patched/stock @ L = 3 , 128k<0.5"


@pytest.mark.system
def test_bench_json_and_expect_on_a_run(tmp_path, monkeypatch):
    """The tiny scenario on the seeded fake device (tests/test_bench_stdout.py): 128 is valid by
    the pooled check, 256 stays inconclusive; both arms' fake steps cost the same."""
    from test_bench_stdout import TINY, fake_device

    monkeypatch.setenv("MLATUI_CACHE_DIR", str(tmp_path / "cache"))
    argv = ["bench", str(TINY), "--random-weights", "--seed", "0", "--format", "json"]
    argv += ["--phases", "sweep"]  # the expectations read the sweep; the fake draws it first
    argv += ["--out", str(tmp_path / "run.jsonl")]
    for assertion in ("stock/patched@L=2,128 >= 0.5", "stock/patched@L=2,128 >= 2"):
        argv += ["--expect", assertion]
    argv += ["--expect", "stock/patched@L=2,256 >= 0.5"]
    out, err = io.StringIO(), io.StringIO()
    with fake_device(), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(argv)
    assert status == 1  # one failed
    doc = read_document(out.getvalue())
    outcomes = [e.outcome for e in doc.expectations]
    assert outcomes == ["passed", "failed", "undecided"]
    assert "the L = 1 check at 256 is inconclusive" in doc.expectations[2].line
    lines = [x for x in err.getvalue().splitlines() if x.startswith("mlatui: expect ")]
    assert lines == [e.line for e in doc.expectations]
    rec = read_recording(tmp_path / "run.jsonl")
    assert out.getvalue() == summary_doc.document_json(
        summary_doc.document(summarize_events([rec.header, *rec.events]), doc.expectations)
    )
