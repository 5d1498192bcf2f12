"""mlx calls whose stubs are wider than what they return here, typed once: `item()` is any scalar
(complex included), `tolist()` a scalar or nested list, `mx.load` an array or a dict or a tuple,
where every caller knows which it gets; and the arrays a module or a cache holds beside its
parameters or state, evaluated where they were built.

A timed step is undone on any cache (`before_step`): attention caches (KVCache, and cache lists
of them) trim back by moving their offset. A linear-attention layer's recurrent state
(ArraysCache: kimi_linear, kimi_k3, glm5_next) and mlx-vlm's pooling cache cannot be trimmed: the
state after L tokens does not contain the state before them. Those layers are copied before the
step, outside the timed region, and put back after it; the copy is of those layers only (a
recurrent state is small; glm5_next's sparse layers copy their latent)."""

from __future__ import annotations

import copy
from collections.abc import Callable
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


def _trimmable(layer: Any) -> bool:
    check = getattr(layer, "is_trimmable", None)
    return bool(check()) if check is not None else False


def held_arrays(obj: Any, depth: int = 0) -> list[mx.array]:
    """The arrays a cache holds, nested caches and lists of them included: a cache's `state`
    leaves some out (a sparse layer's index pool, buffer capacity past the offset)."""
    if isinstance(obj, mx.array):
        return [obj]
    if isinstance(obj, (list, tuple)):
        return [a for v in obj for a in held_arrays(v, depth)]
    if depth < 3 and hasattr(obj, "__dict__") and not isinstance(obj, type):
        return [a for v in vars(obj).values() for a in held_arrays(v, depth + 1)]
    return []


def before_step(caches: list[Any]) -> Callable[[int], None]:
    """Call before a step; returns `rewind(n)`, which takes the `n` tokens the step appended back
    out: trimmable layers are trimmed, the others are restored from a snapshot taken now (and
    evaluated now, so no copy runs inside the timed region)."""
    saved = {i: copy.deepcopy(layer) for i, layer in enumerate(caches) if not _trimmable(layer)}
    if saved:
        mx.eval(held_arrays(list(saved.values())))

    def rewind(n: int) -> None:
        for i, layer in enumerate(caches):
            if i in saved:
                caches[i] = saved[i]
            elif n:
                layer.trim(n)

    return rewind
