"""Every MLA family in mlx-lm 0.32.2 that has an absorbed path: configs and random-weight models.

Tiny configs keep the real MLA ranks (kv_lora_rank 512 and the family's nope/v head dims) so the
threshold is the real one; everything else (hidden size, heads, layers, experts, vocab) is small.
Full configs are the public checkpoints' geometry (`full=None` where no public config is known).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import mlx.core as mx
import mlx.nn as nn

from mlatui.config.model_inputs import text_config

VOCAB_TINY = 256
GROUP_SIZE = 64


@dataclass(frozen=True)
class Family:
    name: str
    tiny: dict[str, Any]
    full: dict[str, Any] | None
    source: str = ""  # where the full config comes from
    nested: bool = False  # geometry lives in config["text_config"]
    moe: bool = True
    sparse: bool = False  # deepseek_v32-style top-k indexer
    hybrid: bool = False  # linear-attention layers with non-trimmable ArraysCache

    @property
    def model_type(self) -> str:
        return self.tiny["model_type"]


def _mla(r=512, n=128, rope=64, v=128, heads=2, q=64) -> dict[str, Any]:
    return dict(
        kv_lora_rank=r,
        qk_nope_head_dim=n,
        qk_rope_head_dim=rope,
        v_head_dim=v,
        num_attention_heads=heads,
        num_key_value_heads=heads,
        q_lora_rank=q,
    )


_DSV3_TINY = dict(
    model_type="deepseek_v3",
    vocab_size=VOCAB_TINY,
    hidden_size=64,
    intermediate_size=128,
    moe_intermediate_size=32,
    num_hidden_layers=2,
    n_shared_experts=1,
    n_routed_experts=4,
    num_experts_per_tok=2,
    n_group=2,
    topk_group=1,
    routed_scaling_factor=2.5,
    first_k_dense_replace=1,
    max_position_embeddings=16384,
    **_mla(),
)

_DSV3_FULL = dict(
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
    **_mla(heads=128, q=1536),
)

_KIMI_K2_FULL = {
    **_DSV3_FULL,
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
    "rope_scaling": {**_DSV3_FULL["rope_scaling"], "factor": 32.0},
}

_MOONLIGHT_FULL = {
    **_DSV3_FULL,
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
    **_mla(heads=16, q=None),
}

_DSV32 = dict(index_head_dim=128, index_n_heads=2, index_topk=32)

_GLM_LITE_TINY = {
    **_DSV3_TINY,
    "model_type": "glm4_moe_lite",
    "n_group": 1,
    "topk_group": 1,
    "routed_scaling_factor": 1.8,
    **_mla(n=192, v=256),
}

_GLM5_FULL = dict(
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
    **_mla(n=192, v=256, heads=64, q=2048),
)

_KIMI_LINEAR_TINY: dict[str, Any] = dict(
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

_KIMI_LINEAR_FULL = dict(
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

_KIMI_K3_TINY = dict(
    model_type="kimi_k3",
    text_config={
        **_KIMI_LINEAR_TINY,
        "hidden_act": "situ",
        "activation_situ_beta": 4.0,
        "activation_situ_linear_beta": 25.0,
        "q_lora_rank": 64,
        "mla_use_output_gate": True,
        "routed_expert_hidden_size": 32,
        "latent_moe_use_norm": True,
        "linear_attn_config": {
            **_KIMI_LINEAR_TINY["linear_attn_config"],
            "gate_lower_bound": -5.0,
            "use_full_rank_gate": True,
        },
    },
)

_LONGCAT_TINY = dict(
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
    **{k: v for k, v in _mla().items() if k != "num_key_value_heads"},
)

_LONGCAT_FULL = {
    **_LONGCAT_TINY,
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

_BAILING_V3_TINY = dict(
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
    **{k: v for k, v in _mla().items() if k != "num_key_value_heads"},
)

_BAILING_V3_FULL = {
    **_BAILING_V3_TINY,
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

_BAILING_HYBRID_TINY = dict(
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
    **_mla(),
)

_MISTRAL4_TINY = dict(
    model_type="mistral4",
    vocab_size=VOCAB_TINY,
    hidden_size=64,
    intermediate_size=128,
    moe_intermediate_size=32,
    num_hidden_layers=2,
    n_shared_experts=1,
    n_routed_experts=4,
    num_experts_per_tok=2,
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
    **_mla(r=256, n=64, v=128),
)

_MISTRAL4_FULL = {
    **_MISTRAL4_TINY,
    "vocab_size": 131072,
    "hidden_size": 4096,
    "intermediate_size": 12288,
    "moe_intermediate_size": 2048,
    "num_hidden_layers": 36,
    "n_routed_experts": 128,
    "num_experts_per_tok": 4,
    "max_position_embeddings": 1048576,
    **_mla(r=256, n=64, v=128, heads=32, q=1024),
}


def _glm_lite_full() -> dict[str, Any]:
    from dataclasses import asdict

    from mlx_lm.models.glm4_moe_lite import ModelArgs

    return asdict(ModelArgs())


def _wrap(model_type: str, text: dict[str, Any]) -> dict[str, Any]:
    return {"model_type": model_type, "text_config": {**text, "model_type": "deepseek_v3"}}


FAMILIES: dict[str, Family] = {
    f.name: f
    for f in (
        Family("deepseek_v3", _DSV3_TINY, _DSV3_FULL, "DeepSeek-V3 config.json"),
        Family(
            "kimi_k2",
            {**_DSV3_TINY, "model_type": "kimi_k2"},
            _KIMI_K2_FULL,
            "Kimi-K2-Instruct config.json (mlx-lm remaps kimi_k2 to deepseek_v3)",
        ),
        Family(
            "kimi_vl",
            _wrap("kimi_vl", _DSV3_TINY),
            _wrap("kimi_vl", _MOONLIGHT_FULL),
            "Kimi-VL-A3B text model = Moonlight-16B-A3B (MLA dims as DeepSeek-V3)",
            nested=True,
        ),
        Family(
            "kimi_k25",
            _wrap("kimi_k25", _DSV3_TINY),
            _wrap("kimi_k25", _KIMI_K2_FULL),
            "Kimi-K2.5 text model = Kimi-K2 geometry",
            nested=True,
        ),
        Family(
            "deepseek_v32",
            {**_DSV3_TINY, "model_type": "deepseek_v32", **_DSV32},
            {
                **_DSV3_FULL,
                "model_type": "deepseek_v32",
                "index_head_dim": 128,
                "index_n_heads": 64,
                "index_topk": 2048,
            },
            "DeepSeek-V3.2 config.json",
            sparse=True,
        ),
        Family(
            "glm_moe_dsa",
            {
                **_GLM_LITE_TINY,
                **_DSV32,
                "model_type": "glm_moe_dsa",
                "moe_layer_freq": 1,
                "topk_method": "noaux_tc",
                "scoring_func": "sigmoid",
                "norm_topk_prob": True,
                "rms_norm_eps": 1e-5,
                "attention_bias": False,
                "rope_parameters": dict(rope_type="default", rope_theta=1000000.0),
            },
            _GLM5_FULL,
            "GLM-5 config.json (attention and indexer dims; MoE sizes medium confidence)",
            sparse=True,
        ),
        Family(
            "glm4_moe_lite",
            _GLM_LITE_TINY,
            None,  # filled lazily from mlx-lm's ModelArgs defaults, which are GLM-4.7-Flash
            "GLM-4.7-Flash = mlx-lm glm4_moe_lite.ModelArgs defaults",
        ),
        Family(
            "kimi_linear",
            _KIMI_LINEAR_TINY,
            _KIMI_LINEAR_FULL,
            "Kimi-Linear-48B-A3B config.json",
            hybrid=True,
        ),
        Family("kimi_k3", _KIMI_K3_TINY, None, nested=True, hybrid=True),
        Family("longcat_flash", _LONGCAT_TINY, _LONGCAT_FULL, "LongCat-Flash-Chat config.json"),
        Family(
            "longcat_flash_ngram",
            {
                **{k: v for k, v in _LONGCAT_TINY.items() if k != "attention_method"},
                "model_type": "longcat_flash_ngram",
                "ngram_vocab_size_ratio": 4,
                "emb_neighbor_num": 2,
                "emb_split_num": 2,
            },
            None,
            hybrid=True,
        ),
        Family(
            "bailing_moe_v3",
            _BAILING_V3_TINY,
            _BAILING_V3_FULL,
            "Ling-3.0-tiny (mlx-lm bailing_moe_v3 defaults)",
            hybrid=True,
        ),
        Family("bailing_hybrid", _BAILING_HYBRID_TINY, None, hybrid=True),
        Family(
            "mistral4",
            _MISTRAL4_TINY,
            _MISTRAL4_FULL,
            "Mistral-Small-4-119B (transformers Mistral4Config)",
        ),
    )
}


def family(name: str) -> Family:
    if name not in FAMILIES:
        raise KeyError(f"unknown MLA family {name!r}: use one of {', '.join(FAMILIES)}")
    return FAMILIES[name]


LAYER_KEYS = ("num_hidden_layers", "num_layers")


def _set_layers(config: dict[str, Any], layers: int) -> None:
    for c in (config, text_config(config)):
        for k in LAYER_KEYS:
            if k in c:
                c[k] = layers
        lac = c.get("linear_attn_config")
        if lac:
            # keep the family's pattern inside the first `layers` layers, with at least one MLA layer
            full = [i for i in lac["full_attn_layers"] if i <= layers] or [layers]
            lac["full_attn_layers"] = full
            lac["kda_layers"] = [i for i in range(1, layers + 1) if i not in full]
        if "layer_group_size" in c:
            c["layer_group_size"] = min(c["layer_group_size"], layers)


def config_for(
    name: str,
    size: str = "tiny",
    layers: int | None = None,
    **overrides: Any,
) -> dict[str, Any]:
    """A config.json dict for `family` at `size` ("tiny" | "full"), optionally with fewer layers."""
    fam = family(name)
    if size == "tiny":
        config = copy.deepcopy(fam.tiny)
    elif size == "full":
        full = _glm_lite_full() if fam.name == "glm4_moe_lite" else fam.full
        if full is None:
            raise KeyError(f"no public full-size config known for {name}; use size='tiny'")
        config = copy.deepcopy(full)
    else:
        raise ValueError(f"size must be 'tiny' or 'full', got {size!r}")
    if layers is not None:
        _set_layers(config, layers)
    text_config(config).update(overrides)
    return config


def model_from_config(config: dict[str, Any]) -> nn.Module:
    from mlx_lm.utils import _get_classes

    model_cls, args_cls = _get_classes(config)
    return model_cls(args_cls.from_dict(config))


def quantize(model: nn.Module, bits: int, group_size: int = GROUP_SIZE) -> None:
    nn.quantize(
        model,
        group_size=group_size,
        bits=bits,
        class_predicate=lambda _, m: (
            hasattr(m, "to_quantized") and m.weight.shape[-1] % group_size == 0
        ),
    )


def build_model(
    name: str,
    size: str = "tiny",
    layers: int | None = None,
    bits: int | None = None,
    seed: int = 0,
    dtype: mx.Dtype = mx.float32,
    evaluate: bool = True,
    **overrides: Any,
) -> nn.Module:
    """A random-weight mlx-lm model of `family`. On CPU, MoE needs float32 or `bits` weights
    (GatherMM is float32-only). `evaluate=False` leaves the weights lazy (nothing is allocated)."""
    mx.random.seed(seed)
    model = model_from_config(config_for(name, size, layers, **overrides))
    model.set_dtype(dtype)
    if bits:
        quantize(model, bits)
    model.eval()
    if evaluate:
        mx.eval(model.parameters())
    return model


def attention_layer(
    name: str,
    size: str = "full",
    bits: int | None = None,
    seed: int = 0,
    dtype: mx.Dtype = mx.float32,
) -> nn.Module:
    """One MLA attention module of the family's geometry with random weights; only its own
    weights are allocated (the rest of the model is never evaluated)."""
    from mlatui.gate.mla import mla_modules

    mx.random.seed(seed)
    config = config_for(name, size, layers=1)
    model = model_from_config(config)
    attn = mla_modules(model)[0][1]
    attn.set_dtype(dtype)
    if bits:
        quantize(attn, bits)
    attn.eval()
    mx.eval(attn.parameters())
    return attn
