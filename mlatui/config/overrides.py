"""Quick-run overrides of a scenario's phases: reps, warmup, tokens, contexts, some phases only."""

from __future__ import annotations

from dataclasses import replace

from mlatui.config.scenario import Scenario, ScenarioError


def apply_overrides(scenario: Scenario, overrides: dict) -> Scenario:
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
        changes = {
            k: (tuple(v) if isinstance(v, list) else v)
            for k, v in overrides.items()
            if hasattr(p, k)
        }
        phases.append(replace(p, **changes))
    return replace(scenario, phases=tuple(phases))
