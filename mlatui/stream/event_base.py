"""What every event shares: the base class, its JSON form, the schema version, the arm names.

Nothing here imports mlx or textual.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, ClassVar

from mlatui.config.phase_kind import Pass

SCHEMA_VERSION = 7  # 2: sampler rounds, paired estimates with CIs, three-outcome L = 1 check, drift
# 3: decode through mlx-lm's runtime in blocks (DecodeBlock), three acceptance forms, guards
# 4: several draft kinds in one run: DecodeBlock/DecodeResult.draft_kind
# 5: the L = 1 check pooled over the run's contexts: PooledValidity, Validity.basis
# (5, no bump: DecodeResult.distinct_4gram_share[_across], optional with a default: a reader of
# an older schema ignores them, and None says "not recorded")
# 6: settings rejected by bound (DecodeResult.measured, .bound): tok_s is None when not measured,
# which a reader of schema 5 would refuse
# 7: every confidence interval is one nested Interval {median, low, high, n}: Validity.ratio,
# PooledValidity.ratio, DecodeResult.tok_s and .vs_plain (older recordings' x/x_low/x_high
# fields are read through mlatui.stream.legacy)
# (7, no bump: MemorySample.process_footprint_bytes, optional with a default, None off macOS)
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
