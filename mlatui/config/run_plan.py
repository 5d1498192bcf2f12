"""The plan of a run: the scenario, the flags and the scenario's own settings merged once, before
anything loads. The engine reads every setting from it; `bench --plan` prints it; the header
records it. A budget's re-plan is a new plan value (`with_phases`), never a change to this one."""

from __future__ import annotations

import base64
import pickle
from dataclasses import dataclass, replace
from typing import Any

from msgspec import structs

from mlatui.config.checks import ScenarioError
from mlatui.config.overrides import apply_overrides
from mlatui.config.phase_kind import Pass, run_passes
from mlatui.config.runconfig import RunConfig
from mlatui.config.scenario import Phase, Scenario, load_scenario

DEFAULT_FILL = "prefill"


@dataclass(frozen=True)
class ArmsPlan:
    """What the two arm slots run, as asked. The gates themselves are decided once the model is
    loaded (run.arm_plan.resolve_gates): the default pair follows the installed code's state."""

    arms: str | None  # "A,B" (the flag's, else the scenario's); None: by the runtime's state
    threshold: str | None  # the patched slot's gate when `arms` is None; None: formula
    # the patched slot's indexer pooling; None: patched (a patch review: stock, so that
    # mlatui's own sparse layers, not the tree's, pool alike in both arms)
    indexer: str | None
    sources: tuple[tuple[str, str], ...] = ()  # (slot, source tree), the flag's over the file's

    @property
    def review(self) -> bool:
        """A patch review: an arm runs another source tree's model code."""
        return bool(self.sources)

    def to_dict(self) -> dict[str, Any]:
        return {
            "arms": self.arms,
            "threshold": self.threshold,
            "indexer": self.indexer,
            "sources": dict(self.sources),
        }


@dataclass(frozen=True)
class RunPlan:
    """Every setting of a run, resolved: each is read from here and nowhere else."""

    scenario: Scenario  # as parsed, its phases after the flags' overrides
    model: str | None  # local folder or hub id; None: the scenario's model
    draft_model: str | None
    random_weights: bool
    arms: ArmsPlan
    null: bool  # A/A: both arms the same (both stock, then both patched)
    fill: str  # prefill | random-latents
    budget_s: float  # 0: the phases as written
    seed: int  # the run's one seed: the scenario's plus --seed
    seed_offset: int  # --seed as given
    settle: bool
    shared_arm_thread: bool
    force: bool
    record: str | None
    overrides: tuple[tuple[str, Any], ...] = ()  # the quick-run overrides as asked (sorted)

    @property
    def phases(self) -> tuple[Phase, ...]:
        return self.scenario.phases

    @property
    def passes(self) -> tuple[Pass, ...]:
        """A/B, or A/A stock then A/A patched: the run's passes over its phases, in order."""
        return run_passes(self.null)

    @property
    def budgeted(self) -> bool:
        """A budget applies: an A/A run keeps its phases as written (the same plan both passes)."""
        return self.budget_s > 0 and not self.null

    def to_wire(self) -> str:
        """The plan as one line of text, for `launch --isolate`'s child (the same value there:
        nothing is read or resolved again)."""
        return base64.b64encode(pickle.dumps(self)).decode("ascii")

    @staticmethod
    def from_wire(text: str) -> RunPlan:
        """The plan `to_wire` wrote (a child reads only what its own parent process wrote)."""
        plan = pickle.loads(base64.b64decode(text))  # noqa: S301 - our parent's own value
        if not isinstance(plan, RunPlan):
            raise TypeError(f"not a run plan: {type(plan).__name__}")
        return plan

    def with_phases(self, phases: tuple[Phase, ...]) -> RunPlan:
        """A new plan with these phases (a budget's re-plan); this one stays as it was."""
        return replace(self, scenario=structs.replace(self.scenario, phases=tuple(phases)))

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON values: the header's `settings.plan` and `bench --plan --format json`."""
        return {
            "scenario": {"name": self.scenario.name, "path": self.scenario.path},
            "model": self.model,
            "draft_model": self.draft_model,
            "random_weights": self.random_weights,
            "arms": self.arms.to_dict(),
            "null": self.null,
            "fill": self.fill,
            "budget_s": self.budget_s,
            "seed": self.seed,
            "seed_offset": self.seed_offset,
            "settle": self.settle,
            "arm_threads": "shared" if self.shared_arm_thread else "one per arm",
            "force": self.force,
            "overrides": {k: list(v) if isinstance(v, tuple) else v for k, v in self.overrides},
            "phases": [p.to_dict() for p in self.phases],
        }


def _frozen(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


def resolve_plan(config: RunConfig, scenario: Scenario | None = None) -> RunPlan:
    """The plan of `config`: its scenario (read here unless a command already read it), the
    phases after the overrides (an unknown `only_phases` name is refused here, once), and every
    flag over the scenario's value. Pure: no model, no mlx; the same inputs give an equal plan."""
    if scenario is None:
        scenario = load_scenario(config.scenario)
    phased = apply_overrides(scenario, config.overrides)
    if not phased.phases:
        raise ScenarioError(f"{scenario.path}: no phase left to run")
    sources = {**dict(scenario.arm_sources), **config.arm_sources}
    arms = ArmsPlan(
        config.arms or scenario.arms,
        config.threshold or scenario.threshold,
        config.indexer or scenario.indexer or ("stock" if sources else None),
        tuple(sorted(sources.items())),
    )
    return RunPlan(
        scenario=phased,
        model=config.model,
        draft_model=config.draft_model,
        random_weights=config.random_weights,
        arms=arms,
        null=config.null or scenario.null,
        fill=config.fill or scenario.model.fill or DEFAULT_FILL,
        budget_s=float(scenario.budget_s if config.budget_s is None else config.budget_s),
        seed=scenario.run_seed(config.seed),
        seed_offset=config.seed,
        settle=config.settle,
        shared_arm_thread=config.shared_arm_thread,
        force=config.force,
        record=config.record,
        overrides=tuple(sorted((k, _frozen(v)) for k, v in config.overrides.items())),
    )
