"""What every event shares: the base Struct, its JSON form, the schema version, the arm names,
and the checked types of its fields (what a recording's line must hold, checked on read).

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
