"""One sampled indexer-bench part as records: raw samples, paired estimates, S = 1 note per cell."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

from mlatui.measure.estimates import (
    ContextEstimates,
    Interval,
    Outcome,
    Timing,
    bootstrap_median,
    stable_seed,
)
from mlatui.measure.records import BenchRecord
from mlatui.measure.sampler import SamplerRun
from mlatui.stream.phrases import interval_text

FAMILY = "glm5.3-flash"


class IndexerPart(StrEnum):
    """What the indexer bench and phase time: the top-k indexer alone, or the sparse layer."""

    INDEXER = "indexer"
    SPARSE_LAYER = "sparse-layer"

    @property
    def tag(self) -> str:
        """The suffix of its phase's name in the events (`<phase>:indexer`, `<phase>:layer`)."""
        return "indexer" if self is IndexerPart.INDEXER else "layer"


@dataclass
class PartRun:
    """One part at one context: the sampler's run and what the harness checked along the way."""

    part: str
    context: int
    run: SamplerRun
    pool: dict[tuple[str, int], dict[str, int]]  # (arm, width) -> rebuilds / reuses, timed only
    lengths: dict[tuple[str, int], set[int]]  # (arm, width) -> cache length before each step

    @property
    def estimates(self) -> ContextEstimates:
        if self.run.estimates is None:  # sample_context returns after one round at least
            raise RuntimeError(f"{self.part} @ {self.context}: the sampler returned before a round")
        return self.run.estimates

    @property
    def outcome(self) -> Outcome:
        return self.estimates.control_outcome or Outcome.INCONCLUSIVE


@dataclass
class IndexerRecord(BenchRecord):
    """One (part, context, width, arm) cell: the raw samples with the round each came from, and
    the sampler's paired estimates. `median_ms` is the median over rounds of the arm's per-round
    mean (not the median of the pooled samples); `ratio` is the paired stock/patched at this width
    (the same in both arms' records); `vs_s1` is this arm's per-round mean at S over its mean at
    S = 1 in the same round; `outcome` is the part's S = 1 check at this context."""

    rounds: list[int] = field(default_factory=list)  # round index of each raw sample
    order: list[int] = field(default_factory=list)  # its position in the context's schedule
    median_ms: float = math.nan
    ci_low_ms: float = math.nan
    ci_high_ms: float = math.nan
    ratio: float | None = None
    ratio_low: float | None = None
    ratio_high: float | None = None
    vs_s1: float | None = None
    vs_s1_low: float | None = None
    vs_s1_high: float | None = None
    outcome: str = ""
    n_rounds: int = 0
    pool_rebuilds: int = 0  # over this cell's timed samples
    pool_reuses: int = 0

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        s = self.stats
        d.update(p10_ms=s.p10, p90_ms=s.p90, n=s.n, pooled_median_ms=s.median)
        return d


def _per_round_ratio(timings: Sequence[Timing], arm: str, width: int, seed: int) -> Interval | None:
    """Median over rounds of this arm's mean at `width` over its mean at S = 1, same round."""
    by: dict[tuple[int, int], list[float]] = {}
    for t in timings:
        if t.arm == arm and t.width in (1, width):
            by.setdefault((t.round, t.width), []).append(t.ms)
    ratios = [
        statistics.fmean(by[(r, width)]) / statistics.fmean(by[(r, 1)])
        for r in sorted({r for r, _ in by})
        if (r, width) in by and (r, 1) in by and statistics.fmean(by[(r, 1)]) > 0
    ]
    return bootstrap_median(ratios, stable_seed(seed, "vs_s1", arm, width)) if ratios else None


def control_note(result: PartRun) -> str:
    est = result.estimates
    ratio = est.control_ratio
    outcome = result.outcome
    if ratio is None:
        return f"S=1 control: no paired ratio ({outcome.value})"
    note = (
        f"S=1 control: paired stock/patched {interval_text(ratio, 4, '×')} "
        f"over {est.rounds} rounds, "
        f"tolerance ±{est.tolerance_pct:g}%: {outcome.value}"
    )
    return note if outcome is Outcome.VALID else f"{outcome.value.upper()}: {note}"


def part_records(
    result: PartRun, settings: dict[str, Any], env: dict[str, Any]
) -> list[IndexerRecord]:
    est = result.estimates
    plan = result.run.plan
    outcome = result.outcome
    note = control_note(result)
    cells: dict[tuple[str, int], list[Timing]] = {}
    order: dict[int, int] = {}
    for i, t in enumerate(result.run.timings):
        cells.setdefault((t.arm, t.width), []).append(t)
        order[id(t)] = i
    records = []
    for width in plan.widths:
        ratio = est.ratio.get(width)
        for arm in plan.arms:
            ts = cells.get((arm, width), [])
            iv = est.step_ms.get((arm, width))
            vs = _per_round_ratio(result.run.timings, arm, width, plan.seed) if width > 1 else None
            records.append(
                IndexerRecord(
                    result.part,
                    FAMILY,
                    arm,
                    result.context,
                    width,
                    [t.ms for t in ts],
                    settings,
                    env,
                    outcome is Outcome.VALID,
                    note,
                    rounds=[t.round for t in ts],
                    order=[order[id(t)] for t in ts],
                    median_ms=iv.median if iv else math.nan,
                    ci_low_ms=iv.low if iv else math.nan,
                    ci_high_ms=iv.high if iv else math.nan,
                    ratio=ratio.median if ratio else None,
                    ratio_low=ratio.low if ratio else None,
                    ratio_high=ratio.high if ratio else None,
                    vs_s1=vs.median if vs else (1.0 if width == 1 else None),
                    vs_s1_low=vs.low if vs else (1.0 if width == 1 else None),
                    vs_s1_high=vs.high if vs else (1.0 if width == 1 else None),
                    outcome=outcome.value,
                    n_rounds=est.rounds,
                    pool_rebuilds=result.pool[(arm, width)]["rebuilds"],
                    pool_reuses=result.pool[(arm, width)]["reuses"],
                )
            )
    return records
