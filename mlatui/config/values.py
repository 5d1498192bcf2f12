"""Checks on values read from parsed JSON or TOML that more than one reader shares."""

from __future__ import annotations


def is_positive_int(value: object) -> bool:
    """An int above 0 in parsed JSON/TOML (a bool is not one)."""
    return isinstance(value, int) and not isinstance(value, bool) and value > 0
