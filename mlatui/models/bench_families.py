"""Every MLA family a command takes by name (no mlx): mlx-lm's (mlatui.models.families) and
mlx-vlm's (mlatui.models.vlm_configs). A bare name is mlx-lm's where mlx-lm has it, else
mlx-vlm's; "mlx-vlm:NAME" is always mlx-vlm's. `thresholds`, `bench attention` and `calibrate`
resolve a name here, so they know the same families."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from mlatui.config.model_inputs import text_config
from mlatui.models import families, vlm_configs


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
        return vlm_configs.split_name(self.name)[1]

    @property
    def has_full(self) -> bool:
        return self.full is not None

    def config(self, size: str, layers: int | None = None) -> dict[str, Any]:
        """Its config.json at `size` ("tiny" or "full"), with `model_type` spelled so that
        mlatui.models.build builds it through its runtime; KeyError where no full one is known."""
        if size not in ("tiny", "full"):
            raise ValueError(f"size must be 'tiny' or 'full', got {size!r}")
        base = self.full if size == "full" else self.tiny
        if base is None:
            raise KeyError(missing_full_config(self.name))
        config = copy.deepcopy(base)
        if layers is not None:
            families.set_layers(config, layers)
        if self.runtime == "mlx-vlm":
            config["model_type"] = vlm_configs.PREFIX + self.bare
        return config


def missing_full_config(name: str) -> str:
    """The one line a command says when a family has no public full-size config."""
    bare = vlm_configs.split_name(name)[1]
    return (
        f"{name}: no public full-size config known — pass the model's own config.json with "
        f"--config FILE (or --model FOLDER holding it; model_type {bare})"
    )


def known_names() -> list[str]:
    """mlx-lm's families, then mlx-vlm's spelled with their prefix."""
    return [*families.FAMILIES, *(vlm_configs.PREFIX + f for f in vlm_configs.FAMILIES)]


def every_runnable_name() -> list[str]:
    """One name per distinct build: mlx-lm's families, mlx-vlm's own families by their bare
    name, and mlx-vlm's copies of mlx-lm's families with the prefix."""
    vlm_only = [f for f in vlm_configs.FAMILIES if f not in families.FAMILIES]
    copies = [vlm_configs.PREFIX + f for f in vlm_configs.FAMILIES if f in families.FAMILIES]
    return [*families.FAMILIES, *vlm_only, *copies]


def lookup(name: str) -> BenchFamily:
    """The family `name` names; KeyError with the one line listing every known name."""
    spelled_vlm, bare = vlm_configs.split_name(name)
    if not spelled_vlm and name in families.FAMILIES:
        f = families.family(name)
        full = configs_full(f)
        return BenchFamily(name, "mlx-lm", f.tiny, full, f.source, f.hybrid, f.sparse)
    if bare in vlm_configs.FAMILIES:
        v = vlm_configs.FAMILIES[bare]
        return BenchFamily(name, "mlx-vlm", v.tiny, v.full, v.source, v.hybrid, v.sparse)
    raise KeyError(f"unknown family {name!r}: use one of {', '.join(known_names())}")


def configs_full(f: families.Family) -> dict[str, Any] | None:
    if f.full is None and f.name != "glm4_moe_lite":
        return None
    return families.config_for(f.name, "full")


def from_config(name: str | None, config: dict[str, Any], where: str) -> BenchFamily:
    """The family of a config.json read from `where` (its model_type; `name`, when given, must
    agree): a family with that config as its full size."""
    model_type = config.get("model_type")
    if not isinstance(model_type, str):
        raise KeyError(f"{where}: config.json has no model_type")
    chosen = name or model_type
    if vlm_configs.split_name(chosen)[1] != vlm_configs.split_name(model_type)[1]:
        raise KeyError(f"{where}: model_type {model_type!r} is not family {chosen!r}")
    found = lookup(chosen)
    if "kv_lora_rank" not in text_config(config):
        raise KeyError(f"{where}: config has no kv_lora_rank: not an MLA model")
    return BenchFamily(
        found.name, found.runtime, found.tiny, config, where, found.hybrid, found.sparse
    )
