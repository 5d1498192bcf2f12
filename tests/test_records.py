"""Benchmark records: one record type, three printers, raw samples kept beside the medians."""

from __future__ import annotations

import csv
import io
import json

from mlatui.records import BenchRecord, markdown_table, to_csv, to_jsonl


def _records() -> list[BenchRecord]:
    env = {"device_name": "cpu", "mlx": "0.32.4"}
    return [
        BenchRecord(
            "attention-model", "glm4_moe_lite", "stock", 4096, 2, [3.0, 1.0, 2.0], {"reps": 3}, env
        ),
        BenchRecord(
            "attention-model",
            "glm4_moe_lite",
            "patched",
            4096,
            2,
            [1.5, 0.5, 1.0],
            {"reps": 3},
            env,
            False,
            "L=1 off",
        ),
    ]


def test_jsonl_keeps_raw_samples_env_and_settings():
    rows = [json.loads(line) for line in to_jsonl(_records()).splitlines()]
    assert rows[0]["samples_ms"] == [3.0, 1.0, 2.0] and rows[0]["median_ms"] == 2.0
    assert rows[0]["env"]["mlx"] == "0.32.4" and rows[0]["settings"] == {"reps": 3}
    assert rows[1]["valid"] is False and rows[1]["note"] == "L=1 off"


def test_csv_has_one_row_per_record_with_medians():
    rows = list(csv.DictReader(io.StringIO(to_csv(_records()))))
    assert [r["arm"] for r in rows] == ["stock", "patched"]
    assert float(rows[1]["median_ms"]) == 1.0 and rows[1]["valid"] == "False"


def test_markdown_table_shape():
    text = markdown_table(["T", "ms"], [(4096, 2.0), (8192, 12.345)])
    lines = text.splitlines()
    assert lines[0] == "| T | ms |" and lines[1] == "|---:|---:|"
    assert lines[3] == "| 8192 | 12.3 |"
