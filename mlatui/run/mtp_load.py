"""Build an MTP layer around a target model from layer-local tensors, matched to the target.

The tensors go through the target's own mlx-lm `sanitize` (kv_b_proj -> embed_q/unembed_out,
expert stacking, fp8/int4 remaps), applied by pretending the MTP layer is layer 0. The layer then
matches its target: floats in the target's dtype, quantized the way the target's folder says. A
head stored otherwise (a hand-made bf16 sidecar beside a 4-bit folder, another bit width) is
converted here, and the conversion is said: left unquantized in bf16, its MoE experts would die on
the CPU in MLX's float32-only GatherMM.
"""

from __future__ import annotations

from typing import Any

import mlx.core as mx
import mlx.nn as nn

from mlatui.models.quant_like import dequantize_weights, folder_quant, quantize_like, saved_quant


def sanitize_layer(model: nn.Module, local: dict[str, mx.array]) -> dict[str, mx.array]:
    """mlx-lm's transforms of the target applied to one layer's layer-local tensors."""
    own = {f"model.layers.0.{k}": v for k, v in local.items() if not k.startswith("embed_tokens.")}
    sanitize = getattr(model, "sanitize", None)
    done = sanitize(own) if callable(sanitize) else own
    return {k[len("model.layers.0.") :]: v for k, v in done.items()}


def target_dtype(model: nn.Module) -> Any:
    return model.model.norm.weight.dtype


def build_layer(
    model: nn.Module,
    layer: nn.Module,
    weights: dict[str, mx.array],
    config: dict[str, Any],
    layer_idx: int,
) -> list[str]:
    """Load `weights` (sanitized, layer-local) into the empty `layer`, matched to `model` and its
    folder's `config`. Returns what was converted (empty when the head already matched).
    Raises ValueError (mlx's strict load) when the tensors do not fit the layer."""
    notes: list[str] = []
    want, _ = folder_quant(config)
    have = saved_quant(weights, layer)
    dtype = target_dtype(model)
    matches = bool(have) == (want is not None) and all(q == want for q in have.values())
    if not matches:
        weights = dequantize_weights(weights, have, dtype)
        kinds = sorted({q.label for q in have.values()}) or ["unquantized"]
        notes.append(
            f"MTP head stored {', '.join(kinds)}, target {want.label if want else 'unquantized'}: "
            "converted to match"
        )
        have = {}
    if have:  # stored the way the target is: rebuild the same quantized modules

        def stored(path: str, m: nn.Module) -> bool | dict:
            q = have.get(path)
            return q.params() if q is not None and hasattr(m, "to_quantized") else False

        nn.quantize(layer, class_predicate=stored)
    cast = getattr(model, "cast_predicate", lambda k: True)
    weights = {
        k: v.astype(dtype) if mx.issubdtype(v.dtype, mx.floating) and cast(k) else v
        for k, v in weights.items()
    }
    layer.load_weights(list(weights.items()), strict=True)
    if not have and want is not None:
        prefix = f"model.layers.{layer_idx}."
        sibling = f"model.layers.{layer_idx - 1}."
        quantize_like(layer, config, prefix, _quant_predicate(model), sibling)
    layer.eval()
    mx.eval(layer.parameters())
    return notes


def _quant_predicate(model: nn.Module) -> Any:
    pred = getattr(model, "quant_predicate", None)
    return pred if callable(pred) else None
