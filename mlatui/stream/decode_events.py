"""The decode and tune phases' events: speculative steps, blocks through mlx-lm's runtime, and
each (context, arm, draft kind, depth) result with its guards and bound."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from mlatui.stream.event_base import Event
from mlatui.stream.interval import Interval


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
    there is no tok/s or speedup (`tok_s`, `vs_plain` None) and `bound.value` is the most it
    could have gained."""

    type: ClassVar[str] = "decode_result"
    t: float
    phase: str
    arm: str
    context: int
    depth: int
    tokens: int
    seconds: float
    tok_s: Interval | None  # None: not measured (rejected by bound)
    acceptance_by_position: tuple[float | None, ...] = ()
    verify_ms_median: float | None = None
    draft_ms_median: float | None = None
    vs_plain: Interval | None = None  # None: not measured; the bound's upper end is bound.value
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
