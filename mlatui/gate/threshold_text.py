"""How a gate threshold reads: the formula's `max_absorbed_queries` is `gate_policy.UNBOUNDED`
(sys.maxsize) for geometries where absorbing always wins (d = nope + v >= 2r), and recordings hold
that number as is. Shown, it says "always absorbed". Pure (no mlx): the dashboard uses it too."""

from __future__ import annotations

from mlatui.gate.policy import UNBOUNDED as ALWAYS_ABSORBED_AT

ALWAYS_ABSORBED = "always absorbed"


def threshold_text(value: object) -> str:
    if isinstance(value, int) and not isinstance(value, bool) and value >= ALWAYS_ABSORBED_AT:
        return ALWAYS_ABSORBED
    return str(value)
