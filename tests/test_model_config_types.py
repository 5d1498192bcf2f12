"""[model.config] and [draft.config] values against the family's declared config types (mlx-lm's
ModelArgs, mlx-vlm's config classes, mlatui's own): one line naming the key, the value and the
type, before anything loads."""

from __future__ import annotations

from pathlib import Path

import pytest

from mlatui.cli import main
from mlatui.config.model_inputs import check_config_types, config_schema
from mlatui.errors import UserError

TINY = Path(__file__).parent / "fixtures" / "tiny.toml"


def _mutated(tmp_path: Path, old: str, new: str) -> Path:
    text = TINY.read_text()
    assert old in text
    path = tmp_path / "mutated.toml"
    path.write_text(text.replace(old, new, 1))
    return path


@pytest.mark.parametrize("value", ['"2"', "2.0"], ids=["string", "float"])
@pytest.mark.parametrize("command", [["bench"], ["launch", "--scenario"]], ids=["bench", "launch"])
def test_a_wrong_type_in_model_config_is_one_line_naming_key_value_and_type(
    tmp_path, capsys, value, command
):
    path = _mutated(tmp_path, "num_hidden_layers = 2", f"num_hidden_layers = {value}")
    assert main([*command, str(path), "--random-weights", "--plan"]) == 2
    err = capsys.readouterr().err
    lines = [x for x in err.splitlines() if x.strip()]
    assert len(lines) == 1 and "Traceback" not in err
    assert lines[0].startswith(
        f"mlatui: error: {path}: model.config.num_hidden_layers: expected an integer, got {value}"
        " — mlx-lm deepseek_v3.ModelArgs declares int; give the value its declared type"
    )


def test_the_draft_config_is_checked_against_its_own_model_type(tmp_path, capsys):
    path = _mutated(tmp_path, "q_lora_rank = 32", 'q_lora_rank = "32"')
    assert main(["bench", str(path), "--random-weights", "--plan"]) == 2
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert f'{path}: draft.config.q_lora_rank: expected an integer, got "32"' in line


def _refused(model_type: str, config: dict) -> str:
    with pytest.raises(UserError) as e:
        check_config_types("x", "model.config", model_type, config)
    return str(e.value)


def test_declared_types_read_from_the_runtime_source():
    # kimi_k2: mlx-lm maps it onto deepseek_v3; an int is a fine float; Optional[int] is an int
    check_config_types("x", "model.config", "kimi_k2", {"rms_norm_eps": 1, "n_shared_experts": 2})
    said = _refused("kimi_k2", {"n_shared_experts": "2"})
    assert "n_shared_experts: expected an integer" in said
    assert "mlx-lm deepseek_v3.ModelArgs declares Optional[int]" in said
    assert "sparse_layers: expected an array, got 3" in _refused("mlatui_mla", {"sparse_layers": 3})
    assert config_schema("no_such_family") is None  # the loader names an unknown type


def test_plain_values_pass_and_each_kind_of_mismatch_is_named():
    check_config_types("x", "c", "deepseek_v3", {"rope_theta": 10000, "norm_topk_prob": True})
    check_config_types("x", "c", "deepseek_v3", {"unknown_key": "kept", "rope_scaling": None})
    assert "norm_topk_prob: expected true or false, got 1" in _refused(
        "deepseek_v3", {"norm_topk_prob": 1}
    )
    assert 'rms_norm_eps: expected a number, got "1e-6"' in _refused(
        "deepseek_v3", {"rms_norm_eps": "1e-6"}
    )


def test_an_mlx_vlm_family_checks_its_nested_text_config(tmp_path, monkeypatch):
    import vlm_sources

    from mlatui.config.model_inputs import SOURCE_ENV

    monkeypatch.setenv(SOURCE_ENV, str(vlm_sources.unpacked(vlm_sources.CURRENT, tmp_path)))
    config = {"text_config": {"num_hidden_layers": 4, "index_topk": "32"}}
    said = _refused("mlx-vlm:glm5_next", config)
    assert 'model.config.text_config.index_topk: expected an integer, got "32"' in said
    check_config_types("x", "c", "mlx-vlm:glm5_next", {"text_config": {"index_topk": 32}})
