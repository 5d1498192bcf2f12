"""What a run is asked to do, as the flags said it: the shared request of `launch`, `bench
SCENARIO` and the child engine (it crosses the pipe as JSON). `config.run_plan.resolve_plan` merges
it with the scenario into the run's plan, the only place the engine reads a setting from."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class RunConfig:
    model: str | None = None  # local folder or hub id; None = the embedded default model
    draft_model: str | None = (
        None  # local folder or hub id; None = the scenario's / model's own draft
    )
    scenario: str | None = None  # TOML path; None = scenarios/default.toml
    record: str | None = None  # JSONL path; None = a new file under the user's data dir
    random_weights: bool = (
        False  # build the scenario's model from its config values, random weights
    )
    # the patched arm's MLA gate (formula | calibrated | stock | <int>, as
    # config.gate_settings.Threshold.parse reads it) and indexer pooling (patched | stock); None: the
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
    force: bool = (
        False  # run even when the memory estimate says it does not fit (mlatui.models.fit)
    )
    overrides: dict[str, Any] = field(
        default_factory=dict[str, Any]
    )  # e.g. {"reps": 3} for quick runs/tests

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> RunConfig:
        return cls(**json.loads(text))
