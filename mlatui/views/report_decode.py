"""The decode / tune phase tables (pure Python)."""

from __future__ import annotations

RULE_WORDS = {"exact-match": "exact match", "rejection-sampling": "rejection sampling"}


def rule_text(rule: str, temperature: float | None) -> str:
    """The acceptance rule and the sampling it ran under ("rejection sampling, T=0.8",
    "exact match, greedy"); "–" for plain decode and recordings without a rule."""
    if not rule:
        return "–"
    words = RULE_WORDS.get(rule, rule)
    if temperature is None:
        return words
    return f"{words}, " + (f"T={temperature:g}" if temperature else "greedy")


def share_text(within: float | None, across: float | None) -> str:
    """The distinct-4-gram shares of a result's text: within its blocks (pooled) / across them."""
    if within is None:
        return "–"
    return f"{within:.0%}" + (f" / {across:.0%}" if across is not None else "")


SHARE_HEAD = "distinct 4-grams (block / across)"
