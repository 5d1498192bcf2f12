"""What every event shares: the base Struct, its JSON form, the schema version, the arm names,
and the checked types of its fields (what a recording's line must hold, checked on read),
among them the nested records: the one confidence-interval type (`Interval`; the sampler makes
it) and a speculative setting's bound (`SpeedupBound`).

Nothing here imports mlx or textual.
"""

from __future__ import annotations

import sys
from enum import StrEnum
from typing import Annotated, Any

import msgspec

from mlatui.config.phase_kind import Pass

SCHEMA_VERSION = 8  # 2: sampler rounds, paired estimates with CIs, three-outcome L = 1 check, drift
# 3: decode through mlx-lm's runtime in blocks (DecodeBlock), three acceptance forms, guards
# 4: several draft kinds in one run: DecodeBlock/DecodeResult.draft_kind
# 5: the L = 1 check pooled over the run's contexts: PooledValidity, Validity.basis
# 6: settings rejected by bound (DecodeResult.measured, .bound): tok_s is None when not measured
# 7: every confidence interval is one nested Interval {median, low, high, n}
# 8: events are msgspec Structs; recorded sentences write ratios as `1.12× [1.01, 1.16]`.
# A recording of an older schema is refused (mlatui.stream.recorder.check_header).
ARMS = ("stock", "patched")

# what a field must hold on read (msgspec checks it when a line is decoded, not on construction)
Finite = Annotated[float, msgspec.Meta(ge=-sys.float_info.max, le=sys.float_info.max)]
Seconds = Annotated[float, msgspec.Meta(ge=0, le=sys.float_info.max)]  # since the run started
Count = Annotated[int, msgspec.Meta(ge=0)]
Width = Annotated[int, msgspec.Meta(ge=1)]
ArmName = Annotated[str, msgspec.Meta(pattern="^(stock|patched)$")]


class Basis(StrEnum):
    """What decided a context's L = 1 check: its own quads, or the check pooled over every
    context of the run (`PooledValidity`), which can only make an inconclusive context valid."""

    OWN = "own"
    POOLED = "pooled"


class Interval(msgspec.Struct, frozen=True):
    """`median` with its interval [`low`, `high`] over `n` values (rounds, or quads for a paired
    ratio). `n` = 0: no interval, either nothing was measured (NaN median) or the run kept the
    median alone (then `low` = `high` = `median`, and `known` is False)."""

    median: Finite
    low: Finite
    high: Finite
    n: Count

    @property
    def known(self) -> bool:
        """The interval was measured (not only its median)."""
        return self.n > 0

    def contains(self, value: float) -> bool:
        return self.low <= value <= self.high

    def scaled(self, factor: float) -> Interval:
        """Every end times a positive `factor` (e.g. ms -> s)."""
        return Interval(self.median * factor, self.low * factor, self.high * factor, self.n)

    def reciprocal(self, numerator: float = 1.0) -> Interval | None:
        """`numerator / x` of every end (the ends swap); None unless every end is > 0 (a figure
        whose interval reaches 0 has no finite reciprocal)."""
        if not (self.low > 0 and self.median > 0 and self.high > 0):
            return None
        return Interval(
            numerator / self.median, numerator / self.high, numerator / self.low, self.n
        )


class SpeedupBound(msgspec.Struct, frozen=True):
    """The most a speculative setting can gain over plain decode, from synced steps alone
    (mlatui.measure.acceptance): a verify step at L = depth + 1 emits at most `tokens` = depth + 1
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


class Event(msgspec.Struct, frozen=True, tag_field="type"):
    """A record of the run; each kind is tagged in JSON by its `type` (the class's `tag`)."""

    @property
    def type(self) -> str:
        return str(self.__struct_config__.tag)

    def to_dict(self) -> dict[str, Any]:
        """{"type": ..., fields...} of plain values (what the JSON line holds)."""
        out: dict[str, Any] = msgspec.to_builtins(self, enc_hook=_jsonable)
        return out

    def to_json(self) -> str:
        return ENCODER.encode(self).decode()


def _jsonable(value: Any) -> Any:
    if isinstance(value, float):  # numpy's float64 and other float subclasses
        return float(value)
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    raise TypeError(f"not JSON-serialisable in an event: {type(value).__name__}")


ENCODER = msgspec.json.Encoder(enc_hook=_jsonable)


def arm_label(arm: str, phase: str) -> str:
    """What ran in an arm slot: the slot's name in a real run. In an A/A pass both slots run the
    same variant, so 'stock'/'patched' would name what did not run: 'A (stock)' / 'B (stock)'."""
    variant = Pass.of(phase).variant
    if variant is None or arm not in ARMS:
        return arm
    return f"{'AB'[ARMS.index(arm)]} ({variant})"


def ratio_label(phase: str) -> str:
    """The paired ratio's name: 'stock/patched', or 'A/B' in an A/A pass."""
    return "A/B" if Pass.of(phase).null else "stock/patched"
