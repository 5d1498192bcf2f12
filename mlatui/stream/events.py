"""The one interface between the engine and everything that shows or stores its results.

Events are frozen dataclasses of plain numbers, strings, tuples and dicts (never mx.array),
serialised one per JSONL line as {"type": <name>, ...fields}. The first line of every stream
is a RunHeader. Times `t` are seconds since the run started (monotonic clock).
Nothing here imports mlx or textual.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, ClassVar

SCHEMA_VERSION = 6  # 2: sampler rounds, paired estimates with CIs, three-outcome L = 1 check, drift
# 3: decode through mlx-lm's runtime in blocks (DecodeBlock), three acceptance forms, guards
# 4: several draft kinds in one run: DecodeBlock/DecodeResult.draft_kind
# 5: the L = 1 check pooled over the run's contexts: PooledValidity, Validity.basis
# (5, no bump: DecodeResult.distinct_4gram_share[_across], optional with a default: a reader of
# an older schema ignores them, and None says "not recorded")
# 6: settings rejected by bound (DecodeResult.measured, .bound): tok_s is None when not measured,
# which a reader of schema 5 would refuse
ARMS = ("stock", "patched")


class Basis(StrEnum):
    """What decided a context's L = 1 check: its own quads, or the check pooled over every
    context of the run (`PooledValidity`), which can only make an inconclusive context valid."""

    OWN = "own"
    POOLED = "pooled"


@dataclass(frozen=True)
class Event:
    type: ClassVar[str] = "event"

    def to_dict(self) -> dict[str, Any]:
        d = {"type": self.type}
        d.update(dataclasses.asdict(self))
        return d

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), separators=(",", ":"), allow_nan=False, default=_jsonable)


def _jsonable(value: Any) -> Any:
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    raise TypeError(f"not JSON-serialisable in an event: {type(value).__name__}")


@dataclass(frozen=True)
class RunHeader(Event):
    """Self-describing first record: what machine, versions and settings produced the run."""

    type: ClassVar[str] = "header"
    schema_version: int
    mlatui_version: str
    mlx_version: str
    mlx_lm_version: str
    python_version: str
    platform: str
    device: dict[str, Any]  # name, architecture, memory_bytes, blas, backend
    model: str  # path, hub id or "embedded"/"random:<family>"
    model_type: str
    geometry: dict[str, Any]  # kv_lora_rank, qk_nope_head_dim, v_head_dim, num_heads, num_layers
    thresholds: dict[str, Any]  # formula_inf, formula_at {T: L}, calibrated {T: L} or None, policy
    scenario: dict[str, Any]  # name, path, phases [{name, kind, ...}]
    draft: str  # "draft-model:<path>", "mtp", "none"
    synthetic_acceptance: bool  # random weights: acceptance numbers mean nothing
    started_at: str  # ISO-8601 wall clock
    settings: dict[str, Any] = field(default_factory=dict[str, Any])
    # under mlx.launch: world_size, backend, shard, hosts (rank order); empty for one process
    distributed: dict[str, Any] = field(default_factory=dict[str, Any])


@dataclass(frozen=True)
class PhaseStart(Event):
    type: ClassVar[str] = "phase_start"
    t: float
    phase: str
    kind: str  # sweep | decode | tune | indexer
    index: int
    total_phases: int
    planned_steps: int
    contexts: tuple[int, ...] = ()
    plan: tuple[
        dict[str, Any], ...
    ] = ()  # mlatui.measure.plans.Segment dicts, in the order they run


@dataclass(frozen=True)
class BudgetPlanned(Event):
    """The scenario fitted to its time budget (mlatui.run.budget) from a probe of this device, before
    the first phase: the forecasts, what was scaled down, and the phases that will run."""

    type: ClassVar[str] = "budget_planned"
    t: float
    budget_s: float
    full_s: float  # forecast of the phases as written
    predicted_s: float  # forecast of the phases chosen
    changes: tuple[str, ...]
    phases: tuple[dict[str, Any], ...]  # Phase.to_dict() of each phase that runs
    probe_contexts: tuple[int, ...]
    probe_s: float  # what the probe itself took


@dataclass(frozen=True)
class LoadStart(Event):
    """Sent before any weight is read or built (and before the header, which needs the loaded
    model; the recorder writes it after the header). `kind`: checkpoint | random. `files` and
    `total_bytes` are the safetensors on disk (0 when unknown, e.g. a hub id not yet fetched);
    `params` the parameter count of a random build."""

    type: ClassVar[str] = "load_start"
    t: float
    what: str  # "model" | "draft model"
    source: str  # path, hub id, "embedded" or "random:<family>"
    kind: str
    files: int = 0
    total_bytes: int = 0
    params: int = 0
    file_bytes: tuple[int, ...] = ()


@dataclass(frozen=True)
class LoadProgress(Event):
    """Bytes read so far; an estimate (`measure` says from what) when the loader is one call.
    `done` on the last one of a load."""

    type: ClassVar[str] = "load_progress"
    t: float
    what: str
    bytes_read: int
    files_read: int
    measure: str = ""  # process read bytes | mlx active memory | exact
    done: bool = False


@dataclass(frozen=True)
class Progress(Event):
    type: ClassVar[str] = "progress"
    t: float
    phase: str
    done: int
    total: int
    eta_s: float | None


@dataclass(frozen=True)
class Step(Event):
    """One timed forward of `width` new tokens on a cache of `context` tokens. `rep` is the
    sampler's round (every width and arm is measured in every round, A B B A)."""

    type: ClassVar[str] = "step"
    t: float
    phase: str
    arm: str
    context: int
    width: int
    rep: int
    ms: float
    absorbed_calls: int = 0
    materialised_calls: int = 0


@dataclass(frozen=True)
class SpecStep(Event):
    """One speculative step: draft `depth` tokens, verify them at L = depth + 1."""

    type: ClassVar[str] = "spec_step"
    t: float
    phase: str
    arm: str
    context: int
    depth: int
    step: int
    draft_ms: float
    verify_ms: float
    accepted: int
    accepted_by_position: tuple[int, ...]  # 1/0 per draft position, up to the first rejection
    tokens: int  # tokens emitted this step (accepted + 1)
    absorbed_calls: int = 0
    materialised_calls: int = 0


@dataclass(frozen=True)
class DecodeBlock(Event):
    """One arm decoding `tokens` tokens at one setting without interruption (depth 0 = plain
    decode through mlx-lm's generate_step; depth k through speculative_generate_step or the MTP
    loop). `accepted` lists each verify step's accepted drafts; `drafted` its drafted count."""

    type: ClassVar[str] = "decode_block"
    t: float
    phase: str
    arm: str
    context: int
    depth: int
    round: int
    tokens: int
    ms: float
    drafted: tuple[int, ...] = ()
    accepted: tuple[int, ...] = ()
    emitted: tuple[int, ...] = ()
    token_ids: tuple[int, ...] = ()  # the block's tokens: divergence and seeds can be checked
    acceptance_rule: str = ""  # exact-match | rejection-sampling (runtime.AcceptanceRule)
    temperature: float = 0.0
    draft_kind: str = (
        ""  # "mtp" | "draft-model" | "synthetic"; "" for plain decode (and schema < 4)
    )


@dataclass(frozen=True)
class SpeedupBound:
    """The most a speculative setting can gain over plain decode, from synced steps alone
    (mlatui.measure.bound): a verify step at L = depth + 1 emits at most `tokens` = depth + 1
    tokens, so the speedup is at most tokens x plain_ms / verify_ms. `plain_ms` is the plain
    step's CI high end, `verify_ms` the verify step's CI low end (or the paired ratio's, if that
    is higher); `slack` is the allowance for what the runtime does that synced steps do not, and
    `value` = the bound with it: the upper end the setting is judged by. `point`: from the
    medians, without the allowance."""

    tokens: int
    plain_ms: float
    verify_ms: float
    value: float
    point: float
    slack: float

    @property
    def rejects(self) -> bool:
        """The setting cannot win: even its bound's upper end is below plain decode."""
        return self.value < 1.0


@dataclass(frozen=True)
class DecodeResult(Event):
    """Throughput of one arm at one setting (depth 0 = plain decode), measured in this run.
    tok/s and the speedup over plain decode are medians over rounds with 95% CIs (the speedup is
    paired within rounds). Acceptance: `acceptance_conditional` P(accept i | 1..i-1 accepted),
    `acceptance_by_position` the unconditional share per position, `mean_accepted` accepted
    drafts per verify step; `counts` the raw per-position counts (mlatui.measure.acceptance).
    `measured` False: the setting was rejected by its `bound` before any of its blocks ran, so
    there is no tok/s (`tok_s` None) and `vs_plain_high` is the bound's upper end."""

    type: ClassVar[str] = "decode_result"
    t: float
    phase: str
    arm: str
    context: int
    depth: int
    tokens: int
    seconds: float
    tok_s: float | None  # None: not measured (rejected by bound)
    acceptance_by_position: tuple[float | None, ...] = ()
    verify_ms_median: float | None = None
    draft_ms_median: float | None = None
    tok_s_low: float | None = None
    tok_s_high: float | None = None
    vs_plain: float | None = None
    vs_plain_low: float | None = None
    vs_plain_high: float | None = None
    acceptance_conditional: tuple[float | None, ...] = ()
    mean_accepted: float | None = None
    counts: dict[str, Any] = field(default_factory=dict[str, Any])
    acceptance_rule: str = ""
    sampling: dict[str, Any] = field(default_factory=dict[str, Any])
    warnings: tuple[str, ...] = ()
    rounds: int = 0
    block_tokens: int = 0
    runtime: str = ""  # what decoded: "mlx_lm.generate_step", "mlx_lm.speculative_generate_step", "mlatui MTP loop"
    draft_kind: str = (
        ""  # "mtp" | "draft-model" | "synthetic"; "" for plain decode (and schema < 4)
    )
    # distinct 4-grams / 4-grams of the emitted tokens, within each timed block (pooled) and
    # across the blocks together, each different text once (mlatui.measure.repetition.
    # Repetition); None: not recorded (older runs)
    distinct_4gram_share: float | None = None
    distinct_4gram_share_across: float | None = None
    measured: bool = True  # False: rejected by bound, its blocks never ran (schema 6)
    bound: SpeedupBound | None = None  # every speculative setting's, measured or not (schema 6)

    @property
    def rejected_by_bound(self) -> bool:
        return not self.measured and self.bound is not None and self.bound.rejects


@dataclass(frozen=True)
class MemorySample(Event):
    type: ClassVar[str] = "memory"
    t: float
    mlx_active_bytes: int
    mlx_cache_bytes: int
    mlx_peak_bytes: int
    device_limit_bytes: int | None
    process_rss_bytes: int
    system_available_bytes: int
    system_total_bytes: int
    swap_used_bytes: int


@dataclass(frozen=True)
class Validity(Event):
    """The L = 1 check: both arms take the same branch at L = 1, so their paired ratio must be 1
    within the tolerance. `outcome` is valid (95% CI inside), invalid (wholly outside) or
    inconclusive (straddles a bound after the most rounds allowed); only valid counts.
    `stock_l1_ms`/`patched_l1_ms` are per-arm medians over rounds, `diff_pct` the signed paired
    difference (ratio - 1) in %."""

    type: ClassVar[str] = "validity"
    t: float
    phase: str
    context: int
    stock_l1_ms: float
    patched_l1_ms: float
    diff_pct: float
    tolerance_pct: float
    valid: bool
    outcome: str = ""  # valid | invalid | inconclusive ("" in schema 1: valid decides)
    ratio: float | None = None  # paired stock/patched at L = 1, median over rounds
    ratio_low: float | None = None  # its 95% bootstrap CI
    ratio_high: float | None = None
    rounds: int = 0
    # pooled: inconclusive on its own quads (the ratio above, CI containing 1.00), made valid by
    # the PooledValidity just before it; it replaces the context's own Validity
    basis: Basis = Basis.OWN

    @property
    def verdict(self) -> str:
        return self.outcome or ("valid" if self.valid else "invalid")

    @property
    def pooled(self) -> bool:
        return self.basis is Basis.POOLED


@dataclass(frozen=True)
class PooledValidity(Event):
    """The L = 1 check over every context's L = 1 quads so far (mlatui.measure.pooled), made
    when a phase's contexts are all measured. `decided`: the phase's inconclusive contexts it
    made valid (own CI containing 1.00); `undecided`: those it left inconclusive."""

    type: ClassVar[str] = "pooled_validity"
    t: float
    phase: str
    contexts: tuple[int, ...]  # every context whose L = 1 quads are in it
    rounds: int  # summed over the contexts
    quads: int
    ratio: float  # paired stock/patched at L = 1
    ratio_low: float  # its 95% CI
    ratio_high: float
    tolerance_pct: float
    outcome: str  # valid | invalid | inconclusive
    estimator: str
    ci_method: str
    decided: tuple[int, ...] = ()
    undecided: tuple[int, ...] = ()

    @property
    def valid(self) -> bool:
        return self.outcome == "valid"


@dataclass(frozen=True)
class Estimate(Event):
    """A context's paired estimates after `rounds` rounds (`final` after the last). Each row:
    {"quantity": step_ms | ratio | marginal_ms, "arm", "width", "median", "low", "high", "n"},
    a median over rounds with its 95% bootstrap CI; `estimators` names how each was made."""

    type: ClassVar[str] = "estimate"
    t: float
    phase: str
    context: int
    rounds: int
    final: bool
    outcome: str  # the L = 1 check so far ("" without a control width)
    rows: tuple[dict[str, Any], ...]
    drifting_rounds: int = 0
    estimators: dict[str, Any] = field(default_factory=dict[str, Any])


@dataclass(frozen=True)
class DriftEvent(Event):
    """The L = 1 level (both arms) stepped by more than 10% between two rounds of a context."""

    type: ClassVar[str] = "drift"
    t: float
    phase: str
    context: int
    round: int
    before_ms: float
    after_ms: float
    change_pct: float


@dataclass(frozen=True)
class PhaseSummary(Event):
    """Medians and spreads for a phase; `rows` are flat dicts of plain values."""

    type: ClassVar[str] = "phase_summary"
    t: float
    phase: str
    kind: str
    rows: tuple[dict[str, Any], ...]
    verdict: str = ""


@dataclass(frozen=True)
class LogMessage(Event):
    type: ClassVar[str] = "log"
    t: float
    level: str  # info | warning
    message: str


@dataclass(frozen=True)
class ErrorEvent(Event):
    type: ClassVar[str] = "error"
    t: float
    message: str
    where: str = ""
    refused: bool = False  # refused before loading (bad input or does not fit): exit status 2


@dataclass(frozen=True)
class RunEnd(Event):
    type: ClassVar[str] = "run_end"
    t: float
    status: str  # completed | interrupted | error
    invalid_contexts: tuple[int, ...] = ()


EVENT_TYPES: dict[str, type[Event]] = {
    cls.type: cls
    for cls in (
        RunHeader,
        BudgetPlanned,
        LoadStart,
        LoadProgress,
        PhaseStart,
        Progress,
        Step,
        SpecStep,
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
