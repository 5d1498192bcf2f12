"""What a run is asked to do and the plan it runs.

`RunConfig` is the request as the flags said it: the shared request of `launch`, `bench SCENARIO`
and the child engine (it crosses the pipe as JSON). `resolve_plan` merges it with the scenario
(after its quick-run overrides, `apply_overrides`) into the run's plan, `RunPlan`: the flags and
the scenario's own settings merged once, before anything loads. The engine reads every setting
from it; `bench --plan` prints it; the header records it. A budget's re-plan is a new plan value
(`with_phases`), never a change to this one."""

from __future__ import annotations

import base64
import json
import pickle
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import msgspec
from msgspec import structs

from mlatui.config.checks import ScenarioError, validation_error
from mlatui.config.phase_kind import Pass, run_passes
from mlatui.config.scenario import Phase, Scenario, load_scenario

DEFAULT_FILL = "prefill"
# a quick run's overrides of every phase (`apply_overrides`): counts, or lists of contexts,
# widths or phase names
OverrideValue = int | float | list[int | str]


@dataclass
class RunConfig:
    model: str | None = None  # local folder or hub id; None = the embedded default model
    # local folder or hub id; None = the scenario's / model's own draft
    draft_model: str | None = None
    scenario: str | None = None  # TOML path; None = scenarios/default.toml
    record: str | None = None  # JSONL path; None = a new file under the user's data dir
    # build the scenario's model from its config values, random weights
    random_weights: bool = False
    # the patched arm's MLA gate (formula | calibrated | stock | <int>, as
    # config.arm_settings.Threshold.parse reads it) and indexer pooling (patched | stock); None: the
    # scenario's, else formula / patched
    threshold: str | None = None
    indexer: str | None = None
    # "A,B": the stock slot's and the patched slot's gate (installed | pre-fix | formula |
    # calibrated | <int>); None: the scenario's [arms], else chosen by the runtime's state
    arms: str | None = None
    # slot ("stock" | "patched") -> a source tree whose model code that arm runs (--arm-source)
    arm_sources: dict[str, str] = field(default_factory=dict[str, str])
    null: bool = False  # A/A: both arms identical (both stock, then both patched)
    fill: str | None = None  # None: the scenario's; "random-latents": timing-only cache fill
    seed: int = 0
    # Both arms on one worker thread (one MLX stream) by default: with a thread per arm, the
    # H200 A/A showed a run-dependent 3-5% L = 1 offset between the slots (docs/method.md).
    shared_arm_thread: bool = True
    settle: bool = True  # the sampler's untimed settle steps before each quad (off: diagnostic)
    # seconds the run may take (mlatui.run.budget): None = the scenario's budget_s; 0 = no budget
    budget_s: float | None = None
    # run even when the memory estimate says it does not fit (mlatui.models.fit)
    force: bool = False
    # quick runs and tests: e.g. {"reps": 3} (`apply_overrides`)
    overrides: dict[str, Any] = field(default_factory=dict[str, Any])

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> RunConfig:
        return cls(**json.loads(text))


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
    for i, p in enumerate(scenario.phases):
        if only and p.name not in only:
            continue
        changes: dict[str, Any] = {
            k: (tuple(v) if isinstance(v, list) else v)
            for k, v in overrides.items()
            if hasattr(p, k)
        }
        phases.append(_checked(scenario.path, f"phase[{i}]", structs.replace(p, **changes)))
    return structs.replace(scenario, phases=tuple(phases))


def _checked(where: str, at: str, phase: Phase) -> Phase:
    """A phase the overrides changed, held to the schema its recording is read back with."""
    raw = msgspec.json.decode(msgspec.json.encode(phase))
    try:
        msgspec.convert(raw, Phase)
    except msgspec.ValidationError as e:
        raise validation_error(f"{where} (overridden)", Phase, raw, e, at) from None
    return phase


class ArmsPlan(msgspec.Struct, frozen=True):
    """What the two arm slots run, as asked. The gates themselves are decided once the model is
    loaded (run.arms.resolve_gates): the default pair follows the installed code's state."""

    arms: str | None  # "A,B" (the flag's, else the scenario's); None: by the runtime's state
    threshold: str | None  # the patched slot's gate when `arms` is None; None: formula
    # the patched slot's indexer pooling; None: patched (a patch review: stock, so that
    # mlatui's own sparse layers, not the tree's, pool alike in both arms)
    indexer: str | None
    # slot -> source tree, the flag's over the file's (by slot name)
    sources: dict[str, str] = msgspec.field(default_factory=dict)

    @property
    def review(self) -> bool:
        """A patch review: an arm runs another source tree's model code."""
        return bool(self.sources)


class ScenarioName(msgspec.Struct, frozen=True):
    name: str
    path: str


class PlanRecord(msgspec.Struct, frozen=True, kw_only=True):
    """The plan as the header keeps it (`settings.plan`) and `bench --plan --format json` prints
    it (RunPlan.recorded): its settings, the scenario by name and the phases as they run."""

    scenario: ScenarioName
    model: str | None
    draft_model: str | None
    random_weights: bool
    arms: ArmsPlan
    null: bool
    fill: str
    budget_s: float
    seed: int
    seed_offset: int
    settle: bool
    arm_threads: str  # shared | one per arm
    force: bool
    overrides: dict[str, OverrideValue]
    phases: tuple[Phase, ...]


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

    @property
    def arm_threads(self) -> str:
        return "shared" if self.shared_arm_thread else "one per arm"

    def recorded(self) -> PlanRecord:
        """The plan as the header keeps it and `bench --plan --format json` prints it."""
        return PlanRecord(
            scenario=ScenarioName(self.scenario.name, self.scenario.path),
            model=self.model,
            draft_model=self.draft_model,
            random_weights=self.random_weights,
            arms=self.arms,
            null=self.null,
            fill=self.fill,
            budget_s=self.budget_s,
            seed=self.seed,
            seed_offset=self.seed_offset,
            settle=self.settle,
            arm_threads=self.arm_threads,
            force=self.force,
            overrides={k: list(v) if isinstance(v, tuple) else v for k, v in self.overrides},
            phases=self.phases,
        )


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
        dict(sorted(sources.items())),
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
