"""`bench attention` and `calibrate` take every family `thresholds` knows, mlx-lm's and mlx-vlm's
(mounted from its wheel, tests/vlm_sources.py), at tiny sizes; a family with no public full-size
config takes the model's own config; part (b) that cannot fit is skipped while part (a) runs."""

import json

import pytest
import vlm_sources

from mlatui.cli import main
from mlatui.commands import bench_attention
from mlatui.models import families, fit, vlm
from mlatui.models.family_configs import KIMI_K3_TINY

PART_A = ["--size", "tiny", "--part", "a", "--contexts", "64", "--widths", "1,2", "--reps", "2"]


def every_runnable_name() -> list[str]:
    """One name per distinct build: mlx-lm's families, mlx-vlm's own families by their bare
    name, and mlx-vlm's copies of mlx-lm's families with the prefix."""
    vlm_only = [f for f in families.VLM_FAMILIES if f not in families.FAMILIES]
    copies = [families.PREFIX + f for f in families.VLM_FAMILIES if f in families.FAMILIES]
    return [*families.FAMILIES, *vlm_only, *copies]


@pytest.fixture
def mlx_vlm(tmp_path_factory, monkeypatch):
    source = vlm_sources.source(vlm_sources.CURRENT, tmp_path_factory.getbasetemp() / "vlm")
    monkeypatch.setenv(vlm.SOURCE_ENV, str(source.root))


@pytest.mark.parametrize("name", every_runnable_name())
def test_part_a_runs_for_every_family(name, request, capsys):
    if families.lookup(name).runtime == "mlx-vlm":
        request.getfixturevalue("mlx_vlm")
    assert main(["bench", "attention", "--family", name, *PART_A]) == 0
    text = capsys.readouterr().out
    assert f"# bench attention: {name} (tiny geometry" in text
    assert "| absorbed ms | absorbed GB/s | absorbed MBU |" in text
    for width in (1, 2):
        row = next(x for x in text.splitlines() if x.startswith(f"| 64 | {width} |"))
        assert "faster" in row or "tie" in row
    assert "formula: " in text


def test_thresholds_and_bench_know_the_same_families():
    from mlatui.models import families

    names = families.known_names()
    assert set(families.FAMILIES) <= set(names)
    assert {families.PREFIX + f for f in families.VLM_FAMILIES} <= set(names)
    for name in every_runnable_name():  # bare mlx-vlm names resolve too
        assert main(["thresholds", "--family", name, "--json"]) == 0


def test_calibrate_on_an_mlx_vlm_family(mlx_vlm, tmp_path, monkeypatch, capsys):
    from mlatui import store as calibration

    monkeypatch.setenv(calibration.CACHE_ENV, str(tmp_path))
    argv = ["calibrate", "--family", "glm5_next", "--size", "tiny", "--contexts", "64"]
    assert main([*argv, "--max-width", "4", "--reps", "2", "--out", str(tmp_path / "c.jsonl")]) == 0
    text = capsys.readouterr().out
    assert "stored for r512-n256-v256" in text


def test_a_family_without_a_public_config_says_which_config_it_needs(capsys):
    assert main(["bench", "attention", "--family", "kimi_k3", "--part", "a"]) == 2
    err = capsys.readouterr().err.strip()
    assert "kimi_k3: no public full-size config known" in err and "--config FILE" in err
    assert "model_type kimi_k3" in err and "\n" not in err
    assert main(["calibrate", "--family", "kimi_k3"]) == 2
    assert "--config FILE" in capsys.readouterr().err


def test_a_model_config_stands_in_for_the_public_one(tmp_path, capsys):
    config = tmp_path / "config.json"
    config.write_text(json.dumps(KIMI_K3_TINY))
    argv = ["bench", "attention", "--config", str(config), *PART_A[2:]]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "# bench attention: kimi_k3 (its config's geometry" in text
    assert "| 64 | 2 |" in text
    assert main(["bench", "attention", "--family", "deepseek_v3", "--config", str(config)]) == 2
    assert "is not family 'deepseek_v3'" in capsys.readouterr().err


def test_full_size_part_b_past_memory_is_named_and_skipped(capsys):
    """glm_moe_dsa at full size: the whole model needs thousands of GB; the line says so (no
    model is built for it)."""
    from mlatui.commands.argtypes import OneLineParser

    parser = OneLineParser(prog="mlatui bench attention")
    bench_attention.configure(parser)
    args = parser.parse_args(["--family", "glm_moe_dsa", "--contexts", "1024", "--reps", "3"])
    model = bench_attention._check(args)
    line = bench_attention.part_b_blocker(args, model)
    assert line is not None and "part (b), the whole model, needs ~2" in line
    assert " GB (weights 27" in line and "--layers N" in line and "--force" in line


def test_part_a_runs_when_part_b_does_not_fit(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(fit, "config_weights_lower_bound", lambda *a, **k: 3 << 40)
    argv = ["bench", "attention", "--family", "glm_moe_dsa", *PART_A[:2], "--contexts", "64"]
    argv += ["--widths", "1,2", "--reps", "3", "--out", str(tmp_path / "a.jsonl")]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "| 64 | 2 |" in text  # part (a) ran
    assert "## (b) whole model: skipped" in text and "needs ~3072" in text
    assert not (tmp_path / "attention-glm_moe_dsa.toml").exists()
    assert main([*argv[:-2], "--part", "b"]) == 2  # part (b) alone: refused in one line
    err = capsys.readouterr().err.strip()
    assert "needs ~3072" in err and "use --part a" in err and "\n" not in err


def test_layers_is_refused_for_an_mlx_vlm_family(capsys):
    argv = ["bench", "attention", "--family", "glm5_next", "--size", "tiny", "--layers", "2"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "--layers: glm5_next is mlx-vlm's" in err and "\n" not in err
