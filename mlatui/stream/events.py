"""The one interface between the engine and everything that shows or stores its results.

Events are frozen msgspec Structs of plain numbers, strings, tuples and dicts (never mx.array),
a union tagged by `type`, serialised one per JSONL line as {"type": <name>, ...fields} and
checked on read against the fields' own types (mlatui.stream.recording_schema). The first line of every stream
is a RunHeader. Times `t` are seconds since the run started (monotonic clock).
Nothing here imports mlx or textual.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, TypeVar

import msgspec

from mlatui.config.scenario import Phase, ScenarioRecord
from mlatui.stream.event_base import (
    ARMS,
    SCHEMA_VERSION,
    ArmName,
    Basis,
    Count,
    Event,
    Finite,
    Interval,
    Seconds,
    SpeedupBound,
    Width,
    arm_label,
    ratio_label,
)
from mlatui.stream.phase_rows import EstimateRow, PhaseRow, read_rows
from mlatui.stream.run_settings import BandwidthLimit, RunSettings, WorldRecord
from mlatui.stream.segments import Segment

R = TypeVar("R", bound=PhaseRow)

__all__ = [
    "ARMS",
    "SCHEMA_VERSION",
    "Basis",
    "DecodeBlock",
    "DecodeResult",
    "Event",
    "BandwidthLimit",
    "Interval",
    "RunSettings",
    "SpeedupBound",
    "arm_label",
    "ratio_label",
]


class DeviceInfo(msgspec.Struct, frozen=True, kw_only=True):
    """The machine that ran (mlatui.measure.records.environment): `bandwidth` is its kept
    memory-bandwidth limit (mlatui.store), None when none was measured."""

    name: str = "?"
    architecture: str = ""
    backend: str = "?"  # cpu | cuda | metal
    memory_bytes: Count | None = None
    blas: str = "?"
    blas_threading: str = ""
    cpu_count: Count | None = None
    bandwidth: BandwidthLimit | None = None


class Thresholds(msgspec.Struct, frozen=True, kw_only=True):
    """The gate's L* for the run's MLA geometry: the formula's as T grows (`formula_inf`,
    mlatui.gate.policy.UNBOUNDED where absorbing always wins) and at each context T
    (`formula_at`), this device's calibrated crossovers where stored, and the policy the patched
    slot runs. Every field at its default: the model has no MLA geometry."""

    policy: str = ""
    formula_inf: int | None = None
    formula_at: dict[int, int] = msgspec.field(default_factory=dict)
    calibrated: dict[int, int] | None = None

    def gate_table(self) -> dict[int, int]:
        """{context: max absorbed width} the patched gate uses: calibrated when that is the
        policy."""
        table = self.calibrated if self.policy == "calibrated" else None
        return dict(table or self.formula_at)


class RunHeader(Event, frozen=True, tag="header"):
    """Self-describing first record: what machine, versions and settings produced the run."""

    schema_version: Annotated[int, msgspec.Meta(ge=1)]
    mlatui_version: str
    mlx_version: str
    mlx_lm_version: str
    python_version: str
    platform: str
    device: DeviceInfo
    model: str  # path, hub id or "embedded"/"random:<family>"
    model_type: str
    geometry: dict[str, Count]  # kv_lora_rank, qk_nope_head_dim, v_head_dim, num_heads, num_layers
    thresholds: Thresholds
    scenario: ScenarioRecord
    draft: str  # "draft-model:<path>", "mtp", "none"
    synthetic_acceptance: bool  # random weights: acceptance numbers mean nothing
    started_at: str  # ISO-8601 wall clock
    settings: RunSettings = msgspec.field(default_factory=RunSettings)
    distributed: WorldRecord = msgspec.field(default_factory=WorldRecord)
    # every pass's phases as planned before the first starts (a budget may plan again)
    phase_plans: tuple[PhasePlan, ...] = ()


class PhasePlan(msgspec.Struct, frozen=True):
    """A phase as the engine will run it: its name, kind and segments (planned by
    mlatui.measure.plans, in the order they run), as its PhaseStart will say them."""

    phase: str
    kind: str
    plan: tuple[Segment, ...] = ()


class PhaseStart(Event, frozen=True, tag="phase_start"):
    t: Seconds
    phase: str
    kind: str  # sweep | decode | tune | indexer
    index: int
    total_phases: int
    planned_steps: int
    contexts: tuple[int, ...] = ()
    plan: tuple[Segment, ...] = ()  # the segments it runs, in order


class BudgetPlanned(Event, frozen=True, tag="budget_planned"):
    """The scenario fitted to its time budget (mlatui.run.budget) from a probe of this device, before
    the first phase: the forecasts, what was scaled down, and the phases that will run; again at
    a phase boundary where the phases left, at the pace so far, would end past the budget."""

    t: Seconds
    budget_s: Finite
    full_s: Finite  # forecast of the phases as written
    predicted_s: Finite  # forecast of the phases chosen
    changes: tuple[str, ...]
    phases: tuple[Phase, ...]  # each phase that runs
    probe_contexts: tuple[int, ...]
    probe_s: Finite  # what the probe itself took
    # the probe's first use of each shape, run untimed: a one-off cost (kernel compilation on a
    # GPU) that the forecast leaves out
    first_use_s: Finite = 0.0
    contexts_note: str = ""  # which contexts the plan picked for this device, and why
    phase_plans: tuple[PhasePlan, ...] = ()  # the phases that run, as planned again


class BudgetOutcome(Event, frozen=True, tag="budget_outcome"):
    """A budgeted run's end: how its first plan's forecast compared with what its phases took
    (the time spent on what was left undecided, which no plan forecast, counted apart)."""

    t: Seconds
    budget_s: Finite
    forecast_s: Finite  # the probe's forecast of the run as planned (probe included)
    planned_s: Finite  # what the run took less `extra_s`: what that forecast forecast
    extra_s: Finite  # spent on undecided L = 1 checks and rounds added for the time left
    took_s: Finite  # the whole run so far
    # (forecast_s - planned_s) / (planned_s - plan_t), in %: the phases' forecast against what
    # they took, the time before the plan (load, probe and its compilation) left out
    error_pct: Finite
    first_use_s: Finite = 0.0  # the probe's first use of each shape (not forecast)
    undecided: tuple[str, ...] = ()  # "phase @ context" of each L = 1 check still undecided
    plan_t: Finite = 0.0  # run seconds when the first plan was made


class LoadKind(StrEnum):
    CHECKPOINT = "checkpoint"
    RANDOM = "random"


class LoadStart(Event, frozen=True, tag="load_start"):
    """Sent before any weight is read or built (and before the header, which needs the loaded
    model; the recorder writes it after the header). `kind`: checkpoint | random. `files` and
    `total_bytes` are the safetensors on disk (0 when unknown, e.g. a hub id not yet fetched);
    `params` the parameter count of a random build."""

    t: Seconds
    what: str  # "model" | "draft model"
    source: str  # path, hub id, "embedded" or "random:<family>"
    kind: str  # a LoadKind's value
    files: int = 0
    total_bytes: int = 0
    params: int = 0
    file_bytes: tuple[int, ...] = ()

    @property
    def random_build(self) -> bool:
        return LoadKind(self.kind) is LoadKind.RANDOM


class LoadProgress(Event, frozen=True, tag="load_progress"):
    """Bytes read so far; an estimate (`measure` says from what) when the loader is one call.
    `done` on the last one of a load."""

    t: Seconds
    what: str
    bytes_read: int
    files_read: int
    measure: str = ""  # process read bytes | mlx active memory | exact
    done: bool = False


class Progress(Event, frozen=True, tag="progress"):
    t: Seconds
    phase: str
    done: int
    total: int
    eta_s: Finite | None


class Step(Event, frozen=True, tag="step"):
    """One timed forward of `width` new tokens on a cache of `context` tokens. `rep` is the
    sampler's round (every width and arm is measured in every round, A B B A)."""

    t: Seconds
    phase: str
    arm: ArmName
    context: Count
    width: Width
    rep: int
    ms: Finite
    absorbed_calls: int = 0
    materialised_calls: int = 0


class MemorySample(Event, frozen=True, tag="memory"):
    t: Seconds
    mlx_active_bytes: int
    mlx_cache_bytes: int
    mlx_peak_bytes: int
    device_limit_bytes: int | None
    process_rss_bytes: int
    system_available_bytes: int
    system_total_bytes: int
    swap_used_bytes: int
    # macOS: the process's physical footprint (task_info's phys_footprint: what Activity
    # Monitor shows, GPU allocations included, which RSS leaves out); None elsewhere
    process_footprint_bytes: int | None = None


class Validity(Event, frozen=True, tag="validity"):
    """The L = 1 check: both arms take the same branch at L = 1, so their paired ratio must be 1
    within the tolerance. `outcome` is valid (95% CI inside), invalid (wholly outside) or
    inconclusive (straddles a bound after the most rounds allowed); only valid counts.
    `stock_l1_ms`/`patched_l1_ms` are per-arm medians over rounds, `diff_pct` the signed paired
    difference (ratio - 1) in %."""

    t: Seconds
    phase: str
    context: int
    stock_l1_ms: Finite
    patched_l1_ms: Finite
    diff_pct: Finite
    tolerance_pct: Finite
    valid: bool
    outcome: str  # valid | invalid | inconclusive
    ratio: Interval | None = None  # paired stock/patched at L = 1, median over quads, 95% CI
    rounds: int = 0
    # pooled: inconclusive on its own quads (the ratio above, CI containing 1.00), made valid by
    # the PooledValidity just before it; it replaces the context's own Validity
    basis: Basis = Basis.OWN

    @property
    def verdict(self) -> str:
        return self.outcome

    @property
    def pooled(self) -> bool:
        return self.basis is Basis.POOLED


class PooledValidity(Event, frozen=True, tag="pooled_validity"):
    """The L = 1 check over every context's L = 1 quads so far (mlatui.measure.estimates), made
    when a phase's contexts are all measured. `decided`: the phase's inconclusive contexts it
    made valid (own CI containing 1.00); `undecided`: those it left inconclusive."""

    t: Seconds
    phase: str
    contexts: tuple[int, ...]  # every context whose L = 1 quads are in it
    rounds: int  # summed over the contexts
    quads: int
    ratio: Interval  # paired stock/patched at L = 1, with its 95% CI
    tolerance_pct: Finite
    outcome: str  # valid | invalid | inconclusive
    estimator: str
    ci_method: str
    decided: tuple[int, ...] = ()
    undecided: tuple[int, ...] = ()

    @property
    def valid(self) -> bool:
        return self.outcome == "valid"


class Estimate(Event, frozen=True, tag="estimate"):
    """A context's paired estimates after `rounds` rounds (`final` after the last). Each row
    (EstimateRow: step_ms | ratio | marginal_ms | vs_l1 | gb_s | mbu | mbu_most of an arm at a
    width) is a median over rounds with its 95% bootstrap CI; `estimators` names in words how
    each quantity was made, and the CI (`ci`). `step_bytes`, per width: the bytes a whole-model step must read
    (mlatui.measure.bandwidth.StepBytes.to_dict); gb_s and mbu rows are over its fewest bytes,
    mbu_most over its most (routing is not recorded), against the header's measured limit."""

    t: Seconds
    phase: str
    context: int
    rounds: int
    final: bool
    outcome: str  # the L = 1 check so far ("" without a control width)
    rows: tuple[EstimateRow, ...]
    drifting_rounds: int = 0
    estimators: dict[str, str] = msgspec.field(default_factory=dict)
    step_bytes: dict[str, dict[str, int]] = msgspec.field(default_factory=dict)


class DriftEvent(Event, frozen=True, tag="drift"):
    """The L = 1 level (both arms) stepped by more than 10% between two rounds of a context."""

    t: Seconds
    phase: str
    context: int
    round: int
    before_ms: Finite
    after_ms: Finite
    change_pct: Finite


# ---- the decode and tune phases: blocks through mlx-lm's runtime, and each (context, arm, draft
# kind, depth) result with its guards and bound


class DecodeBlock(Event, frozen=True, tag="decode_block"):
    """One arm decoding `tokens` tokens at one setting without interruption (depth 0 = plain
    decode through mlx-lm's generate_step; depth k through speculative_generate_step or the MTP
    loop). `accepted` lists each verify step's accepted drafts; `drafted` its drafted count."""

    t: Seconds
    phase: str
    arm: str
    context: int
    depth: int
    round: int
    tokens: int
    ms: Finite
    drafted: tuple[int, ...] = ()
    accepted: tuple[int, ...] = ()
    emitted: tuple[int, ...] = ()
    token_ids: tuple[int, ...] = ()  # the block's tokens: divergence and seeds can be checked
    acceptance_rule: str = ""  # exact-match | rejection-sampling (runtime.AcceptanceRule)
    temperature: Finite = 0.0
    draft_kind: str = ""  # "mtp" | "draft-model" | "synthetic"; "" for plain decode


class DecodeResult(Event, frozen=True, tag="decode_result"):
    """Throughput of one arm at one setting (depth 0 = plain decode), measured in this run.
    tok/s and the speedup over plain decode are medians over rounds with 95% CIs (the speedup is
    paired within rounds). Acceptance: `acceptance_conditional` P(accept i | 1..i-1 accepted),
    `acceptance_by_position` the unconditional share per position, `mean_accepted` accepted
    drafts per verify step; `counts` the raw per-position counts (mlatui.measure.acceptance).
    `measured` False: the setting was rejected by its `bound` before any of its blocks ran, so
    there is no tok/s or speedup (`tok_s`, `vs_plain` None) and `bound.value` is the most it
    could have gained."""

    t: Seconds
    phase: str
    arm: ArmName
    context: int
    depth: int
    tokens: int
    seconds: Finite
    tok_s: Interval | None  # None: not measured (rejected by bound)
    acceptance_by_position: tuple[Finite | None, ...] = ()
    verify_ms_median: Finite | None = None
    draft_ms_median: Finite | None = None
    vs_plain: Interval | None = None  # None: not measured; the bound's upper end is bound.value
    acceptance_conditional: tuple[Finite | None, ...] = ()
    mean_accepted: Finite | None = None
    counts: dict[str, Any] = msgspec.field(default_factory=dict)
    acceptance_rule: str = ""
    sampling: dict[str, Any] = msgspec.field(default_factory=dict)
    warnings: tuple[str, ...] = ()
    rounds: int = 0
    block_tokens: int = 0
    runtime: str = ""  # what decoded: "mlx_lm.generate_step", "mlx_lm.speculative_generate_step", "mlatui MTP loop"
    draft_kind: str = ""  # "mtp" | "draft-model" | "synthetic"; "" for plain decode
    # distinct 4-grams / 4-grams of the emitted tokens, within each timed block (pooled) and
    # across the blocks together, each different text once (mlatui.measure.acceptance.
    # Repetition); None: not recorded
    distinct_4gram_share: Finite | None = None
    distinct_4gram_share_across: Finite | None = None
    measured: bool = True  # False: rejected by bound, its blocks never ran
    bound: SpeedupBound | None = None  # every speculative setting's, measured or not

    @property
    def rejected_by_bound(self) -> bool:
        return not self.measured and self.bound is not None and self.bound.rejects


class PhaseSummary(Event, frozen=True, tag="phase_summary"):
    """Medians and spreads for a phase: `rows` are its kind's rows (mlatui.stream.phase_rows:
    ROW_TYPES), written as flat records of plain values."""

    t: Seconds
    phase: str
    kind: str
    rows: tuple[PhaseRow, ...]
    verdict: str = ""

    def __post_init__(self) -> None:
        msgspec.structs.force_setattr(self, "rows", read_rows(self.kind, self.rows))

    def rows_of(self, row_type: type[R]) -> tuple[R, ...]:
        """The rows, as the Struct its kind writes (none for another kind's type)."""
        return tuple(r for r in self.rows if isinstance(r, row_type))


class LogMessage(Event, frozen=True, tag="log"):
    t: Seconds
    level: str  # info | warning
    message: str


class ErrorEvent(Event, frozen=True, tag="error"):
    t: Seconds
    message: str
    where: str = ""
    refused: bool = False  # refused before loading (bad input or does not fit): exit status 2


class RunEnd(Event, frozen=True, tag="run_end"):
    t: Seconds
    status: str  # completed | interrupted | error
    invalid_contexts: tuple[int, ...] = ()


EVENT_TYPES: dict[str, type[Event]] = {
    str(cls.__struct_config__.tag): cls
    for cls in (
        RunHeader,
        BudgetPlanned,
        BudgetOutcome,
        LoadStart,
        LoadProgress,
        PhaseStart,
        Progress,
        Step,
        DecodeBlock,
        DecodeResult,
        MemorySample,
        Validity,
        PooledValidity,
        Estimate,
        DriftEvent,
        PhaseSummary,
        LogMessage,
        ErrorEvent,
        RunEnd,
    )
}
