"""mlx-vlm's model types through mlatui's loaders: which types go to mlx-vlm, random-weight builds
from its config classes, the one-line errors without it, and `mlatui thresholds` on its families."""

import json

import mlx.core as mx
import pytest
import vlm_sources
from random_models import vlm_config

from mlatui.cli import main
from mlatui.config import model_inputs
from mlatui.config.scenario import ModelSpec
from mlatui.models import families, family_configs, loading, vlm
from mlatui.models.loading import LoadError, build_random, load_checkpoint
from tests.random_models import build_model


@pytest.fixture(scope="session")
def vlm_dir(tmp_path_factory):
    return tmp_path_factory.getbasetemp() / "vlm"


@pytest.fixture
def current(vlm_dir, monkeypatch):
    """mlx-vlm 0.7.10 as the runtime mlatui finds (MLATUI_MLX_VLM_SOURCE)."""
    source = vlm_sources.source(vlm_sources.CURRENT, vlm_dir)
    monkeypatch.setenv(vlm.SOURCE_ENV, str(source.root))
    return source


@pytest.fixture
def without_vlm(monkeypatch):
    monkeypatch.delenv(vlm.SOURCE_ENV, raising=False)
    monkeypatch.setattr(vlm, "installed_source", lambda: None)
    monkeypatch.setattr(model_inputs, "installed_folder", lambda: None)


def test_which_model_types_need_mlx_vlm():
    for only_vlm in ("glm5_next", "longcat_flash_sparse", "youtu_vl", "mlx-vlm:deepseek_v3"):
        assert vlm.needs_vlm(only_vlm), only_vlm
    for in_mlx_lm in ("deepseek_v3", "glm4_moe_lite", "kimi_k3", "glm_moe_dsa", "kimi_k2"):
        assert not vlm.needs_vlm(in_mlx_lm), in_mlx_lm
    assert not vlm.needs_vlm("llama") and not vlm.needs_vlm(None)


def test_a_vlm_only_checkpoint_without_mlx_vlm_names_the_extra(tmp_path, without_vlm):
    (tmp_path / "config.json").write_text(json.dumps(vlm_config("glm5_next")))
    with pytest.raises(LoadError) as e:
        load_checkpoint(str(tmp_path))
    msg = str(e.value)
    assert "\n" not in msg and "glm5_next" in msg and "pip install 'mlatui[vlm]'" in msg


def test_random_weights_of_a_vlm_family_without_mlx_vlm_name_the_extra(without_vlm):
    spec = ModelSpec("random", None, "glm5_next", vlm_config("glm5_next"))
    with pytest.raises(LoadError, match=r"^model type 'glm5_next' runs on mlx-vlm.*mlatui\[vlm\]"):
        build_random(spec, seed=0)


def test_a_source_tree_builds_random_weights_but_loads_no_checkpoint(tmp_path, current):
    (tmp_path / "config.json").write_text(json.dumps(vlm_config("youtu_vl")))
    with pytest.raises(LoadError, match="installed mlx-vlm's loader") as e:
        load_checkpoint(str(tmp_path))
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("family", ["glm5_next", "mlx-vlm:glm4_moe_lite"])
def test_random_weights_build_mlx_vlms_language_model(family, current):
    _, bare = families.split_name(family)
    config = {k: v for k, v in vlm_config(bare).items() if k != "model_type"}
    model, model_type = build_random(ModelSpec("random", None, family, config), seed=0)
    assert isinstance(model, vlm.TextModel) and model_type == bare
    assert model.runtime.startswith("mlx-vlm 0.7.10")
    attn_module = type(model.layers[-1].self_attn).__module__
    assert attn_module.startswith(current.package) and attn_module.endswith(f"{bare}.language")
    cache = model.make_cache()
    logits = model(mx.array([[1, 2, 3]]), cache=cache)
    assert logits.shape == (1, 3, family_configs.VOCAB_TINY)


def test_the_same_family_builds_through_mlx_lm_unless_spelled_for_mlx_vlm(current):
    lm = loading.model_from_config(vlm_config("glm4_moe_lite"))
    assert not isinstance(lm, vlm.TextModel)
    assert type(lm).__module__ == "mlx_lm.models.glm4_moe_lite"


def test_an_unknown_source_tree_is_a_one_line_error(tmp_path, monkeypatch):
    monkeypatch.setenv(vlm.SOURCE_ENV, str(tmp_path))
    with pytest.raises(vlm.VlmUnavailable, match="no mlx_vlm package there"):
        vlm.vlm_source()


@pytest.mark.parametrize("family", sorted(families.VLM_FAMILIES))
def test_thresholds_cover_the_mlx_vlm_families(family, capsys):
    assert main(["thresholds", "--family", f"mlx-vlm:{family}", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    g = vlm_config(family)
    text = g.get("text_config", g)
    assert out["geometry"]["kv_lora_rank"] == text["kv_lora_rank"] == 512
    d = text["qk_nope_head_dim"] + text["v_head_dim"]
    expected = {256: 170, 448: 398, 512: 511}[d]
    assert out["limit"] == expected


def test_thresholds_of_glm5_next_without_the_prefix(capsys):
    assert main(["thresholds", "--family", "glm5_next"]) == 0
    out = capsys.readouterr().out
    assert "full" in out and "512" in out and "L <= 511" in out


def _folder(tmp_path, family):
    (tmp_path / "config.json").write_text(json.dumps(vlm_config(family)))
    mx.save_safetensors(str(tmp_path / "model.safetensors"), {"w": mx.zeros((2,))})
    return str(tmp_path)


def test_the_model_check_accepts_mlx_vlm_types_when_mlx_vlm_is_there(tmp_path, current):
    from mlatui.config.model_inputs import check_model_ref

    check_model_ref(_folder(tmp_path, "glm5_next"))  # no error: mlx-vlm 0.7.10 has it


def test_the_model_check_names_the_extra_for_an_unknown_type(tmp_path, without_vlm):
    from mlatui.config.model_inputs import check_model_ref
    from mlatui.errors import UserError

    with pytest.raises(UserError) as e:
        check_model_ref(_folder(tmp_path, "glm5_next"))
    said = f"{e.value} {getattr(e.value, 'hint', '')}"
    assert "'glm5_next'" in said and "pip install 'mlatui[vlm]'" in said


def test_a_hub_id_goes_to_mlx_vlm_once_its_config_is_in_the_hub_cache(tmp_path, monkeypatch):
    import huggingface_hub

    config = tmp_path / "config.json"
    config.write_text(json.dumps(vlm_config("glm5_next")))
    cached = {"org/glm-5.3-flash": str(tmp_path)}

    def snapshot(repo, local_files_only):
        assert local_files_only  # never the network
        if repo not in cached:
            raise huggingface_hub.errors.LocalEntryNotFoundError(repo)
        return cached[repo]

    monkeypatch.setattr(huggingface_hub, "snapshot_download", snapshot)
    assert vlm.checkpoint_model_type("org/glm-5.3-flash") == "glm5_next"
    assert vlm.checkpoint_model_type("org/not-cached") is None
    assert vlm.checkpoint_model_type("./org/glm-5.3-flash") is None  # a path, not a hub id


def test_build_model_builds_mlx_vlm_families_by_their_spelled_name(current):
    model = build_model("mlx-vlm:glm5_next", index_topk=64)
    assert isinstance(model, vlm.TextModel) and not model.training
    assert model.language_model.args.index_topk == 64
    with pytest.raises(ValueError, match="own layer pattern"):
        build_model("mlx-vlm:glm5_next", layers=1)
