"""Every MLA family a command takes by name, and its config.json at each size (no mlx).

mlx-lm 0.32.2's MLA families with an absorbed path (`FAMILIES`) and mlx-vlm's (`VLM_FAMILIES`:
the MLA language models mlx-lm does not have, glm5_next (GLM-5.3-Flash), longcat_flash_sparse,
youtu_vl, hy_v4, and its own copies of mlx-lm's). A bare name is mlx-lm's where mlx-lm has it,
else mlx-vlm's; "mlx-vlm:NAME" is always mlx-vlm's. `thresholds`, `bench attention` and
`calibrate` resolve a name here (`lookup`), so they know the same families. `full=None` where no
public config is known. The configs themselves are in mlatui.models.family_configs;
random-weight models of them in mlatui.models.loading.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from mlatui.config.model_inputs import PREFIX, split_name, text_config
from mlatui.models import family_configs as configs

# the mlx-vlm releases a family is tested with, and the first of those whose MLA gate is fixed
VLM_VERSIONS = ("0.6.17", "0.7.10")
VLM_FIXED_FROM = "0.7.10"


@dataclass(frozen=True)
class Family:
    name: str  # the model_type (for mlx-vlm's: the package under mlx_vlm/models)
    tiny: dict[str, Any]
    full: dict[str, Any] | None
    source: str = ""  # where the full config comes from
    nested: bool = False  # geometry lives in config["text_config"]
    sparse: bool = False  # deepseek_v32-style top-k indexer
    hybrid: bool = False  # linear-attention layers with non-trimmable ArraysCache
    versions: tuple[str, ...] = VLM_VERSIONS  # mlx-vlm's families: the releases tested with it
    fixed_from: str | None = VLM_FIXED_FROM  # ... the first whose MLA gate is fixed (None: none)

    @property
    def model_type(self) -> str:
        return self.tiny["model_type"]


FAMILIES: dict[str, Family] = {
    f.name: f
    for f in (
        Family("deepseek_v3", configs.DSV3_TINY, configs.DSV3_FULL, "DeepSeek-V3 config.json"),
        Family(
            "kimi_k2",
            {**configs.DSV3_TINY, "model_type": "kimi_k2"},
            configs.KIMI_K2_FULL,
            "Kimi-K2-Instruct config.json (mlx-lm remaps kimi_k2 to deepseek_v3)",
        ),
        Family(
            "kimi_vl",
            configs.wrap("kimi_vl", configs.DSV3_TINY),
            configs.wrap("kimi_vl", configs.MOONLIGHT_FULL),
            "Kimi-VL-A3B text model = Moonlight-16B-A3B (MLA dims as DeepSeek-V3)",
            nested=True,
        ),
        Family(
            "kimi_k25",
            configs.wrap("kimi_k25", configs.DSV3_TINY),
            configs.wrap("kimi_k25", configs.KIMI_K2_FULL),
            "Kimi-K2.5 text model = Kimi-K2 geometry",
            nested=True,
        ),
        Family(
            "deepseek_v32",
            configs.DSV32_TINY,
            {
                **configs.DSV3_FULL,
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
            configs.GLM_MOE_DSA_TINY,
            configs.GLM5_FULL,
            "GLM-5 config.json (attention and indexer dims; MoE sizes medium confidence)",
            sparse=True,
        ),
        Family(
            "glm4_moe_lite",
            configs.GLM_LITE_TINY,
            None,  # filled lazily from mlx-lm's ModelArgs defaults, which are GLM-4.7-Flash
            "GLM-4.7-Flash = mlx-lm glm4_moe_lite.ModelArgs defaults",
        ),
        Family(
            "kimi_linear",
            configs.KIMI_LINEAR_TINY,
            configs.KIMI_LINEAR_FULL,
            "Kimi-Linear-48B-A3B config.json",
            hybrid=True,
        ),
        Family("kimi_k3", configs.KIMI_K3_TINY, None, nested=True, hybrid=True),
        Family(
            "longcat_flash",
            configs.LONGCAT_TINY,
            configs.LONGCAT_FULL,
            "LongCat-Flash-Chat config.json",
        ),
        Family(
            "longcat_flash_ngram",
            {
                **{k: v for k, v in configs.LONGCAT_TINY.items() if k != "attention_method"},
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
            configs.BAILING_V3_TINY,
            configs.BAILING_V3_FULL,
            "Ling-3.0-tiny (mlx-lm bailing_moe_v3 defaults)",
            hybrid=True,
        ),
        Family("bailing_hybrid", configs.BAILING_HYBRID_TINY, None, hybrid=True),
        Family(
            "mistral4",
            configs.MISTRAL4_TINY,
            configs.MISTRAL4_FULL,
            "Mistral-Small-4-119B (transformers Mistral4Config)",
        ),
    )
}


VLM_FAMILIES: dict[str, Family] = {
    f.name: f
    for f in (
        FAMILIES["deepseek_v3"],
        Family("deepseek_v32", configs.DSV32_TINY, None, sparse=True),
        Family("glm4_moe_lite", configs.GLM_LITE_TINY, None),
        Family(
            "glm_moe_dsa",
            configs.GLM_MOE_DSA_TINY,
            configs.GLM5_FULL,
            "GLM-5 config.json",
            sparse=True,
        ),
        Family(
            "glm5_next",
            configs.GLM5_NEXT_TINY,
            configs.GLM5_NEXT_FULL,
            "GLM-5.3-Flash text config",
            sparse=True,
            hybrid=True,
        ),
        Family("kimi_k3", configs.KIMI_K3_TINY, None, hybrid=True),
        Family("kimi_linear", configs.KIMI_LINEAR_TINY, configs.KIMI_LINEAR_FULL, hybrid=True),
        Family("longcat_flash", configs.LONGCAT_TINY, configs.LONGCAT_FULL, "LongCat-Flash-Chat"),
        Family(
            "longcat_flash_sparse",
            configs.LONGCAT_SPARSE_TINY,
            None,
            sparse=True,
            versions=("0.7.10",),
        ),
        Family("youtu_vl", configs.YOUTU_VL_TINY, None),
        Family(
            "hy_v4", configs.HY_V4_TINY, None, sparse=True, versions=("0.7.10",), fixed_from=None
        ),
    )
}


def family(name: str) -> Family:
    if name not in FAMILIES:
        raise KeyError(f"unknown MLA family {name!r}: use one of {', '.join(FAMILIES)}")
    return FAMILIES[name]


LAYER_KEYS = ("num_hidden_layers", "num_layers")


def set_layers(config: dict[str, Any], layers: int) -> None:
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
        full = configs.glm_lite_full() if fam.name == "glm4_moe_lite" else fam.full
        if full is None:
            raise KeyError(f"no public full-size config known for {name}; use size='tiny'")
        config = copy.deepcopy(full)
    else:
        raise ValueError(f"size must be 'tiny' or 'full', got {size!r}")
    if layers is not None:
        set_layers(config, layers)
    text_config(config).update(overrides)
    return config


@dataclass(frozen=True)
class BenchFamily:
    name: str  # as spelled: "deepseek_v3", "glm5_next", "mlx-vlm:kimi_k3"
    runtime: str  # "mlx-lm" or "mlx-vlm"
    tiny: dict[str, Any]
    full: dict[str, Any] | None  # None: no public full-size config known
    source: str
    hybrid: bool  # linear-attention layers with caches that cannot be trimmed
    sparse: bool

    @property
    def bare(self) -> str:
        return split_name(self.name)[1]

    @property
    def has_full(self) -> bool:
        return self.full is not None

    def config(self, size: str, layers: int | None = None) -> dict[str, Any]:
        """Its config.json at `size` ("tiny" or "full"), with `model_type` spelled so that
        mlatui.models.loading builds it through its runtime; KeyError where no full one is known."""
        if size not in ("tiny", "full"):
            raise ValueError(f"size must be 'tiny' or 'full', got {size!r}")
        base = self.full if size == "full" else self.tiny
        if base is None:
            raise KeyError(missing_full_config(self.name))
        config = copy.deepcopy(base)
        if layers is not None:
            set_layers(config, layers)
        if self.runtime == "mlx-vlm":
            config["model_type"] = PREFIX + self.bare
        return config


def missing_full_config(name: str) -> str:
    """The one line a command says when a family has no public full-size config."""
    bare = split_name(name)[1]
    return (
        f"{name}: no public full-size config known — pass the model's own config.json with "
        f"--config FILE (or --model FOLDER holding it; model_type {bare})"
    )


def known_names() -> list[str]:
    """mlx-lm's families, then mlx-vlm's spelled with their prefix."""
    return [*FAMILIES, *(PREFIX + f for f in VLM_FAMILIES)]


def lookup(name: str) -> BenchFamily:
    """The family `name` names; KeyError with the one line listing every known name."""
    spelled_vlm, bare = split_name(name)
    if not spelled_vlm and name in FAMILIES:
        f = family(name)
        full = configs_full(f)
        return BenchFamily(name, "mlx-lm", f.tiny, full, f.source, f.hybrid, f.sparse)
    if bare in VLM_FAMILIES:
        v = VLM_FAMILIES[bare]
        return BenchFamily(name, "mlx-vlm", v.tiny, v.full, v.source, v.hybrid, v.sparse)
    raise KeyError(f"unknown family {name!r}: use one of {', '.join(known_names())}")


def configs_full(f: Family) -> dict[str, Any] | None:
    if f.full is None and f.name != "glm4_moe_lite":
        return None
    return config_for(f.name, "full")


def from_config(name: str | None, config: dict[str, Any], where: str) -> BenchFamily:
    """The family of a config.json read from `where` (its model_type; `name`, when given, must
    agree): a family with that config as its full size."""
    model_type = config.get("model_type")
    if not isinstance(model_type, str):
        raise KeyError(f"{where}: config.json has no model_type")
    chosen = name or model_type
    if split_name(chosen)[1] != split_name(model_type)[1]:
        raise KeyError(f"{where}: model_type {model_type!r} is not family {chosen!r}")
    found = lookup(chosen)
    if "kv_lora_rank" not in text_config(config):
        raise KeyError(f"{where}: config has no kv_lora_rank: not an MLA model")
    return BenchFamily(
        found.name, found.runtime, found.tiny, config, where, found.hybrid, found.sparse
    )
