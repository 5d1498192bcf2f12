"""Undo a timed step on any cache: trim what can be trimmed, restore the rest from a snapshot.

A timed step appends L tokens that the next sample must not see. Attention caches (KVCache, and
cache lists of them) trim back by moving their offset. A linear-attention layer's recurrent state
(ArraysCache: kimi_linear, kimi_k3, glm5_next) and mlx-vlm's pooling cache cannot be trimmed: the
state after L tokens does not contain the state before them. Those layers are copied before the
step, outside the timed region, and put back after it; the copy is of those layers only (a
recurrent state is small; glm5_next's sparse layers copy their latent).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import mlx.core as mx


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
