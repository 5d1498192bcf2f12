"""Reading recordings of schema < 7, whose intervals were flat fields (`ratio`, `ratio_low`,
`ratio_high`; `tok_s`, `tok_s_low`, ...): each line is rewritten into today's nested Interval
before it is decoded, so every reader sees one shape. Nothing here imports mlx or textual.
"""

from __future__ import annotations

from typing import Any

# event type -> (field, the count its interval is over)
FLAT_INTERVALS: dict[str, tuple[tuple[str, str], ...]] = {
    "validity": (("ratio", "rounds"),),  # older recordings kept rounds, not quads
    "pooled_validity": (("ratio", "quads"),),
    "decode_result": (("tok_s", "rounds"), ("vs_plain", "rounds")),
}


def is_flat(kind: str, line: dict[str, Any]) -> bool:
    """The line is of a type whose intervals were flat, and carries one flat."""
    return any(
        f"{name}_low" in line or f"{name}_high" in line or _is_number(line.get(name))
        for name, _ in FLAT_INTERVALS.get(kind, ())
    )


def nest_intervals(kind: str, line: dict[str, Any]) -> dict[str, Any]:
    """A copy of an older line with each flat interval nested. A median recorded without its
    interval (schema 1) becomes an interval of n = 0 (`Interval.known` False); a speedup's upper
    end recorded without a median (a setting rejected by bound) is dropped: it is the bound's."""
    out = dict(line)
    for name, count in FLAT_INTERVALS.get(kind, ()):
        median = out.get(name)
        low, high = out.pop(f"{name}_low", None), out.pop(f"{name}_high", None)
        if not _is_number(median):
            continue
        if _is_number(low) and _is_number(high):
            n = out.get(count)
            out[name] = {
                "median": median,
                "low": low,
                "high": high,
                "n": max(n, 1) if isinstance(n, int) and not isinstance(n, bool) else 1,
            }
        else:
            out[name] = {"median": median, "low": median, "high": median, "n": 0}
    return out


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
