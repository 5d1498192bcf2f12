"""The decode and tune phases' events: speculative steps, blocks through mlx-lm's runtime, and
each (context, arm, draft kind, depth) result with its guards and bound."""

from __future__ import annotations

from typing import Any

import msgspec

from mlatui.stream.event_base import ArmName, Event, Finite, Seconds
from mlatui.stream.interval import Interval


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


class SpeedupBound(msgspec.Struct, frozen=True):
    """The most a speculative setting can gain over plain decode, from synced steps alone
    (mlatui.measure.bound): a verify step at L = depth + 1 emits at most `tokens` = depth + 1
    tokens, so the speedup is at most tokens x plain_ms / verify_ms. `plain_ms` is the plain
    step's CI high end, `verify_ms` the verify step's CI low end (or the paired ratio's, if that
    is higher); `slack` is the allowance for what the runtime does that synced steps do not, and
    `value` = the bound with it: the upper end the setting is judged by. `point`: from the
    medians, without the allowance."""

    tokens: int
    plain_ms: Finite
    verify_ms: Finite
    value: Finite
    point: Finite
    slack: Finite

    @property
    def rejects(self) -> bool:
        """The setting cannot win: even its bound's upper end is below plain decode."""
        return self.value < 1.0


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
