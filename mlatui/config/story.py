"""A scenario's `[story]`: what its run is to show, so that a budgeted run can pick the contexts
that show it on the device at hand (mlatui.run.budget_story).

The story of the default scenario: the stock arm's verify step (L = 2) costs a clear multiple of
its plain step (L = 1), because it re-expands the whole cache, while the patched arm's stays flat.
Where that happens depends on the device: on a slow CPU from 1-2K tokens, on a GPU, whose plain
step is mostly fixed cost, only from 16-32K. The phases as written are what runs without a budget.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mlatui.config.checks import ScenarioError, check_keys, int_list

STORY_KEYS = ("contexts", "stock_verify_multiple", "patched_verify_flat", "sweep_contexts")


@dataclass(frozen=True)
class Story:
    contexts: tuple[int, ...]  # the contexts a plan may pick from, ascending
    stock_verify_multiple: float = 4.0  # the stock arm's L = 2 step / its L = 1 step, at least
    patched_verify_flat: float = 1.5  # the patched arm's L = 2 step / its L = 1 step, at most
    sweep_contexts: int = 4  # how many contexts the sweep shows the growth at

    def to_dict(self) -> dict[str, Any]:
        return {
            "contexts": list(self.contexts),
            "stock_verify_multiple": self.stock_verify_multiple,
            "patched_verify_flat": self.patched_verify_flat,
            "sweep_contexts": self.sweep_contexts,
        }


def _ratio(where: str, key: str, value: Any, default: float) -> float:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 1 <= value < 1e6:
        raise ScenarioError(f"{where}: '{key}' must be a ratio >= 1 (a step's cost), got {value!r}")
    return float(value)


def parse_story(where: str, raw: Any) -> Story | None:
    """The `[story]` table, or None when the scenario has none."""
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise ScenarioError(f"{where}: must be a table (keys {', '.join(STORY_KEYS)}), got {raw!r}")
    check_keys(where, raw, STORY_KEYS)
    if "contexts" not in raw:
        raise ScenarioError(f"{where}: needs 'contexts', the contexts a plan may pick from")
    contexts = tuple(sorted(set(int_list(where, "contexts", raw["contexts"], 16))))
    n = raw.get("sweep_contexts", 4)
    if isinstance(n, bool) or not isinstance(n, int) or n < 2:
        raise ScenarioError(
            f"{where}: 'sweep_contexts' must be an integer >= 2 (two show growth), got {n!r}"
        )
    return Story(
        contexts,
        _ratio(where, "stock_verify_multiple", raw.get("stock_verify_multiple"), 4.0),
        _ratio(where, "patched_verify_flat", raw.get("patched_verify_flat"), 1.5),
        n,
    )
