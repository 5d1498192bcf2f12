"""Benchmark records, llama-bench style: one record type and the environment it was measured in
(printed through mlatui.views.mdtable), and what each benchmark's records hold.

Every record carries the machine, versions and settings that produced it, and its raw samples
beside the median, so a table can always be traced back to what was measured.

- The forced-branch benchmark's reading of a paired ratio absorbed/materialised: which branch
  was faster at a width, the largest width the absorbed one won, and an interval as its records
  keep it. Shared by the benchmark that writes the records and the printer that reads them back.
- One sampled indexer-bench part as records: raw samples, paired estimates, S = 1 note per cell.
"""

from __future__ import annotations

import math
import platform
import statistics
import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

from mlatui.measure.estimates import (
    ContextEstimates,
    Outcome,
    Timing,
)
from mlatui.measure.sampler import SamplerRun
from mlatui.stream.event_base import Interval
from mlatui.stream.phrases import interval_text


def percentile(samples: Sequence[float], q: float) -> float:
    xs = sorted(samples)
    if not xs:
        return math.nan
    k = (len(xs) - 1) * q / 100
    lo, hi = math.floor(k), math.ceil(k)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


@dataclass(frozen=True)
class Stats:
    n: int
    median: float
    p10: float
    p90: float
    p95: float
    min: float
    max: float
    mad: float

    @classmethod
    def of(cls, samples: Sequence[float]) -> Stats:
        if not samples:
            nan = math.nan
            return cls(0, nan, nan, nan, nan, nan, nan, nan)
        med = statistics.median(samples)
        return cls(
            len(samples),
            med,
            percentile(samples, 10),
            percentile(samples, 90),
            percentile(samples, 95),
            min(samples),
            max(samples),
            statistics.median(abs(x - med) for x in samples),
        )


def environment() -> dict[str, Any]:
    """Machine and versions. Imports mlx lazily (only the engine side calls this)."""
    import importlib.metadata as md

    import mlx.core as mx

    from mlatui import __version__
    from mlatui.host.blas import blas_in_use, blas_threading

    def version(pkg: str) -> str:
        try:
            return md.version(pkg)
        except md.PackageNotFoundError:
            return "n/a"

    info = {}
    try:
        info = {k: v for k, v in mx.device_info().items() if isinstance(v, (int, float, str))}
    except Exception:  # noqa: BLE001 - device_info differs per backend; absence is fine
        pass
    backend = "cpu"
    if mx.default_device() == mx.gpu:
        backend = "metal" if sys.platform == "darwin" else "cuda"
    import psutil

    return {
        "mlatui": __version__,
        "mlx": version("mlx"),
        "mlx_lm": version("mlx-lm"),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "backend": backend,
        "device_name": str(info.get("device_name", platform.processor() or platform.machine())),
        "architecture": str(info.get("architecture", platform.machine())),
        "device_memory_bytes": int(
            info.get("total_memory") or info.get("memory_size") or psutil.virtual_memory().total
        ),
        "cpu_count": psutil.cpu_count(logical=True),
        "blas": blas_in_use() if backend == "cpu" else "n/a (gpu)",
        "blas_threading": blas_threading() if backend == "cpu" else "n/a (gpu)",
        **_distributed(),
    }


def _distributed() -> dict[str, Any]:
    """World size, backend and hosts of a run under mlx.launch (nothing for one process)."""
    from mlatui.host import distributed

    w = distributed.world()
    if w is None:
        return {}
    return {"world_size": w.size, "dist_backend": w.backend, "hosts": list(w.hosts)}


@dataclass
class BenchRecord:
    bench: str  # attention-forced | attention-model | indexer | ...
    family: str
    arm: str  # stock | patched | absorbed | materialised | ...
    context: int
    width: int
    samples_ms: list[float]
    settings: dict[str, Any] = field(default_factory=dict)
    env: dict[str, Any] = field(default_factory=dict)
    valid: bool = True
    note: str = ""

    @property
    def stats(self) -> Stats:
        return Stats.of(self.samples_ms)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        s = self.stats
        d.update(median_ms=s.median, p10_ms=s.p10, p90_ms=s.p90, n=s.n)
        return d


# ---- the forced-branch benchmark's reading of absorbed/materialised ------------------------------

BRANCHES = ("absorbed", "materialised")  # the sampler's arms; the ratio is absorbed/materialised
ABSORBED_FASTER = "absorbed faster"
MATERIALISED_FASTER = "materialised faster"
TIE = "tie (within noise)"


def verdict(ratio: Interval) -> str:
    """From the paired ratio absorbed/materialised and its 95% CI."""
    if ratio.n and ratio.high < 1:
        return ABSORBED_FASTER
    if ratio.n and ratio.low > 1:
        return MATERIALISED_FASTER
    return TIE


def within_noise(ratio: Interval) -> bool:
    """The ratio's CI straddles 1: the probe was decided by its median alone."""
    return ratio.low <= 1 <= ratio.high


def crossover(ratios: Mapping[int, Interval]) -> int | None:
    """Largest width where the absorbed branch was significantly faster (None if it never was)."""
    wins = [w for w, r in ratios.items() if verdict(r) == ABSORBED_FASTER]
    return max(wins) if wins else None


def interval_dict(iv: Interval) -> dict[str, float | int]:
    return {"median": iv.median, "low": iv.low, "high": iv.high, "rounds": iv.n}


def interval_of(d: Mapping[str, float | int]) -> Interval:
    """An interval as `interval_dict` wrote it."""
    return Interval(float(d["median"]), float(d["low"]), float(d["high"]), int(d["rounds"]))


# ---- an indexer-bench part as records ------------------------------------------------------------

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
            vs = est.vs_l1.get((arm, width))
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
