"""Shard a loaded model the way mlx-lm shards it: `model.shard(group)` (tensor parallel: every
rank keeps 1/N of the attention heads and MLP columns, with an `all_sum` after each layer's
attention and MLP) or `model.model.pipeline(group)` (every rank keeps a contiguous block of
layers). Both arms are built after this, so the patch sees the sharded heads: its gate uses the
per-rank head count, as the rank's own attention does."""

from __future__ import annotations

from typing import Any

import mlx.core as mx
import mlx.nn as nn

from mlatui.host.distributed import ShardMode
from mlatui.models.loading import LoadError


def can_shard(model: nn.Module, mode: ShardMode, size: int) -> str | None:
    """None if `model` can be sharded over `size` ranks in `mode`; else why not, in words."""
    family = getattr(getattr(model, "args", None), "model_type", type(model).__module__)
    if mode is ShardMode.TENSOR:
        if not callable(getattr(model, "shard", None)):
            return f"mlx-lm's {family} has no tensor-parallel shard()"
        for layer in _layers(model):
            heads = getattr(getattr(layer, "self_attn", None), "num_heads", None)
            if isinstance(heads, int) and heads % size:
                return f"{heads} attention heads do not split over {size} ranks"
        return None
    inner = getattr(model, "model", None)
    if not callable(getattr(inner, "pipeline", None)):
        return f"mlx-lm's {family} has no pipeline()"
    if len(_layers(model)) < size:
        return f"{len(_layers(model))} layers cannot fill {size} pipeline stages"
    return None


def shard(model: nn.Module, mode: ShardMode, group: Any, what: str = "model") -> None:
    """Shard in place and evaluate the parameters (each rank then holds only its part)."""
    why = can_shard(model, mode, group.size())
    if why is not None:
        other = "pipeline" if mode is ShardMode.TENSOR else "tensor"
        raise LoadError(
            f"{what}: cannot shard {mode.value}-parallel: {why} — try [model] shard = "
            f'"{other}" in the scenario, or run it on one process'
        )
    try:
        if mode is ShardMode.TENSOR:
            model.shard(group)
        else:
            model.model.pipeline(group)
    except ValueError as e:  # mlx's shard_linear: a dimension that does not split
        raise LoadError(f"{what}: mlx-lm could not shard it {mode.value}-parallel: {e}") from e
    mx.eval(model.parameters())


def _layers(model: nn.Module) -> list:
    inner = getattr(model, "model", None)
    layers = getattr(inner, "layers", None) or getattr(model, "layers", None) or []
    return [layer for layer in layers if layer is not None]
