"""The benchmarks' stdout is a function of their records: a kept record file prints exactly what
its run printed (tests/fixtures/dumps/bench/, written from that run's stdout)."""

from __future__ import annotations

import dataclasses
import gzip
import json
from pathlib import Path

from mlatui.measure.indexer_records import IndexerRecord
from mlatui.measure.records import BenchRecord
from mlatui.views.bench_report import (
    context_pair_header,
    context_pair_report,
    indexer_report,
    parity_header,
    parity_report,
)

FIXTURES = Path(__file__).parent / "fixtures"


def _records(path: Path, cls: type[BenchRecord] = IndexerRecord) -> list:
    names = {f.name for f in dataclasses.fields(cls)}
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [cls(**{k: v for k, v in json.loads(line).items() if k in names}) for line in f]


def _printed(name: str) -> str:
    return gzip.decompress((FIXTURES / "dumps" / "bench" / f"{name}.txt.gz").read_bytes()).decode()


def test_the_indexer_bench_prints_its_run_again_from_its_records():
    records = _records(FIXTURES / "recordings" / "cpu-indexer-tiny.jsonl.gz")
    printed = gzip.decompress(
        (FIXTURES / "dumps" / "bench" / "cpu-indexer-tiny.txt.gz").read_bytes()
    )
    assert indexer_report(records) == printed.decode("utf-8")


def test_a_time_limit_says_what_it_left_undecided():
    records = _records(FIXTURES / "recordings" / "cpu-indexer-tiny.jsonl.gz")
    unsure = [dataclasses.replace(r, outcome="inconclusive") for r in records]
    text = indexer_report(unsure, [("indexer", 8192)], 30.0)
    assert "- time limit 30 s: indexer not run at T=8192" in text
    assert "- S=1 check undecided at indexer T=2100 (2 rounds)" in text


def test_the_context_pair_bench_prints_its_run_again_from_its_records():
    records = _records(FIXTURES / "recordings" / "cpu-context-pair-tiny.jsonl.gz", BenchRecord)
    first = records[0]
    text = context_pair_header(first.env, first.settings) + context_pair_report(records)
    assert text == _printed("cpu-context-pair-tiny")


def test_the_decode_parity_bench_prints_its_run_again_from_its_records():
    records = _records(FIXTURES / "recordings" / "cpu-decode-parity-tiny.jsonl.gz", BenchRecord)
    first = records[0]
    text = parity_header(first.env, first.settings, first.context) + parity_report(records)
    assert text == _printed("cpu-decode-parity-tiny")


def test_the_attention_bench_part_a_table_and_crossovers():
    from mlatui.stream.interval import Interval as I
    from mlatui.views.bench_report import attention_report

    cells = {
        1: dict(absorbed=I(2.2, 0.75, 2.68, 4), materialised=I(1.74, 1.31, 3.74, 4)),
        2: dict(absorbed=I(1.18, 0.84, 3.73, 4), materialised=I(3.47, 1.31, 3.54, 4)),
    }
    cells[1] |= dict(ratio=I(1.25, 0.2, 2.03, 8), verdict="tie (within noise)")
    cells[2] |= dict(ratio=I(0.34, 0.24, 0.5, 8), verdict="absorbed faster")
    summary = {
        64: {"widths": cells, "measured": 2, "rounds": 4, "formula": 46},
        128: {"widths": {1: cells[1]}, "measured": None, "rounds": 4, "formula": 73},
    }
    lines = attention_report(summary, [1, 2]).splitlines()
    assert lines[0] == "## (a) one attention layer, forced branch: medians over rounds [95% CI]"
    assert lines[4] == (
        "| cache T | L | absorbed ms | materialised ms | absorbed/materialised | faster |"
    )
    assert lines[7] == (
        "| 64 | 2 | 1.180 [0.840, 3.730] | 3.470 [1.310, 3.540] | 0.340 [0.240, 0.500] "
        "| absorbed faster |"
    )
    assert lines[-2:] == [
        "T=64: measured crossover (largest L where absorbed is significantly faster, 4 rounds): "
        ">= 2 (largest width tried); formula: 46",
        "T=128: measured crossover (largest L where absorbed is significantly faster, 4 rounds): "
        "never; formula: 73",
    ]
