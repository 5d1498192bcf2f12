"""Quick-run overrides of a scenario's phases: reps, warmup, tokens, contexts, some phases only."""

from __future__ import annotations

from typing import Any

from msgspec.structs import replace

from mlatui.config.checks import ScenarioError
from mlatui.config.scenario import Scenario


def apply_overrides(scenario: Scenario, overrides: dict[str, Any]) -> Scenario:
    """Quick runs: override reps/warmup/tokens/contexts of every phase (tests, --quick)."""
    if not overrides:
        return scenario
    phases = []
    only = overrides.get("only_phases")
    if only:
        unknown = set(only) - {p.name for p in scenario.phases}
        if unknown:
            raise ScenarioError(
                f"{scenario.path}: no phase named {', '.join(sorted(unknown))} (phases: {', '.join(p.name for p in scenario.phases)})"
            )
    for p in scenario.phases:
        if only and p.name not in only:
            continue
        changes: dict[str, Any] = {
            k: (tuple(v) if isinstance(v, list) else v)
            for k, v in overrides.items()
            if hasattr(p, k)
        }
        phases.append(replace(p, **changes))
    return replace(scenario, phases=tuple(phases))
