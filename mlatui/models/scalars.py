"""Plain Python numbers out of mx arrays, typed: mlx's stubs give `item()` as any scalar (complex
included) and `tolist()` as a scalar or nested list, where every caller here knows which it gets."""

from __future__ import annotations

from typing import cast

import mlx.core as mx


def as_int(a: mx.array) -> int:
    """A one-element array's value as an int."""
    return int(cast(float, a.item()))


def as_float(a: mx.array) -> float:
    """A one-element array's value as a float."""
    return float(cast(float, a.item()))


def as_ints(a: mx.array) -> list[int]:
    """A 1-D integer array's values."""
    return cast(list[int], a.tolist())
