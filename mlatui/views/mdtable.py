"""Every printer's text forms: markdown cells and tables, CSV and JSON lines (pure Python)."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal


def fmt(v: Any, digits: int = 2) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.{digits}f}"
    return str(v)


def num(v: Any) -> str:
    """A measured number as a bench table shows it: 3 significant figures below 10, else 1 decimal."""
    if isinstance(v, float):
        return f"{v:.3g}" if abs(v) < 10 else f"{v:.1f}"
    return str(v)


def table(
    headers: Sequence[str], rows: Iterable[Sequence[Any]], cell: Callable[[Any], str] = str
) -> str:
    """A markdown table: the first column left-aligned (a label), the others right-aligned."""
    lines = [
        "| " + " | ".join(headers) + " |",
        "|" + "|".join("---" if i == 0 else "---:" for i in range(len(headers))) + "|",
    ]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def csv_text(
    fields: Sequence[str],
    rows: Iterable[Mapping[str, Any]],
    extras: Literal["ignore", "raise"] = "ignore",
) -> str:
    """CSV with a header line; keys not in `fields` are dropped ("ignore") or refused ("raise")."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=fields, extrasaction=extras, lineterminator="\n", restval="")
    w.writeheader()
    w.writerows(rows)
    return buf.getvalue()


def jsonl(rows: Iterable[Mapping[str, Any]]) -> str:
    """One compact JSON object a line."""
    return "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in rows)


def env_line(env: Mapping[str, Any]) -> str:
    """The machine and versions of a record's `env` (measure.records.environment), in one line."""
    return (
        f"{env.get('device_name')} ({env.get('backend')}, blas: {env.get('blas')}), "
        f"mlx {env.get('mlx')}, mlx-lm {env.get('mlx_lm')}, mlatui {env.get('mlatui')}, "
        f"python {env.get('python')}"
    )
