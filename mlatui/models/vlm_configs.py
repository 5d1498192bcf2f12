"""mlx-vlm's MLA families and their config.json dicts (no mlx).

mlx-vlm ships MLA language models that mlx-lm does not have (glm5_next: GLM-5.3-Flash;
longcat_flash_sparse; youtu_vl) and its own copies of the mlx-lm ones. Tiny configs keep the real
MLA ranks (kv_lora_rank 512 and the family's nope/v head dims) so thresholds are the real ones;
everything else is small. The mlx-lm families' tiny configs are reused where mlx-vlm reads the
same keys.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from mlatui.config.vlm_paths import PREFIX
from mlatui.models import family_configs as lm
from mlatui.models.family_configs import VOCAB_TINY, mla


@dataclass(frozen=True)
class VlmFamily:
    name: str  # mlx-vlm's model_type (the package under mlx_vlm/models)
    tiny: dict[str, Any]
    full: dict[str, Any] | None = None
    source: str = ""  # where the full config comes from
    sparse: bool = False  # a top-k indexer picks the attended positions
    hybrid: bool = False  # linear-attention layers (non-trimmable caches)
    versions: tuple[str, ...] = ("0.6.17", "0.7.10")  # the mlx-vlm releases tested with it
    fixed_from: str | None = "0.7.10"  # the first of those whose MLA gate is fixed (None: none)


GLM5_NEXT_TINY: dict[str, Any] = dict(
    model_type="glm5_next",
    text_config=dict(
        model_type="glm5_next_text",
        vocab_size=VOCAB_TINY,
        hidden_size=64,
        intermediate_size=128,
        moe_intermediate_size=32,
        num_hidden_layers=4,  # layers 0-2 linear attention, layer 3 sparse MLA (the real pattern)
        n_shared_experts=1,
        n_routed_experts=4,
        num_experts_per_tok=2,
        first_k_dense_replace=1,
        index_topk=32,
        index_head_dim=32,
        index_n_heads=2,
        index_kpool=4,
        hc_mult=2,
        max_position_embeddings=16384,
        routed_scaling_factor=2.5,
        rms_norm_eps=1e-5,
        # 0.6.17 requires these three; 0.7.10 derives the same pattern when they are absent
        layer_types=["linear_attention"] * 3 + ["full_attention"],
        mlp_layer_types=["dense", "sparse", "sparse", "sparse"],
        linear_attn_config=dict(num_heads=2, head_dim=32, short_conv_kernel_size=4),
        **{**mla(n=256, rope=0, v=256), "q_lora_rank": 64},
    ),
)

# GLM-5.3-Flash: the text config as published (FIELD_NOTES §6.1; vllm-neuron's Glm5NextTextConfig)
GLM5_NEXT_FULL: dict[str, Any] = dict(
    model_type="glm5_next",
    text_config=dict(
        model_type="glm5_next_text",
        vocab_size=154880,
        hidden_size=4096,
        num_hidden_layers=45,
        index_topk=2048,
        index_kpool=4,
        **mla(n=256, rope=0, v=256, heads=64, q=1536),
    ),
)

LONGCAT_SPARSE_TINY: dict[str, Any] = {
    **{k: v for k, v in lm.LONGCAT_TINY.items() if k != "attention_method"},
    "model_type": "longcat_flash_sparse",
    "attention_method": "LSA",
    "index_n_heads": 2,
    "index_head_dim": 64,  # the indexer ropes qk_rope_head_dim (64) of it
    "index_topk": 32,
}

YOUTU_VL_TINY: dict[str, Any] = dict(
    model_type="youtu_vl",
    vocab_size=VOCAB_TINY,
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    max_position_embeddings=16384,
    **mla(),
)

# Hunyuan V4 (mlx-vlm 0.7.10): DeepSeek-V3.2-style sparse MLA, GLM-4.7 head dims, one KV head,
# hyper-connections; its gates are still `sequence_length == 1` in 0.7.10
HY_V4_TINY: dict[str, Any] = dict(
    model_type="hy_v4",
    vocab_size=VOCAB_TINY,
    hidden_size=64,
    intermediate_size=128,
    moe_intermediate_size=32,
    num_hidden_layers=2,
    n_shared_experts=1,
    n_routed_experts=4,
    num_experts_per_tok=2,
    first_k_dense_replace=1,
    index_head_dim=64,  # the indexer ropes qk_rope_head_dim (64) of it
    index_n_heads=2,
    index_topk=32,
    hc_mult=2,
    max_position_embeddings=16384,
    **{**mla(n=192, v=256), "num_key_value_heads": 1},
)

GLM_MOE_DSA_TINY: dict[str, Any] = {
    **lm.GLM_LITE_TINY,
    **lm.DSV32,
    "model_type": "glm_moe_dsa",
    "moe_layer_freq": 1,
    "topk_method": "noaux_tc",
    "scoring_func": "sigmoid",
    "norm_topk_prob": True,
    "rms_norm_eps": 1e-5,
    "attention_bias": False,
    "rope_parameters": dict(rope_type="default", rope_theta=1000000.0),
}

FAMILIES: dict[str, VlmFamily] = {
    f.name: f
    for f in (
        VlmFamily("deepseek_v3", lm.DSV3_TINY, lm.DSV3_FULL, "DeepSeek-V3 config.json"),
        VlmFamily(
            "deepseek_v32",
            {**lm.DSV3_TINY, "model_type": "deepseek_v32", **lm.DSV32},
            None,
            sparse=True,
        ),
        VlmFamily("glm4_moe_lite", lm.GLM_LITE_TINY, None),
        VlmFamily("glm_moe_dsa", GLM_MOE_DSA_TINY, lm.GLM5_FULL, "GLM-5 config.json", sparse=True),
        VlmFamily(
            "glm5_next",
            GLM5_NEXT_TINY,
            GLM5_NEXT_FULL,
            "GLM-5.3-Flash text config",
            sparse=True,
            hybrid=True,
        ),
        VlmFamily("kimi_k3", lm.KIMI_K3_TINY, None, hybrid=True),
        VlmFamily("kimi_linear", lm.KIMI_LINEAR_TINY, lm.KIMI_LINEAR_FULL, hybrid=True),
        VlmFamily("longcat_flash", lm.LONGCAT_TINY, lm.LONGCAT_FULL, "LongCat-Flash-Chat"),
        VlmFamily(
            "longcat_flash_sparse",
            LONGCAT_SPARSE_TINY,
            None,
            sparse=True,
            versions=("0.7.10",),
        ),
        VlmFamily("youtu_vl", YOUTU_VL_TINY, None),
        VlmFamily("hy_v4", HY_V4_TINY, None, sparse=True, versions=("0.7.10",), fixed_from=None),
    )
}


def split_name(name: str) -> tuple[bool, str]:
    """("mlx-vlm:glm4_moe_lite") -> (True, "glm4_moe_lite"); a bare name -> (False, name)."""
    if name.startswith(PREFIX):
        return True, name[len(PREFIX) :]
    return False, name


def family(name: str) -> VlmFamily:
    _, bare = split_name(name)
    if bare not in FAMILIES:
        raise KeyError(f"unknown mlx-vlm MLA family {bare!r}: use one of {', '.join(FAMILIES)}")
    return FAMILIES[bare]


def config_for(name: str, size: str = "tiny") -> dict[str, Any]:
    fam = family(name)
    if size == "tiny":
        return copy.deepcopy(fam.tiny)
    if size == "full":
        if fam.full is None:
            raise KeyError(f"no public full-size config known for {fam.name}; use size='tiny'")
        return copy.deepcopy(fam.full)
    raise ValueError(f"size must be 'tiny' or 'full', got {size!r}")
