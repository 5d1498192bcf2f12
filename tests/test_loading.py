"""The real loading path: a random checkpoint on disk, `mlx_lm.load`, twin + patch, generate."""

import json

import mlx_lm
import pytest
from mlx_lm.sample_utils import make_sampler

from mlatui.gate import mla
from mlatui.gate.policy import STOCK_POLICY
from tests.checkpoints import save_random_checkpoint

PROMPT = "the absorbed path attends against the compressed latent"


def _generate(model, tokenizer, draft=None, max_tokens=12) -> list[int]:
    kw = {"draft_model": draft, "num_draft_tokens": 2} if draft is not None else {}
    return [
        r.token
        for r in mlx_lm.stream_generate(
            model, tokenizer, PROMPT, max_tokens=max_tokens, sampler=make_sampler(0.0), **kw
        )
    ]


def test_checkpoint_files(tiny_checkpoint):
    names = {p.name for p in tiny_checkpoint.iterdir()}
    assert {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"} <= names
    config = json.loads((tiny_checkpoint / "config.json").read_text())
    assert config["model_type"] == "deepseek_v3" and config["kv_lora_rank"] == 512


def test_load_patch_generate(tiny_checkpoint):
    model, tokenizer = mlx_lm.load(str(tiny_checkpoint))
    patched = mla.twin(model)
    report = mla.patch_model(patched)
    assert len(report.modules) == 2
    draft = mla.twin(model)  # the same drafter for both arms
    mla.patch_model(model, STOCK_POLICY)  # L == 1 as stock, its calls counted
    plain = _generate(model, tokenizer)
    stock = _generate(model, tokenizer, draft)
    fixed = _generate(patched, tokenizer, draft)
    assert len(plain) == 12 and stock == plain and fixed == plain
    # the verify steps (L = 3) really took different branches in the two arms
    assert mla.branch_counters(patched).absorbed[3] > 0
    assert mla.branch_counters(patched).materialised.get(3, 0) == 0
    assert mla.branch_counters(model).materialised[3] > 0


@pytest.mark.parametrize(
    "family,bits",
    [("glm4_moe_lite", None), ("kimi_k25", None), ("mistral4", None), ("deepseek_v32", 4)],
)
def test_other_families_load(tmp_path, family, bits):
    folder = save_random_checkpoint(tmp_path / family, family, bits=bits)
    model, tokenizer = mlx_lm.load(str(folder))
    patched = mla.twin(model)
    mla.patch_model(patched)
    draft = mla.twin(model)
    assert _generate(patched, tokenizer, draft, 8) == _generate(model, tokenizer, draft, 8)
    assert mla.branch_counters(patched).absorbed[3] > 0


def test_text_config_is_the_nested_dict_where_there_is_one():
    from mlatui.config.model_inputs import text_config

    nested = {"model_type": "kimi_k25", "text_config": {"kv_lora_rank": 512}}
    assert text_config(nested) == {"kv_lora_rank": 512}
    assert text_config({"kv_lora_rank": 64}) == {"kv_lora_rank": 64}
    assert text_config({"kv_lora_rank": 64, "text_config": 4}) == {
        "kv_lora_rank": 64,
        "text_config": 4,
    }
