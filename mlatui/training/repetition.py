"""How repetitive greedy output is: the share of distinct n-grams among all n-grams of a stream."""

from __future__ import annotations

from collections.abc import Sequence


def distinct_ngram_share(tokens: Sequence[int], n: int = 4) -> float | None:
    """distinct n-grams / n-grams in `tokens` (1.0: nothing repeats; None: fewer than n tokens).
    A stream that loops over a k-token phrase scores about k / len(tokens)."""
    grams = [tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)]
    return len(set(grams)) / len(grams) if grams else None
