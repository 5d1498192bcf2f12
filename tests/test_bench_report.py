"""The benchmarks' stdout is a function of their records: a kept record file prints exactly what
its run printed (tests/fixtures/dumps/bench/, written from that run's stdout)."""

from __future__ import annotations

import dataclasses
import gzip
import json
from pathlib import Path

from mlatui.measure.records import BenchRecord, IndexerRecord
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


def test_the_attention_bench_part_a_bandwidth_columns():
    """GB/s and MBU beside the ms: bytes over each end of the time interval (the ends swap),
    against the measured limit and, where the device is known, the published one."""
    from mlatui.bench.attention import bandwidth_figures
    from mlatui.measure.bandwidth import ByteRange, StepBytes
    from mlatui.stream.event_base import Interval as I
    from mlatui.views.bench_report import attention_report

    limit = {
        "measured_read_gb_s": 2000.0,
        "measured_copy_gb_s": 1500.0,
        "published_gb_s": 3350.0,
        "published_name": "NVIDIA H100 SXM",
    }
    ms = I(0.5, 0.4, 1.0, 8)
    figures = bandwidth_figures(ms, 100_000_000, limit)  # 100 MB in 0.5 ms: 200 GB/s
    assert figures["gb_s"] == I(200.0, 100.0, 250.0, 8)
    assert figures["mbu"] == I(0.1, 0.05, 0.125, 8)
    assert figures["mbu_published"].median == 200 / 3350
    cell = dict(
        absorbed=ms,
        materialised=I(2.0, 1.9, 2.1, 8),
        ratio=I(0.25, 0.2, 0.3, 8),
        verdict="absorbed faster",
        bytes=StepBytes(
            ByteRange(40_000_000, 40_000_000), ByteRange(60_000_000, 60_000_000), 2_350_000_000
        ),
        bandwidth={
            "absorbed": figures,
            "materialised": bandwidth_figures(I(2.0, 1.9, 2.1, 8), 100_000_000, limit),
        },
    )
    summary = {
        32768: {"widths": {2: cell}, "measured": 2, "rounds": 8, "formula": 300, "limit": limit}
    }
    text = attention_report(summary, [2])
    assert "measured 2000 GB/s read, 1500 GB/s copy; published 3350 GB/s (NVIDIA H100 SXM)" in text
    row = next(line for line in text.splitlines() if line.startswith("| 32768 | 2 |"))
    assert row.startswith(
        "| 32768 | 2 | 100 | 0.500 [0.400, 1.000] | 200 [100, 250] | 10.0% [5.0, 12.5] | 6.0% [3.0, 7.5]"
    )
    assert "| 50.0 [47.6, 52.6] | 2.50% [2.38, 2.63] |" in row
    assert "formula: 300; the materialised branch also builds and reads back 2350 MB of K/V" in text


def test_the_attention_bench_part_a_table_and_crossovers():
    from mlatui.stream.event_base import Interval as I
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
        "| cache T | L | MB/step | absorbed ms | absorbed GB/s | absorbed MBU | materialised ms "
        "| materialised GB/s | materialised MBU | absorbed/materialised | faster |"
    )
    assert lines[7] == (
        "| 64 | 2 | – | 1.180 [0.840, 3.730] | – | – | 3.470 [1.310, 3.540] | – | – "
        "| 0.340 [0.240, 0.500] | absorbed faster |"
    )
    assert lines[-2:] == [
        "T=64: measured crossover (largest L where absorbed is significantly faster, 4 rounds): "
        ">= 2 (largest width tried); formula: 46",
        "T=128: measured crossover (largest L where absorbed is significantly faster, 4 rounds): "
        "never; formula: 73",
    ]
