"""The checks every scenario parser shares: one-line errors naming the table and the key."""

from __future__ import annotations

from typing import Any


class ScenarioError(ValueError):
    pass


def int_list(where: str, key: str, value: Any, minimum: int = 1) -> tuple[int, ...]:
    if isinstance(value, int) and not isinstance(value, bool):
        value = [value]
    if (
        not isinstance(value, list)
        or not value
        or not all(isinstance(v, int) and not isinstance(v, bool) and v >= minimum for v in value)
    ):
        raise ScenarioError(
            f"{where}: '{key}' must be a non-empty list of integers >= {minimum}, got {value!r}"
        )
    return tuple(value)


def check_keys(where: str, table: dict[str, Any], allowed: tuple[str, ...]) -> None:
    for key in table:
        if key not in allowed:
            raise ScenarioError(f"{where}: unknown key '{key}' (allowed: {', '.join(allowed)})")
