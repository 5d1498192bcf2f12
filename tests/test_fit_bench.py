"""The memory refusal of the one-layer benchmarks (bench attention (a), calibrate, bench
indexer), the address-space limit as device memory, and "always absorbed" wherever a threshold
is shown."""

from __future__ import annotations

import resource
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

from mlatui.config.scenario import ScenarioRecord
from mlatui.gate.policy import threshold_text
from mlatui.models.fit import (
    attention_weights_bytes,
    device_memory,
    forced_layer_estimate,
    indexer_estimate,
    materialised_bytes,
)
from mlatui.models.indexer import SparseMLAConfig

ROOT = Path(__file__).resolve().parents[1]
GB = 1024**3
DSV3 = {  # DeepSeek-V3's attention geometry
    "hidden_size": 7168,
    "num_attention_heads": 128,
    "kv_lora_rank": 512,
    "q_lora_rank": 1536,
    "qk_rope_head_dim": 64,
    "qk_nope_head_dim": 128,
    "v_head_dim": 128,
}


def test_one_layer_estimate_counts_weights_latents_materialised_kv_and_scores():
    w = attention_weights_bytes(DSV3, "float32")
    params = 7168 * 1536 + 1536 * 128 * 192 + 7168 * 576 + 512 * 128 * 256 + 128 * 128 * 7168
    assert w == params * 4
    assert attention_weights_bytes(DSV3, "bfloat16", bits=4) < w / 6  # 4-bit + group scales
    e = forced_layer_estimate(DSV3, "float32", None, 4_000_000, 512, device=(141 * GB, "GPU"))
    assert e.transient_bytes > materialised_bytes(DSV3, "float32", 4_000_000)  # + the scores
    assert e.cache_bytes >= 4_000_000 * 576 * 4
    assert not e.fits and "at context 4000000" in e.describe()
    small = forced_layer_estimate(DSV3, "bfloat16", None, 8192, 512, device=(141 * GB, "GPU"))
    assert small.fits  # what the H200 tables ran


def test_indexer_estimate_grows_with_the_context_and_refuses_100m():
    config = SparseMLAConfig()
    a = indexer_estimate(config, "float32", 8192, 4, device=(20 * GB, "RAM"))
    b = indexer_estimate(config, "float32", 131072, 4, device=(20 * GB, "RAM"))
    assert a.fits and b.total_bytes > 10 * a.cache_bytes
    # the index keys alone: 100M tokens x 32 heads x 128 dims x 4 bytes, per copy
    huge = indexer_estimate(config, "float32", 100_000_000, 4, device=(20 * GB, "RAM"))
    assert huge.cache_bytes > 3 * 100_000_000 * 32 * 128 * 4 and not huge.fits


def test_the_address_space_limit_is_the_cpu_memory_when_it_is_lower():
    code = (
        "import resource\n"
        "resource.setrlimit(resource.RLIMIT_AS, (6 << 30, 6 << 30))\n"
        "from mlatui.models.fit import device_memory\n"
        "have, what = device_memory()\n"
        "print(have, what)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    have, what = out.stdout.split(" ", 1)
    assert int(have) < 6 << 30 and "ulimit -v" in what
    if resource.getrlimit(resource.RLIMIT_AS)[0] == resource.RLIM_INFINITY:
        assert "ulimit" not in device_memory()[1]


@pytest.mark.parametrize(
    "argv",
    [
        ("bench", "attention", "--family", "deepseek_v3", "--part", "a", "--contexts", "4000000"),
        ("calibrate", "--family", "deepseek_v3", "--contexts", "4000000"),
        ("bench", "indexer", "--contexts", "100000000"),
    ],
    ids=["attention", "calibrate", "indexer"],
)
def test_the_one_layer_benchmarks_refuse_what_cannot_fit_before_building(argv, tmp_path):
    out = tmp_path / "out.jsonl"
    p = subprocess.run(
        [sys.executable, "-m", "mlatui", *argv, "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert p.returncode == 2, p.stderr[-800:]
    last = p.stderr.strip().splitlines()[-1]
    assert last.startswith("mlatui: error: needs ~") and "this device has" in last
    assert "--force" in last and not out.exists()  # refused before any output was claimed


def test_always_absorbed_geometries_say_so_instead_of_a_64_bit_number():
    from mlatui.stream.events import SCHEMA_VERSION, DeviceInfo, RunHeader, RunSettings, Thresholds
    from mlatui.views.run_meta import header_lines
    from mlatui.widgets.header import thresholds_text

    unbounded = 2**63 - 1
    assert threshold_text(unbounded) == "always absorbed" and threshold_text(170) == "170"
    thresholds = Thresholds(policy="formula", formula_inf=unbounded, formula_at={1024: unbounded})
    shown = thresholds_text(thresholds, 2048)
    assert "9223372036854775807" not in shown
    assert "L* formula always absorbed (T→∞)" in shown and "always absorbed at T=1K" in shown
    header = RunHeader(
        **{
            **{f.name: None for f in msgspec.structs.fields(RunHeader)},
            "schema_version": SCHEMA_VERSION,
            "device": DeviceInfo(),
            "geometry": {},
            "thresholds": thresholds,
            "scenario": ScenarioRecord(name="x"),
            "settings": RunSettings(),
            "synthetic_acceptance": False,
        }
    )
    lines = header_lines(header)
    assert "- threshold: gate formula, L* formula always absorbed (T→∞), not calibrated" in lines
    assert not any("9223372036854775807" in line for line in lines)
