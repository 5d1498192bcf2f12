"""The tested version range: the gate recognition, the parity of each arm with the installed
code, and a short sweep, against other releases of the runtimes.

The current releases run in the default suite (mlx-lm as installed and its upstream-form copy in
tests/test_runtime_arms.py; mlx-vlm 0.7.10 and 0.6.17 here and in tests/test_vlm_*.py). Older
mlx-lm releases are a slow matrix: their wheels come from the same folder as mlx-vlm's
(tests/vlm_sources.py; `pip download --no-deps -d DIR mlx-lm==0.31.3`)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mlatui.gate.forms import SiteKind
from mlatui.gate.scan import SiteState, scan_tree
from tests import vlm_sources
from tests.pr_form import write_pr_form_copy

ROOT = Path(__file__).resolve().parent.parent
OLDER_MLX_LM = ("0.31.3",)


def test_scan_mlx_vlm_fixed_release(tmp_path_factory):
    tree = vlm_sources.unpacked(vlm_sources.CURRENT, tmp_path_factory.mktemp("vlm")) / "mlx_vlm"
    sites = scan_tree(tree)
    fixed = [
        s for s in sites if s.kind is SiteKind.MLA_GATE and s.form == "fixed (cache-aware form)"
    ]
    families = sorted(Path(s.path).parent.name for s in fixed)
    assert families == [
        "deepseek_v3", "deepseek_v32", "glm4_moe_lite", "glm_moe_dsa", "kimi_k3",
        "kimi_linear", "longcat_flash", "longcat_flash_sparse", "youtu_vl",
    ]  # fmt: skip
    gathers = {
        Path(s.path).parent.name
        for s in sites
        if s.kind is SiteKind.SPARSE_GATHER and s.form == "L == 1"
    }
    assert gathers == {"deepseek_v32", "glm_moe_dsa", "longcat_flash_sparse"}
    glm5 = [s for s in sites if Path(s.path).parent.name == "glm5_next"]
    assert {s.kind for s in glm5} == {SiteKind.MLA_GATE, SiteKind.INCREMENTAL_POOL}
    assert all(s.state is SiteState.FIXED for s in glm5)


def test_scan_mlx_vlm_pre_fix_release(tmp_path_factory):
    tree = vlm_sources.unpacked(vlm_sources.PRE_FIX, tmp_path_factory.mktemp("vlm")) / "mlx_vlm"
    sites = scan_tree(tree)
    gates = [s for s in sites if s.kind is SiteKind.MLA_GATE]
    assert gates and all(s.state is SiteState.PRE_FIX for s in gates)
    pools = [s for s in sites if s.kind is SiteKind.INDEXER_POOL]
    assert [Path(s.path).parent.name for s in pools] == ["glm5_next"]  # the S == 1 gate


def _mlx_lm_wheel(version: str) -> Path:
    name = f"mlx_lm-{version}-py3-none-any.whl"
    for folder in vlm_sources.wheel_dirs():
        if (folder / name).is_file():
            return folder / name
    pytest.skip(
        f"{name} not found; fetch it with: pip download --no-deps -d "
        f"{vlm_sources.wheel_dirs()[-1]} mlx-lm=={version}"
    )


def _worker(path: Path, family: str) -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(path), str(ROOT)])}
    done = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "runtime_worker.py"), family],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow
@pytest.mark.parametrize("version", OLDER_MLX_LM)
@pytest.mark.parametrize("family", ["deepseek_v3", "glm4_moe_lite"])
def test_older_mlx_lm_pre_fix_and_upstream_form(tmp_path, version, family):
    target = tmp_path / "installed"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index",
         "--target", str(target), str(_mlx_lm_wheel(version))],
        check=True, timeout=300,
    )  # fmt: skip
    got = _worker(target, family)
    assert got["runtime"].startswith(f"mlx-lm {version}") and not got["fixed"]
    steps = got["steps"]
    assert steps["1"]["identical"]
    assert all(steps[n]["close"] and steps[n]["b"]["absorbed"] for n in ("2", "3", "4"))
    fixed = tmp_path / "fixed"
    write_pr_form_copy(fixed, target / "mlx_lm")
    got = _worker(fixed, family)
    assert got["fixed"] and got["arms"]["patched"]["gate"] == "installed"
    assert all(got["steps"][n]["a"]["materialised"] for n in ("2", "3", "4"))
    assert all(got["steps"][n]["b"]["absorbed"] for n in ("2", "3", "4"))
    if family != "deepseek_v3":
        return  # one short sweep per release
    sweep = subprocess.run(
        [sys.executable, "-m", "mlatui", "bench", str(ROOT / "tests" / "fixtures" / "tiny.toml"),
         "--random-weights", "--phases", "sweep", "--reps", "3", "--max-rounds", "4",
         "--contexts", "128", "--out", str(tmp_path / "sweep.jsonl")],
        capture_output=True, text=True, timeout=600,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(target), str(ROOT)])},
    )  # fmt: skip
    assert sweep.returncode in (0, 3), sweep.stderr[-2000:]  # 3: an L = 1 check undecided
    assert "stock/patched" in sweep.stdout
