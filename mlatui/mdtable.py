"""Markdown table cells and tables shared by every printer (pure Python)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any


def fmt(v: Any, digits: int = 2) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.{digits}f}"
    return str(v)


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    lines = [
        "| " + " | ".join(headers) + " |",
        "|" + "|".join("---" if i == 0 else "---:" for i in range(len(headers))) + "|",
    ]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def check(row: dict) -> str:
    outcome = row.get("outcome") or ("valid" if row.get("valid") else "invalid")
    return "ok" if outcome == "valid" else outcome.upper()
