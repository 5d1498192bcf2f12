"""mlx calls whose stubs are wider than what they return here, typed once: `item()` is any scalar
(complex included), `tolist()` a scalar or nested list, `mx.load` an array or a dict or a tuple,
where every caller knows which it gets; and the arrays a module keeps beside its parameters,
evaluated where the module was built."""

from __future__ import annotations

from typing import Any, cast

import mlx.core as mx
import mlx.nn as nn
from mlx.utils import tree_flatten


def as_int(a: mx.array) -> int:
    """A one-element array's value as an int."""
    return int(cast(float, a.item()))


def as_float(a: mx.array) -> float:
    """A one-element array's value as a float."""
    return float(cast(float, a.item()))


def as_ints(a: mx.array) -> list[int]:
    """A 1-D integer array's values."""
    return cast(list[int], a.tolist())


def load_safetensors(path: str) -> dict[str, mx.array]:
    """The arrays of a .safetensors file, by name."""
    return cast(dict[str, mx.array], mx.load(path))


def flat_arrays(tree: Any) -> list[tuple[str, mx.array]]:
    """(dotted name, array) for every array of a parameter tree (tree_flatten without a
    `destination` returns this list)."""
    return cast(list[tuple[str, mx.array]], tree_flatten(tree))


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
