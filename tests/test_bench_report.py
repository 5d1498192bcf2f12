"""The benchmarks' stdout is a function of their records: a kept record file prints exactly what
its run printed (tests/fixtures/dumps/bench/, written from that run's stdout)."""

from __future__ import annotations

import dataclasses
import gzip
import json
from pathlib import Path

from mlatui.measure.indexer_records import IndexerRecord
from mlatui.views.bench_report import indexer_report

FIXTURES = Path(__file__).parent / "fixtures"


def _records(path: Path) -> list[IndexerRecord]:
    names = {f.name for f in dataclasses.fields(IndexerRecord)}
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [
            IndexerRecord(**{k: v for k, v in json.loads(line).items() if k in names}) for line in f
        ]


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
