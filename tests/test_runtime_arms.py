"""The arms follow the runtime's state: on pre-fix code, installed vs formula; on code that
carries the upstream fix, pre-fix (a counterfactual) vs installed, said in words; `--arms` and a
scenario's [arms] choose others; nothing refuses the fixed code."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mlatui.config.arm_settings import Threshold, ThresholdKind, parse_arms
from mlatui.config.scenario import ScenarioError, ScenarioRecord, load_scenario
from mlatui.gate.forms import GateForm
from mlatui.gate.policy import Variant, arm_words
from mlatui.run.arms import RuntimeGates, arm_settings, resolve_gates, runtime_gates
from mlatui.stream.run_settings import ArmSlot, RunSettings, RuntimeRecord
from tests.random_models import build_model

ROOT = Path(__file__).resolve().parent.parent
TINY = ROOT / "tests" / "fixtures" / "tiny.toml"


def test_pre_fix_runtime_defaults_to_installed_vs_formula():
    runtime = runtime_gates(build_model("deepseek_v3", layers=1))
    assert runtime.runtime == "mlx-lm" and not runtime.fixed
    assert runtime.forms == {"DeepseekV3Attention": GateForm.PRE_FIX}
    gates = resolve_gates(None, None, None, runtime)
    assert gates.threshold.kind is ThresholdKind.FORMULA
    assert gates.for_variant(Variant.STOCK).threshold.kind is ThresholdKind.STOCK
    said = arm_settings(gates, runtime)
    assert said["stock"].label == "mlx-lm as installed (pre-fix, L == 1)"
    assert said["patched"].label == "formula gate (mlatui's patch)"


def test_fixed_runtime_defaults_to_prefix_vs_installed():
    runtime = RuntimeGates("mlx-lm", "0.33.0", {"DeepseekV3Attention": GateForm.THRESHOLD})
    gates = resolve_gates(None, None, None, runtime)
    assert (gates.baseline.kind, gates.threshold.kind) == (
        ThresholdKind.STOCK,
        ThresholdKind.INSTALLED,
    )
    said = arm_settings(gates, runtime)
    assert said["stock"].label == "pre-fix (L == 1, counterfactual)"
    assert said["patched"].label == "mlx-lm as installed (fixed upstream)"
    # a chosen pair wins: the device's crossover against the installed threshold
    chosen = resolve_gates("installed,calibrated", None, None, runtime)
    assert (chosen.baseline.kind, chosen.threshold.kind) == (
        ThresholdKind.INSTALLED,
        ThresholdKind.CALIBRATED,
    )
    assert chosen.for_variant(Variant.STOCK).threshold.kind is ThresholdKind.INSTALLED
    assert arm_words(Threshold.parse(8), "mlx-vlm", True) == "fixed gate (absorbed for L <= 8)"


@pytest.mark.parametrize("bad", ["formula", "a,b", "installed,", "pre-fix,0"])
def test_bad_arms_are_one_line_errors(bad):
    with pytest.raises(ValueError) as e:
        parse_arms(bad)
    assert "\n" not in str(e.value) and "arms" in str(e.value)


def test_scenario_arms_table(tmp_path):
    path = tmp_path / "s.toml"
    path.write_text(TINY.read_text() + '\n[arms]\na = "pre-fix"\nb = "installed"\n')
    assert load_scenario(path).arms == "stock,installed"
    path.write_text(TINY.read_text() + '\n[arms]\na = "pre-fix"\n')
    with pytest.raises(ScenarioError, match=r"arms: give both a = .* and b = .*, or neither"):
        load_scenario(path)


def test_cli_arms_option_is_checked_before_loading(capsys):
    from mlatui.cli import main

    assert main(["bench", str(TINY), "--random-weights", "--arms", "formula"]) == 2
    err = capsys.readouterr().err
    assert "--arms 'formula': give two gates" in err and err.count("\n") == 1


@pytest.mark.parametrize("family", ["deepseek_v3", "glm4_moe_lite"])
def test_fixed_runtime_arms_run_with_counters_and_parity(pr_form_tree, family):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(pr_form_tree), str(ROOT)])}
    done = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "runtime_worker.py"), family],
        capture_output=True,
        text=True,
        env=env,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["mlx_lm"].startswith(str(pr_form_tree))  # the fixed copy ran, not the install
    assert got["fixed"] and "fixed (threshold form)" in got["runtime"]
    assert got["arms"]["stock"]["label"] == "pre-fix (L == 1, counterfactual)"
    assert got["arms"]["patched"]["label"] == "mlx-lm as installed (fixed upstream)"
    steps = got["steps"]
    assert steps["1"]["identical"]  # L = 1: the same branch in both arms, bit for bit
    for length in ("2", "3", "4"):
        assert steps[length]["close"]
        assert steps[length]["a"]["materialised"] and not steps[length]["a"]["absorbed"]
        assert steps[length]["b"]["absorbed"] and not steps[length]["b"]["materialised"]


def test_screen_names_what_each_slot_ran():
    from mlatui.views.run_meta import slot_name, slot_words

    fixed = RunSettings(
        arms=arm_settings(
            resolve_gates(
                None, None, None, RuntimeGates("mlx-lm", "0.33", {"X": GateForm.THRESHOLD})
            ),
            RuntimeGates("mlx-lm", "0.33", {"X": GateForm.THRESHOLD}),
        )
    )
    assert (slot_name(fixed, "stock"), slot_name(fixed, "patched")) == ("pre-fix", "installed")
    assert slot_words(fixed, "stock") == "pre-fix (L == 1, counterfactual)"
    classic = RunSettings(arms={"stock": ArmSlot(gate="stock"), "patched": ArmSlot(gate="formula")})
    assert (slot_name(classic, "stock"), slot_name(classic, "patched")) == ("stock", "patched")
    assert slot_name(RunSettings(), "patched") == "patched" and slot_words(None, "stock") is None
    chosen = RunSettings(arms={"stock": ArmSlot(gate="installed"), "patched": ArmSlot(gate="8")})
    assert slot_name(chosen, "patched") == "L≤8"


def test_header_fields_say_runtime_and_arms():
    from mlatui.stream.events import DeviceInfo, RunHeader, Thresholds
    from mlatui.views.run_meta import header_lines

    runtime = RuntimeGates("mlx-lm", "0.33", {"DeepseekV3Attention": GateForm.THRESHOLD})
    settings = RunSettings(
        arms=arm_settings(resolve_gates(None, None, None, runtime), runtime),
        runtime=RuntimeRecord(
            name="mlx-lm",
            version="0.33",
            gate_forms={"DeepseekV3Attention": "fixed (threshold form)"},
            state="fixed",
        ),
    )
    h = RunHeader(
        2,
        "0",
        "0",
        "0.33",
        "3.11",
        "linux",
        DeviceInfo(),
        "m",
        "deepseek_v3",
        {},
        Thresholds(),
        ScenarioRecord(name="?"),
        "none",
        False,
        "now",
        settings,
    )
    text = "\n".join(header_lines(h))
    assert "runtime: mlx-lm 0.33: fixed (DeepseekV3Attention fixed (threshold form))" in text
    assert "stock slot = pre-fix (L == 1, counterfactual)" in text
    assert "patched slot = mlx-lm as installed (fixed upstream)" in text
