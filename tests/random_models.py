"""Random-weight mlx-lm models of the families' configs, for tests (the product builds its random
models from a scenario's config: mlatui.models.loading)."""

from __future__ import annotations

import copy
from typing import Any

import mlx.core as mx
import mlx.nn as nn

from mlatui.models.families import VLM_FAMILIES, config_for, split_name
from mlatui.models.loading import model_from_config, quantize


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
    """A random-weight mlx-lm model of `family` (mlx-vlm's language model for "mlx-vlm:NAME").
    On CPU, MoE needs float32 or `bits` weights (GatherMM is float32-only). `evaluate=False`
    leaves the weights lazy (nothing is allocated)."""
    from mlatui.config.model_inputs import text_config
    from mlatui.models import families

    mx.random.seed(seed)
    if name.startswith(families.PREFIX):
        if layers is not None:
            raise ValueError("layers: mlx-vlm families are built at their own layer pattern")
        config = {**vlm_config(name, size), "model_type": name}
        text_config(config).update(overrides)
    else:
        config = config_for(name, size, layers, **overrides)
    model = model_from_config(config)
    model.set_dtype(dtype)
    if bits:
        quantize(model, bits)
    model.eval()
    if evaluate:
        mx.eval(model.parameters())
    return model


def vlm_config(name: str, size: str = "tiny") -> dict[str, Any]:
    """mlx-vlm's family `name`'s ("glm5_next" or "mlx-vlm:glm5_next") config.json at `size`."""
    fam = VLM_FAMILIES[split_name(name)[1]]
    config = fam.full if size == "full" else fam.tiny
    if config is None:
        raise KeyError(f"no public full-size config known for {fam.name}")
    return copy.deepcopy(config)
