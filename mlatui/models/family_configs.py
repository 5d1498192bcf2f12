"""The config.json dicts of the families (mlx-lm's and mlx-vlm's): tiny ones with the real MLA
ranks, full ones as published.

Tiny configs keep the real MLA ranks (kv_lora_rank 512 and the family's nope/v head dims) so the
threshold is the real one; everything else (hidden size, heads, layers, experts, vocab) is small.
Full configs are the public checkpoints' geometry.
"""

from __future__ import annotations

from typing import Any

VOCAB_TINY = 256


def mla(r=512, n=128, rope=64, v=128, heads=2, q=64) -> dict[str, Any]:
    return dict(
        kv_lora_rank=r,
        qk_nope_head_dim=n,
        qk_rope_head_dim=rope,
        v_head_dim=v,
        num_attention_heads=heads,
        num_key_value_heads=heads,
        q_lora_rank=q,
    )


# what the tiny MoE configs share: everything small but the MLA ranks
TINY_MOE = dict(
    vocab_size=VOCAB_TINY,
    hidden_size=64,
    intermediate_size=128,
    moe_intermediate_size=32,
    num_hidden_layers=2,
    n_shared_experts=1,
    n_routed_experts=4,
    num_experts_per_tok=2,
)

DSV3_TINY = dict(
    model_type="deepseek_v3",
    **TINY_MOE,
    n_group=2,
    topk_group=1,
    routed_scaling_factor=2.5,
    first_k_dense_replace=1,
    max_position_embeddings=16384,
    **mla(),
)

DSV3_FULL = dict(
    model_type="deepseek_v3",
    vocab_size=129280,
    hidden_size=7168,
    intermediate_size=18432,
    moe_intermediate_size=2048,
    num_hidden_layers=61,
    n_shared_experts=1,
    n_routed_experts=256,
    num_experts_per_tok=8,
    n_group=8,
    topk_group=4,
    routed_scaling_factor=2.5,
    scoring_func="sigmoid",
    topk_method="noaux_tc",
    norm_topk_prob=True,
    first_k_dense_replace=3,
    max_position_embeddings=163840,
    rms_norm_eps=1e-6,
    rope_theta=10000.0,
    rope_scaling=dict(
        type="yarn",
        factor=40,
        original_max_position_embeddings=4096,
        beta_fast=32,
        beta_slow=1,
        mscale=1.0,
        mscale_all_dim=1.0,
    ),
    **mla(heads=128, q=1536),
)

KIMI_K2_FULL = {
    **DSV3_FULL,
    "model_type": "kimi_k2",
    "vocab_size": 163840,
    "num_attention_heads": 64,
    "num_key_value_heads": 64,
    "n_routed_experts": 384,
    "n_group": 1,
    "topk_group": 1,
    "first_k_dense_replace": 1,
    "routed_scaling_factor": 2.827,
    "rope_theta": 50000.0,
    "rope_scaling": {**DSV3_FULL["rope_scaling"], "factor": 32.0},
}

MOONLIGHT_FULL = {
    **DSV3_FULL,
    "vocab_size": 163840,
    "hidden_size": 2048,
    "intermediate_size": 11264,
    "moe_intermediate_size": 1408,
    "num_hidden_layers": 27,
    "n_shared_experts": 2,
    "n_routed_experts": 64,
    "num_experts_per_tok": 6,
    "n_group": 1,
    "topk_group": 1,
    "first_k_dense_replace": 1,
    "routed_scaling_factor": 2.446,
    "rope_theta": 800000.0,
    "rope_scaling": None,
    **mla(heads=16, q=None),
}

DSV32 = dict(index_head_dim=128, index_n_heads=2, index_topk=32)
DSV32_TINY = {**DSV3_TINY, "model_type": "deepseek_v32", **DSV32}

GLM_LITE_TINY = {
    **DSV3_TINY,
    "model_type": "glm4_moe_lite",
    "n_group": 1,
    "topk_group": 1,
    "routed_scaling_factor": 1.8,
    **mla(n=192, v=256),
}

GLM_MOE_DSA_TINY: dict[str, Any] = {
    **GLM_LITE_TINY,
    **DSV32,
    "model_type": "glm_moe_dsa",
    "moe_layer_freq": 1,
    "topk_method": "noaux_tc",
    "scoring_func": "sigmoid",
    "norm_topk_prob": True,
    "rms_norm_eps": 1e-5,
    "attention_bias": False,
    "rope_parameters": dict(rope_type="default", rope_theta=1000000.0),
}

GLM5_FULL = dict(
    model_type="glm_moe_dsa",
    vocab_size=154880,
    hidden_size=6144,
    intermediate_size=12288,
    moe_intermediate_size=2048,
    num_hidden_layers=78,
    n_shared_experts=1,
    n_routed_experts=256,
    num_experts_per_tok=8,
    n_group=1,
    topk_group=1,
    routed_scaling_factor=2.5,
    topk_method="noaux_tc",
    scoring_func="sigmoid",
    norm_topk_prob=True,
    moe_layer_freq=1,
    first_k_dense_replace=3,
    max_position_embeddings=202752,
    rms_norm_eps=1e-5,
    rope_parameters=dict(rope_type="default", rope_theta=1000000.0),
    attention_bias=False,
    index_head_dim=128,
    index_n_heads=32,
    index_topk=2048,
    **mla(n=192, v=256, heads=64, q=2048),
)

KIMI_LINEAR_TINY: dict[str, Any] = dict(
    model_type="kimi_linear",
    vocab_size=VOCAB_TINY,
    hidden_size=64,
    num_hidden_layers=2,
    num_attention_heads=2,
    num_key_value_heads=2,
    intermediate_size=128,
    head_dim=32,
    rope_theta=10000.0,
    rms_norm_eps=1e-5,
    model_max_length=16384,
    num_experts=4,
    num_experts_per_token=2,
    num_shared_experts=1,
    moe_intermediate_size=32,
    first_k_dense_replace=1,
    kv_lora_rank=512,
    qk_nope_head_dim=128,
    qk_rope_head_dim=64,
    v_head_dim=128,
    mla_use_nope=True,
    linear_attn_config=dict(
        kda_layers=[1],
        full_attn_layers=[2],
        num_heads=2,
        head_dim=32,
        short_conv_kernel_size=4,
    ),
)

KIMI_LINEAR_FULL = dict(
    model_type="kimi_linear",
    vocab_size=163840,
    hidden_size=2304,
    num_hidden_layers=27,
    num_attention_heads=32,
    num_key_value_heads=32,
    intermediate_size=9216,
    head_dim=72,
    rope_theta=10000.0,
    rms_norm_eps=1e-5,
    model_max_length=1048576,
    num_experts=256,
    num_experts_per_token=8,
    num_shared_experts=1,
    moe_intermediate_size=1024,
    first_k_dense_replace=1,
    routed_scaling_factor=2.446,
    moe_router_activation_func="sigmoid",
    kv_lora_rank=512,
    qk_nope_head_dim=128,
    qk_rope_head_dim=64,
    v_head_dim=128,
    mla_use_nope=True,
    linear_attn_config=dict(
        full_attn_layers=[4, 8, 12, 16, 20, 24, 27],
        kda_layers=[i for i in range(1, 28) if i not in (4, 8, 12, 16, 20, 24, 27)],
        num_heads=32,
        head_dim=128,
        short_conv_kernel_size=4,
    ),
)

KIMI_K3_TINY = dict(
    model_type="kimi_k3",
    text_config={
        **KIMI_LINEAR_TINY,
        "hidden_act": "situ",
        "activation_situ_beta": 4.0,
        "activation_situ_linear_beta": 25.0,
        "q_lora_rank": 64,
        "mla_use_output_gate": True,
        "routed_expert_hidden_size": 32,
        "latent_moe_use_norm": True,
        "linear_attn_config": {
            **KIMI_LINEAR_TINY["linear_attn_config"],
            "gate_lower_bound": -5.0,
            "use_full_rank_gate": True,
        },
    },
)

LONGCAT_TINY = dict(
    model_type="longcat_flash",
    attention_method="MLA",
    zero_expert_type="identity",
    hidden_size=64,
    ffn_hidden_size=128,
    moe_topk=2,
    expert_ffn_hidden_size=32,
    n_routed_experts=4,
    zero_expert_num=2,
    num_layers=1,
    vocab_size=VOCAB_TINY,
    max_position_embeddings=16384,
    routed_scaling_factor=6.0,
    rms_norm_eps=1e-5,
    rope_theta=10000000.0,
    mla_scale_q_lora=True,
    mla_scale_kv_lora=True,
    attention_bias=False,
    **{k: v for k, v in mla().items() if k != "num_key_value_heads"},
)

LONGCAT_FULL = {
    **LONGCAT_TINY,
    "hidden_size": 6144,
    "ffn_hidden_size": 12288,
    "moe_topk": 12,
    "expert_ffn_hidden_size": 2048,
    "n_routed_experts": 512,
    "zero_expert_num": 256,
    "num_layers": 28,
    "vocab_size": 131072,
    "max_position_embeddings": 131072,
    "num_attention_heads": 64,
    "q_lora_rank": 1536,
}

BAILING_V3_TINY = dict(
    model_type="bailing_hybrid",
    architectures=["BailingMoeV3ForCausalLM"],
    vocab_size=VOCAB_TINY,
    hidden_size=64,
    intermediate_size=128,
    moe_intermediate_size=32,
    moe_shared_expert_intermediate_size=32,
    num_hidden_layers=2,
    num_experts=4,
    num_experts_per_tok=2,
    num_shared_experts=1,
    first_k_dense_replace=1,
    n_group=2,
    topk_group=1,
    layer_group_size=2,
    head_dim=32,
    max_position_embeddings=16384,
    **{k: v for k, v in mla().items() if k != "num_key_value_heads"},
)

BAILING_V3_FULL = {
    **BAILING_V3_TINY,
    "vocab_size": 157184,
    "hidden_size": 1536,
    "intermediate_size": 4608,
    "moe_intermediate_size": 512,
    "moe_shared_expert_intermediate_size": 512,
    "num_hidden_layers": 24,
    "num_attention_heads": 16,
    "num_experts": 128,
    "num_experts_per_tok": 8,
    "n_group": 8,
    "topk_group": 4,
    "layer_group_size": 4,
    "head_dim": 128,
    "q_lora_rank": 256,
    "max_position_embeddings": 131072,
}

BAILING_HYBRID_TINY = dict(
    model_type="bailing_hybrid",
    vocab_size=VOCAB_TINY,
    hidden_size=64,
    intermediate_size=128,
    moe_intermediate_size=32,
    moe_shared_expert_intermediate_size=32,
    num_hidden_layers=2,
    num_experts=4,
    num_experts_per_tok=2,
    num_shared_experts=1,
    n_group=2,
    topk_group=1,
    first_k_dense_replace=1,
    layer_group_size=2,
    group_norm_size=1,
    rms_norm_eps=1e-6,
    rope_theta=10000.0,
    max_position_embeddings=16384,
    routed_scaling_factor=2.5,
    head_dim=32,
    **mla(),
)

MISTRAL4_TINY = dict(
    model_type="mistral4",
    **TINY_MOE,
    routed_scaling_factor=1.0,
    norm_topk_prob=True,
    max_position_embeddings=1048576,  # = yarn factor x original length
    rms_norm_eps=1e-6,
    n_group=1,
    topk_group=1,
    first_k_dense_replace=0,
    rope_parameters=dict(
        rope_type="yarn",
        rope_theta=10000.0,
        factor=128.0,
        original_max_position_embeddings=8192,
        beta_fast=32.0,
        beta_slow=1.0,
        mscale=1.0,
        mscale_all_dim=1.0,
        llama_4_scaling_beta=0.1,
    ),
    **mla(r=256, n=64, v=128),
)

MISTRAL4_FULL = {
    **MISTRAL4_TINY,
    "vocab_size": 131072,
    "hidden_size": 4096,
    "intermediate_size": 12288,
    "moe_intermediate_size": 2048,
    "num_hidden_layers": 36,
    "n_routed_experts": 128,
    "num_experts_per_tok": 4,
    "max_position_embeddings": 1048576,
    **mla(r=256, n=64, v=128, heads=32, q=1024),
}


# ---- the families only mlx-vlm has ----

GLM5_NEXT_TINY: dict[str, Any] = dict(
    model_type="glm5_next",
    text_config=dict(
        model_type="glm5_next_text",
        # layers 0-2 linear attention, layer 3 sparse MLA (the real pattern)
        **{**TINY_MOE, "num_hidden_layers": 4},
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
    **{k: v for k, v in LONGCAT_TINY.items() if k != "attention_method"},
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
    **TINY_MOE,
    first_k_dense_replace=1,
    index_head_dim=64,  # the indexer ropes qk_rope_head_dim (64) of it
    index_n_heads=2,
    index_topk=32,
    hc_mult=2,
    max_position_embeddings=16384,
    **{**mla(n=192, v=256), "num_key_value_heads": 1},
)


def glm_lite_full() -> dict[str, Any]:
    from dataclasses import asdict

    from mlx_lm.models.glm4_moe_lite import ModelArgs

    return asdict(ModelArgs())


def wrap(model_type: str, text: dict[str, Any]) -> dict[str, Any]:
    return {"model_type": model_type, "text_config": {**text, "model_type": "deepseek_v3"}}
