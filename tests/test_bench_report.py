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
