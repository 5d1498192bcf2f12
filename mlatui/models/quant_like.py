"""Quantize a module the way an mlx model folder is quantized, and read back how saved weights are.

`quantize_like` repeats the predicate `mlx_lm convert -q` applies (mlx_lm.utils.quantize_model):
a module is quantized when it has `to_quantized`, its input width is a multiple of the group size,
and the model's own `quant_predicate` (if it has one) agrees; per-module entries of the folder's
`quantization` table win, as they do when mlx-lm loads the folder. `infer_quant` is mlx-lm's
`infer_quant_config`, with a copy for releases that predate it (0.31.x).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import mlx.core as mx
import mlx.nn as nn

MODES = ("affine", "mxfp4", "nvfp4", "mxfp8")


@dataclass(frozen=True)
class Quant:
    """One quantization: what `to_quantized` / `mx.quantize` take."""

    bits: int
    group_size: int
    mode: str = "affine"

    @property
    def label(self) -> str:
        mode = "" if self.mode == "affine" else f" {self.mode}"
        return f"{self.bits}-bit{mode} g{self.group_size}"

    def params(self) -> dict[str, Any]:
        return {"bits": self.bits, "group_size": self.group_size, "mode": self.mode}


def folder_quant(config: dict[str, Any]) -> tuple[Quant | None, dict[str, Any]]:
    """(the default quantization, per-module overrides) of an mlx folder's config.json; None
    when the folder is not quantized."""
    q = config.get("quantization") or config.get("quantization_config")
    if not isinstance(q, dict) or "bits" not in q:
        return None, {}
    overrides = {k: v for k, v in q.items() if isinstance(v, dict | bool)}
    mode = str(q.get("mode", "affine"))
    return Quant(int(q["bits"]), int(q["group_size"]), mode), overrides


def infer_quant(path: str, module: nn.Module, weights: dict[str, mx.array]) -> dict[str, Any]:
    """group_size, bits and mode a saved weight was packed with (mlx-lm's own rule)."""
    try:
        from mlx_lm.utils import infer_quant_config
    except ImportError:  # mlx-lm < 0.32: the same rule, here
        return _infer(path, module, weights)
    return dict(infer_quant_config(path, module, weights))


def _infer(path: str, module: nn.Module, weights: dict[str, mx.array]) -> dict[str, Any]:
    scales = weights[f"{path}.scales"]
    in_dims = module.weight.shape[-1]
    group_size = in_dims // scales.shape[-1]
    bits = (weights[f"{path}.weight"].shape[-1] * 32) // in_dims
    if scales.dtype != mx.uint8:  # only affine keeps its scales in the weight dtype
        return {"group_size": group_size, "bits": bits, "mode": "affine"}
    modes = {(4, 16): "nvfp4", (4, 32): "mxfp4", (8, 32): "mxfp8"}
    if (bits, group_size) in modes:
        return {"group_size": group_size, "bits": bits, "mode": modes[(bits, group_size)]}
    raise ValueError(f"cannot infer the quantization of {path}: {bits} bits, group {group_size}")


def saved_quant(weights: dict[str, mx.array], module: nn.Module) -> dict[str, Quant]:
    """{module path: its quantization} for every module of `module` stored quantized in
    `weights` (names relative to `module`)."""
    out = {}
    for path, m in module.named_modules():
        if path and hasattr(m, "to_quantized") and f"{path}.scales" in weights:
            p = infer_quant(path, m, weights)
            out[path] = Quant(int(p["bits"]), int(p["group_size"]), str(p.get("mode", "affine")))
    return out


def dequantize_weights(weights: dict[str, mx.array], quant: dict[str, Quant], dtype: Any) -> dict:
    """The same weights with every quantized module's weight unpacked to `dtype`."""
    out = dict(weights)
    for path, q in quant.items():
        scales = out.pop(f"{path}.scales")
        biases = out.pop(f"{path}.biases", None)
        w = mx.dequantize(
            out[f"{path}.weight"], scales, biases, group_size=q.group_size, bits=q.bits, mode=q.mode
        )
        out[f"{path}.weight"] = w.astype(dtype)
    return out


def quantize_like(
    module: nn.Module,
    config: dict[str, Any],
    prefix: str,
    predicate: Any = None,
    sibling: str | None = None,
) -> Quant | None:
    """Quantize `module` (in place) as the folder of `config` is. `prefix` is the module's path in
    the full model ("model.layers.47."), for the per-module table and `predicate` (the model's
    `quant_predicate`); `sibling` another layer's prefix whose table entries apply when the
    module's own are absent (a mixed-precision recipe written before this layer existed)."""
    default, table = folder_quant(config)
    if default is None:
        return None

    def choose(path: str, m: nn.Module) -> bool | dict[str, Any]:
        if not hasattr(m, "to_quantized"):
            return False
        full = prefix + path
        for key in (full, (sibling + path) if sibling else None):
            if key is not None and key in table:
                entry = table[key]
                return dict(entry) if isinstance(entry, dict) else bool(entry)
        if m.weight.shape[-1] % default.group_size != 0:
            return False
        if predicate is not None:
            said = predicate(full, m)
            if isinstance(said, dict) or not said:
                return said
        return default.params()

    nn.quantize(
        module,
        group_size=default.group_size,
        bits=default.bits,
        mode=default.mode,
        class_predicate=choose,
    )
    return default
