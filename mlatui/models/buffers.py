"""Arrays a module keeps beside its parameters, evaluated where the module was built."""

from __future__ import annotations

import mlx.core as mx
import mlx.nn as nn


def evaluate_buffers(*modules: nn.Module | None) -> None:
    """Evaluate the arrays each module keeps as plain attributes (a YaRN RoPE's `_freqs`, built
    lazily in its constructor). MLX on a GPU gives every thread its own stream, so a graph left
    unevaluated by the loading thread cannot be evaluated by an arm's worker thread."""
    arrays = [
        value
        for module in modules
        if module is not None
        for _, sub in module.named_modules()
        for value in (
            *(v for k, v in sub.items() if k.startswith("_")),  # kept in the dict, not parameters
            *vars(sub).values(),
        )
        if isinstance(value, mx.array)
    ]
    if arrays:
        mx.eval(arrays)
