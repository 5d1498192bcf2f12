"""The memory estimate that refuses, before loading, a run that cannot fit."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from mlatui.fit import (
    CACHE_COPIES,
    cache_bytes_per_token,
    estimate,
    largest_context,
    materialised_bytes,
)
from mlatui.scenario import load_scenario

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "tests" / "fixtures" / "tiny.toml"
GLM = {
    "num_hidden_layers": 47,
    "kv_lora_rank": 512,
    "qk_rope_head_dim": 64,
    "qk_nope_head_dim": 192,
    "v_head_dim": 256,
    "num_attention_heads": 20,
}


def test_cache_bytes_follow_the_mla_geometry():
    # GLM-4.7-Flash in bf16: 47 layers x (512 latent + 64 rope) x 2 bytes per token and copy
    assert cache_bytes_per_token(GLM, "bfloat16") == 47 * 576 * 2
    # the stock arm's materialised K and V of one layer: 20 heads x (192 + 64 + 256) per token
    assert materialised_bytes(GLM, "bfloat16", 16384) == 16384 * 20 * 512 * 2
    e = estimate(GLM, "bfloat16", 17 * 1024**3, 16384, device=(141 * 1024**3, "GPU memory"))
    assert e.cache_bytes == CACHE_COPIES * 16384 * 47 * 576 * 2 and e.fits
    assert "needs ~" in e.describe() and "at context 16384" in e.describe()
    assert not estimate(GLM, "bfloat16", 17 * 1024**3, 2_000_000, device=(141 * 1024**3, "")).fits


def test_largest_context_counts_the_widest_step_and_a_decode_round():
    s = load_scenario(TINY)
    # sweep: 256 + width 3; tune: 128 + 12 tokens x 2 blocks x (plain twice + 2 depths)
    assert largest_context(s) == max(256 + 3, 128 + 12 * 2 * (2 + 2))


def test_a_run_that_cannot_fit_is_refused_before_loading_in_one_line(tmp_path):
    out = tmp_path / "big.jsonl"
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "mlatui",
            "bench",
            str(TINY),
            "--random-weights",
            "--contexts",
            "1000000000",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert p.returncode == 2, p.stderr[-1500:]
    last = p.stderr.strip().splitlines()[-1]
    assert last.startswith("mlatui: error: needs ~") and "at context 1000000" in last
    assert "--force" in last and "Traceback" not in p.stderr
    assert '"type":"step"' not in out.read_text()  # nothing ran; the recording says why
    assert '"refused":true' in out.read_text()
