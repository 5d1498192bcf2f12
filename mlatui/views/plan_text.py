"""`--plan`: the resolved plan of a run, printed without loading a model."""

from __future__ import annotations

import json

from mlatui.config.run_plan import RunPlan

DEFAULT_ARMS = (
    "by the installed code's state (pre-fix: installed,formula; fixed: pre-fix,installed)"
)


def _on_off(value: bool) -> str:
    return "on" if value else "off"


def plan_lines(plan: RunPlan) -> list[str]:
    """The plan in words: one setting a line, then one line per phase."""
    s = plan.scenario
    arms = plan.arms
    if arms.arms is not None:
        arms_said = arms.arms
    elif arms.threshold is not None:
        arms_said = f"{DEFAULT_ARMS}, the patched slot's gate {arms.threshold}"
    else:
        arms_said = DEFAULT_ARMS
    lines = [
        f"scenario  {s.name} ({s.path})",
        f"model     {plan.model or s.model.path or s.model.source}"
        + (" (random weights)" if plan.random_weights else ""),
        f"draft     {plan.draft_model or s.draft.source.value}",
        f"arms      {arms_said}"
        + (" (A/A: both arms the same, each in turn)" if plan.null else ""),
        f"indexer   {arms.indexer or 'patched'}",
    ]
    lines += [f"source    {slot}: {path}" for slot, path in arms.sources]
    budget = f"{plan.budget_s:.0f} s" if plan.budget_s > 0 else "none (the phases as written)"
    if plan.budget_s > 0 and plan.null:
        budget += ", not applied to an A/A"
    lines += [
        f"budget    {budget}",
        f"seed      {plan.seed} (scenario {s.seed} + --seed {plan.seed_offset})",
        f"fill      {plan.fill}",
        f"settle    {_on_off(plan.settle)}; arm threads: "
        + ("shared" if plan.shared_arm_thread else "one per arm"),
        f"phases    {len(plan.phases)}",
    ]
    for p in plan.phases:
        contexts = ",".join(str(c) for c in p.contexts)
        shape = (
            f"widths {','.join(str(w) for w in p.widths)}"
            if p.kind.rules.timed_widths
            else f"tokens {p.tokens}"
        )
        rounds = f"reps {p.reps}" + (f" (max {p.max_rounds})" if p.max_rounds else "")
        lines.append(f"  {p.name:<12} {p.kind:<7} contexts {contexts}  {shape}  {rounds}")
    return lines


def print_plan(plan: RunPlan, fmt: str = "md") -> int:
    """Print the plan (JSON for `--format json`); nothing loads. Returns the exit status 0."""
    if fmt == "json":
        print(json.dumps(plan.to_dict(), indent=2))
    else:
        print("\n".join(plan_lines(plan)))
    return 0
