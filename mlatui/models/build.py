"""Random-weight mlx-lm models of a family (whole, or one attention layer), quantized on request."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import mlx.core as mx
import mlx.nn as nn

GROUP_SIZE = 64


def model_from_config(config: dict[str, Any]) -> nn.Module:
    """mlx-lm's model of `config["model_type"]`; mlx-vlm's language model for a type only mlx-vlm
    has, or one spelled "mlx-vlm:<type>" (mlatui.models.vlm)."""
    from mlatui.models import vlm

    if vlm.needs_vlm(config.get("model_type")):
        return vlm.language_model(config, vlm.vlm_source(f"model type {config['model_type']!r}"))
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


def attention_layer(
    name: str,
    size: str = "full",
    bits: int | None = None,
    seed: int = 0,
    dtype: mx.Dtype = mx.float32,
    config: dict[str, Any] | None = None,
) -> nn.Module:
    """One MLA attention module of the family's geometry (mlx-lm's or mlx-vlm's,
    mlatui.models.families; `config`, when given, instead of the family's at `size`) with
    random weights; only its own weights are allocated (the rest of the model is never
    evaluated)."""
    from mlatui.gate.mla import mla_modules
    from mlatui.models.families import lookup

    mx.random.seed(seed)
    family = lookup(name)
    if config is not None:
        family = replace(family, full=config)
    # one layer where the family's layer pattern survives it; hybrids and mlx-vlm's families are
    # built whole, lazily (their layer patterns name indices), and only the layer is evaluated
    one_layer = 1 if family.runtime == "mlx-lm" and not family.hybrid else None
    model = model_from_config(family.config("full" if config is not None else size, one_layer))
    modules = [m for _, m in mla_modules(model)]
    # a layer that runs its own indexer where some layers share another's top-k
    attn = next((m for m in modules if getattr(m, "indexer", False) is not None), modules[0])
    attn.set_dtype(dtype)
    if bits:
        quantize(attn, bits)
    attn.eval()
    mx.eval(attn.parameters())
    return attn
