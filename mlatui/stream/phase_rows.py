"""The rows events carry, as typed Structs: an Estimate's (one shape, named by its `quantity`) and
a PhaseSummary's, whose shape is its phase kind's (`ROW_TYPES`: sweep and `+` rounds a SweepRow,
decode and tune a DecodeRow, the indexer an IndexerRow). A summary row is written without its
kind, as the phase's plain values; `PhaseSummary` reads each as its kind's row. A key an older
recording lacks reads as its field's default. Nothing here imports mlx or textual.
"""

from __future__ import annotations

import enum
from typing import Any

import msgspec

from mlatui.config.phase_kind import PhaseKind
from mlatui.stream.event_base import Basis, Count, Interval, SpeedupBound


class Quantity(enum.StrEnum):
    STEP_MS = "step_ms"  # one arm's step at width L
    RATIO = "ratio"  # stock/patched, paired within rounds
    MARGINAL_MS = "marginal_ms"  # L=2 − L=1 of one arm (the key figure)
    VS_L1 = "vs_l1"  # one arm's step at L over its step at L=1
    TOK_S = "tok_s"  # decode throughput of one arm at one depth (0 = plain)
    VS_PLAIN = "vs_plain"  # speculative tok/s over plain decode, paired within rounds
    BOUND = "bound"  # rejected by bound: the most its speedup can be (not measured, no tok/s)
    GB_S = "gb_s"  # one arm's step: its fewest necessary bytes over its time
    MBU = "mbu"  # that against the device's measured limit (a fraction)
    MBU_MOST = "mbu_most"  # over the most bytes the step may need (routing is not recorded)


class EstimateRow(msgspec.Struct, frozen=True, kw_only=True):
    """One paired estimate of a context: a median over rounds with its 95% CI over `n` rounds
    (quads for the ratio). `arm` is "" for the paired ratio."""

    quantity: Quantity
    arm: str
    width: Count
    median: float
    low: float
    high: float
    n: Count

    @property
    def interval(self) -> Interval:
        return Interval(self.median, self.low, self.high, self.n)

    @classmethod
    def of(cls, quantity: Quantity, arm: str, width: int, iv: Interval) -> EstimateRow:
        return cls(
            quantity=quantity,
            arm=arm,
            width=width,
            median=iv.median,
            low=iv.low,
            high=iv.high,
            n=iv.n,
        )


def ci_parts(iv: Interval | None) -> tuple[float | None, float | None, float | None]:
    """(median, low, high) of an interval as a summary row carries it flat: the ends None where
    only the median is known, all three None without one."""
    if iv is None:
        return None, None, None
    return iv.median, (iv.low if iv.known else None), (iv.high if iv.known else None)


class PhaseRow:
    """What every kind's summary row is (its Struct is chosen by the phase's kind)."""

    __slots__ = ()


class SweepRow(msgspec.Struct, PhaseRow, frozen=True, kw_only=True):
    """Per (context, width, arm) of a sweep: the step's median with its CI and spread, the
    paired estimates at that width with their CIs, the context's L = 1 check, the raw samples."""

    context: Count
    width: Count
    arm: str
    median_ms: float
    ci_low_ms: float | None = None
    ci_high_ms: float | None = None
    p10_ms: float | None = None
    p90_ms: float | None = None
    rounds: int = 0
    n: int = 0
    ratio: float | None = None
    ratio_low: float | None = None
    ratio_high: float | None = None
    marginal_ms: float | None = None
    marginal_low_ms: float | None = None
    marginal_high_ms: float | None = None
    vs_l1: float | None = None
    vs_l1_low: float | None = None
    vs_l1_high: float | None = None
    valid: bool = False
    outcome: str = ""
    basis: Basis = Basis.OWN
    drifting_rounds: int = 0
    samples_ms: tuple[float, ...] = ()


class DecodeRow(msgspec.Struct, PhaseRow, frozen=True, kw_only=True):
    """Per (context, arm, draft kind, depth) of a decode or tune phase: its DecodeResult's
    figures flat, with the context's L = 1 check; a setting rejected by bound has no tok/s and
    its bound as the speedup's upper end."""

    context: Count
    arm: str
    depth: int
    draft_kind: str = ""
    tok_s: float | None = None
    tok_s_low: float | None = None
    tok_s_high: float | None = None
    vs_plain: float | None = None
    vs_plain_low: float | None = None
    vs_plain_high: float | None = None
    acceptance_conditional: tuple[float | None, ...] = ()
    acceptance_by_position: tuple[float | None, ...] = ()
    mean_accepted: float | None = None
    verify_ms_median: float | None = None
    tokens: int = 0
    rounds: int = 0
    acceptance_rule: str = ""
    temperature: float = 0.0
    distinct_4gram_share: float | None = None
    distinct_4gram_share_across: float | None = None
    warnings: tuple[str, ...] = ()
    valid: bool = False
    outcome: str = ""
    basis: Basis = Basis.OWN
    measured: bool = True
    bound: SpeedupBound | None = None


class IndexerRow(msgspec.Struct, PhaseRow, frozen=True, kw_only=True):
    """Per (part, context, S, arm) of an indexer phase on one sparse layer: the step's median
    with its CI, the paired stock/patched and S/S=1 with their CIs, the pool's rebuilds and
    reuses, the S = 1 check, and the untimed output check (the indexer's top-k agreement, or
    the sparse layer's largest difference)."""

    part: str = "indexer"  # indexer | sparse-layer
    layer: str = "-"  # the sparse layer's name in the model
    context: Count
    width: Count
    arm: str
    median_ms: float | None = None
    ci_low_ms: float | None = None
    ci_high_ms: float | None = None
    ratio: float | None = None
    ratio_low: float | None = None
    ratio_high: float | None = None
    vs_s1: float | None = None
    vs_s1_low: float | None = None
    vs_s1_high: float | None = None
    pool_rebuilds: int | None = None  # None: not recorded
    pool_reuses: int | None = None
    outcome: str = ""
    valid: bool = True
    samples_ms: tuple[float, ...] = ()
    p10_ms: float | None = None
    p90_ms: float | None = None
    n: int = 0
    rounds: int = 0
    selection_agreement: float | None = None
    parity_max_abs: float | None = None


# each kind's summary row; a kind without one (a newer tool's) keeps no rows
ROW_TYPES: dict[PhaseKind, type[PhaseRow]] = {
    PhaseKind.SWEEP: SweepRow,
    PhaseKind.MORE: SweepRow,
    PhaseKind.DECODE: DecodeRow,
    PhaseKind.TUNE: DecodeRow,
    PhaseKind.INDEXER: IndexerRow,
}


class UnreadRow(PhaseRow):
    """A summary row as JSON gave it, before its phase's kind has chosen its Struct
    (`read_rows`); no event keeps one."""

    __slots__ = ("values",)

    def __init__(self, values: dict[str, Any]):
        self.values = values


def decode_hook(type_: type, obj: Any) -> Any:
    """The events decoder's hook: a summary row waits, as read, for its phase's kind."""
    if type_ is not PhaseRow:
        raise NotImplementedError(f"no decoding for {type_.__name__}")
    if not isinstance(obj, dict):
        raise TypeError(f"Expected `object`, got `{type(obj).__name__}`")
    return UnreadRow(obj)


def read_rows(kind: str, rows: tuple[PhaseRow, ...]) -> tuple[PhaseRow, ...]:
    """`rows` as `kind`'s Struct (rows already typed stay as they are)."""
    known = PhaseKind.of(kind)
    row_type = ROW_TYPES.get(known) if known is not None else None
    out = []
    for i, row in enumerate(rows):
        if not isinstance(row, UnreadRow):
            out.append(row)
        elif row_type is not None:
            try:
                out.append(msgspec.convert(row.values, row_type))
            except msgspec.ValidationError as e:  # said at the row's place in the event
                said, at, path = str(e).partition(" - at `$")
                raise msgspec.ValidationError(
                    f"{said} - at `$.rows[{i}]{path if at else '`'}"
                ) from None
    return tuple(out)
