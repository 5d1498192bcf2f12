"""What each arm slot ran, as the screen, the reports and the exports name it.

The slots are "stock" and "patched" in every event. What runs in them follows the runtime: on
pre-fix code the installed gate against mlatui's formula (the slot names say it), on code that
already carries the fix the pre-fix gate (a counterfactual) against the installed one, or any
pair the user chose. The header's `settings["arms"]` records each slot's gate and its words."""

from __future__ import annotations

from typing import Any

GATE_NAMES = {
    "stock": "pre-fix",
    "installed": "installed",
    "formula": "formula",
    "calibrated": "calibrated",
}
DEFAULT_PAIR = ("stock", "formula")  # pre-fix code's default: the slot names say it all


def _arms(settings: dict[str, Any] | None) -> dict[str, dict[str, str]]:
    arms = (settings or {}).get("arms")
    return arms if isinstance(arms, dict) else {}


def slot_name(settings: dict[str, Any] | None, slot: str) -> str:
    """A short name: the slot's own where the run is the classic stock vs patched (and in every
    recording made before arms were chosen), else the gate it ran ("pre-fix", "installed",
    "calibrated", "L≤8")."""
    arms = _arms(settings)
    gates = tuple(arms.get(s, {}).get("gate") for s in ("stock", "patched"))
    if not arms or gates == DEFAULT_PAIR or slot not in arms:
        return slot
    gate = arms[slot].get("gate", slot)
    return GATE_NAMES.get(gate, f"L≤{gate}" if gate.isdigit() else gate)


def slot_words(settings: dict[str, Any] | None, slot: str) -> str | None:
    """The slot's gate in words ("pre-fix (L == 1, counterfactual)"); None in old recordings."""
    label = _arms(settings).get(slot, {}).get("label")
    return label if isinstance(label, str) else None
