"""The threshold policy of every gated MLA layer, dense and sparse: the one object, built from a
threshold setting (mlatui/config/arm_settings.py) in `policy_for`, that says, for a layer
geometry and cache length, the largest number of new queries that still takes the absorbed path. Pure Python (no mlx), so recordings, the dashboard and the CLI can use it too.
"""

from __future__ import annotations

import sys
import threading
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum

from mlatui.config.arm_settings import IndexerMode, Threshold, ThresholdKind, parse_arms  # noqa: F401

UNBOUNDED = sys.maxsize
# the cache lengths a threshold is shown at (`thresholds`, every run's header)
THRESHOLD_CONTEXTS = (512, 1024, 2048, 4096, 8192, 16384, 32768, 131072)


def max_absorbed_queries(
    kv_lora_rank: int,
    qk_nope_head_dim: int,
    v_head_dim: int,
    cache_len: int | None = None,
) -> int:
    """Largest L for which the absorbed path is strictly cheaper, per head.

    absorbed ~ L*r*d + 2*L*T*r, materialised ~ T*r*d + L*T*d with d = nope + v and T the
    cache length after this step's update. Absorbed wins while L < T*r*d / (r*d + T*(2r - d)),
    which tends to r*d / (2r - d) as T grows. Returns at least 1; UNBOUNDED when the
    materialised path never wins (d >= 2r).
    """
    r, d = kv_lora_rank, qk_nope_head_dim + v_head_dim
    if r <= 0 or qk_nope_head_dim <= 0 or v_head_dim <= 0:
        return 1
    if cache_len is None:
        num, den = r * d, 2 * r - d
    else:
        if cache_len <= 0:
            return 1
        num, den = r * d * cache_len, r * d + cache_len * (2 * r - d)
    if den <= 0:
        return UNBOUNDED
    return max(1, (num - 1) // den)


@dataclass(frozen=True)
class Geometry:
    kv_lora_rank: int
    qk_nope_head_dim: int
    v_head_dim: int
    num_heads: int

    @property
    def key(self) -> str:
        return f"r{self.kv_lora_rank}-n{self.qk_nope_head_dim}-v{self.v_head_dim}"

    @classmethod
    def from_key(cls, key: str, num_heads: int) -> Geometry:
        """The geometry a record names by `key` (as `key` writes it) and its head count."""
        import re

        found = re.fullmatch(r"r(\d+)-n(\d+)-v(\d+)", key)
        if found is None:
            raise ValueError(f"not a geometry key: {key!r} (expected r<rank>-n<nope>-v<v>)")
        rank, nope, v = (int(g) for g in found.groups())
        return cls(rank, nope, v, num_heads)


class GatePolicy:
    """Decides the branch from (geometry, L, T); the base is the stock gate (absorbed iff
    L == 1). `name` is what reports and recordings show; `compiled`: absorbed calls run
    mlatui's own compiled attention (mlatui/gate/mla.py)."""

    name = "stock"
    compiled = False

    def bind(self, geometry: Geometry) -> None:
        """A layer of `geometry` takes this policy: resolve whatever it needs now, untimed."""

    def name_for(self, geometry: Geometry) -> str:
        return self.name

    def absorbed(self, geometry: Geometry, length: int, cache_len: int) -> bool:
        return length == 1

    def decide(self, geometry: Geometry, length: int, cache_len: int, installed: bool) -> bool:
        """The branch of one call; `installed` is what the runtime's own gate chose."""
        return self.absorbed(geometry, length, cache_len)

    def limit(self, geometry: Geometry, cache_len: int | None = None) -> int:
        """max_absorbed_queries for a layer of `geometry` holding `cache_len` tokens (None: T->inf)."""
        return 1


class InstalledPolicy(GatePolicy):
    """The runtime as it is: every call takes the branch the installed condition chose (pre-fix
    code: L == 1; fixed code: its own threshold). mlatui's own sparse layers have no installed
    condition of their own and keep the pre-fix gate."""

    name = "installed"

    def decide(self, geometry: Geometry, length: int, cache_len: int, installed: bool) -> bool:
        return installed


class LimitPolicy(GatePolicy):
    """Absorbed at L = 1 and up to `limit(geometry, T)` queries: the formula's and the
    calibration's gate (they differ only in where the limit comes from)."""

    def absorbed(self, geometry: Geometry, length: int, cache_len: int) -> bool:
        return length == 1 or length <= self.limit(geometry, cache_len)


class FormulaPolicy(LimitPolicy):
    name = "formula"

    def limit(self, geometry: Geometry, cache_len: int | None = None) -> int:
        return max_absorbed_queries(
            geometry.kv_lora_rank, geometry.qk_nope_head_dim, geometry.v_head_dim, cache_len
        )


class CompiledPolicy(FormulaPolicy):
    """The formula's gate; the layers' absorbed calls run mlatui's own compiled attention
    (mlatui/gate/mla.py) instead of the runtime's absorbed branch."""

    name = "compiled"
    compiled = True


class FixedPolicy(GatePolicy):
    def __init__(self, max_queries: int):
        if max_queries < 1:
            raise ValueError(f"threshold must be >= 1, got {max_queries}")
        self.max_queries = max_queries
        self.name = f"fixed:{max_queries}"

    def limit(self, geometry: Geometry, cache_len: int | None = None) -> int:
        return self.max_queries

    def absorbed(self, geometry: Geometry, length: int, cache_len: int) -> bool:
        return length <= self.max_queries


class ForcedPolicy(GatePolicy):
    """Always one branch, at every L: the forced-branch attention benchmark."""

    def __init__(self, absorbed: bool):
        self.force = absorbed
        self.name = "forced-absorbed" if absorbed else "forced-materialised"

    def absorbed(self, geometry: Geometry, length: int, cache_len: int) -> bool:
        return self.force


Crossovers = dict[int, int]  # context -> max absorbed width measured there


def stored_crossovers(geometry: Geometry) -> Crossovers | None:
    """What this device's calibration store holds for `geometry` (None: nothing usable)."""
    from mlatui.store import load_crossovers

    return load_crossovers(geometry)


class CalibratedPolicy(LimitPolicy):
    """Measured crossovers per geometry, read from the calibration store once per geometry when a
    layer binds; at cache length T, the one measured at the largest context <= T. A geometry
    with no stored calibration (or T below every measured context) uses the formula."""

    name = "calibrated"

    def __init__(self, load: Callable[[Geometry], Crossovers | None] | None = None):
        self._load = load or (lambda geometry: stored_crossovers(geometry))
        self._lock = threading.Lock()
        self.tables: dict[str, Crossovers] = {}
        self.fallback = FormulaPolicy()

    def bind(self, geometry: Geometry) -> None:
        with self._lock:
            if geometry.key in self.tables:
                return
            found = self._load(geometry)
            self.tables[geometry.key] = dict(sorted(found.items())) if found else {}
        if not found:
            warnings.warn(
                f"no usable calibration stored for {geometry.key} on this device; using the formula "
                "(run `mlatui calibrate` to measure one)",
                stacklevel=4,
            )

    def name_for(self, geometry: Geometry) -> str:
        return self.name if self.tables.get(geometry.key) else self.fallback.name

    def limit(self, geometry: Geometry, cache_len: int | None = None) -> int:
        table = self.tables.get(geometry.key)
        if not table:
            return self.fallback.limit(geometry, cache_len)
        if cache_len is None:
            return table[max(table)]
        below = [t for t in table if t <= cache_len]
        return table[max(below)] if below else self.fallback.limit(geometry, cache_len)


STOCK_POLICY = GatePolicy()
INSTALLED_POLICY = InstalledPolicy()


def policy_for(threshold: Threshold) -> GatePolicy:
    """The one place a threshold setting becomes a policy object."""
    match threshold.kind:
        case ThresholdKind.FORMULA:
            return FormulaPolicy()
        case ThresholdKind.CALIBRATED:
            return CalibratedPolicy()
        case ThresholdKind.STOCK:
            return STOCK_POLICY
        case ThresholdKind.INSTALLED:
            return INSTALLED_POLICY
        case ThresholdKind.FIXED:
            assert threshold.max_queries is not None
            return FixedPolicy(threshold.max_queries)
        case ThresholdKind.COMPILED:
            return CompiledPolicy()


def as_policy(value: Threshold | GatePolicy | str | int) -> GatePolicy:
    return value if isinstance(value, GatePolicy) else policy_for(Threshold.parse(value))


class Variant(StrEnum):
    """What an arm runs: stock mlx-lm gates, or the patched ones. The two slots of a run are
    named "stock" and "patched"; in an A/A (null) run both slots run the same variant."""

    STOCK = "stock"
    PATCHED = "patched"


@dataclass(frozen=True)
class Gates:
    """What the two arm slots run: the patched slot's policy (`threshold`, built once) and sparse
    indexer pooling, applied alike to every gated layer, dense and sparse, and to every draft that
    has MLA; the stock slot runs `baseline` (pre-fix by default) with the stock indexer. Every
    layer of an arm gets that arm's very policy object."""

    threshold: Threshold = Threshold()
    indexer: IndexerMode = IndexerMode.PATCHED
    baseline: Threshold = Threshold(ThresholdKind.STOCK)
    policy: GatePolicy = field(init=False, repr=False, compare=False)
    baseline_gates: Gates | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "policy", policy_for(self.threshold))
        baseline = None
        if self.baseline.kind is not ThresholdKind.STOCK:
            baseline = Gates(self.baseline, IndexerMode.STOCK)
        object.__setattr__(self, "baseline_gates", baseline)

    @classmethod
    def parse(
        cls, threshold: object = None, indexer: object = None, baseline: object = None
    ) -> Gates:
        """From settings in order of precedence already picked (None: the default)."""
        return cls(
            Threshold.parse(threshold) if threshold is not None else Threshold(),
            IndexerMode.parse(indexer) if indexer is not None else IndexerMode.PATCHED,
            Threshold.parse(baseline) if baseline is not None else Threshold(ThresholdKind.STOCK),
        )

    def for_variant(self, variant: Variant) -> Gates:
        """What an arm of `variant` runs: the stock slot runs the baseline in every layer."""
        if variant is Variant.STOCK:
            return self.baseline_gates or STOCK_GATES
        return self


STOCK_GATES = Gates(Threshold(ThresholdKind.STOCK), IndexerMode.STOCK)
DEFAULT_GATES = Gates()


def default_arms(installed_fixed: bool, threshold: Threshold | None) -> tuple[Threshold, Threshold]:
    """On pre-fix code: the runtime as it is against the patch (formula, or the threshold asked
    for). On fixed code: the pre-fix gate (a counterfactual) against the runtime as it is, so the
    screen still shows what the fix buys."""
    if installed_fixed:
        return Threshold(ThresholdKind.STOCK), threshold or Threshold(ThresholdKind.INSTALLED)
    return Threshold(ThresholdKind.STOCK), threshold or Threshold()


def arm_words(threshold: Threshold, runtime: str, installed_fixed: bool) -> str:
    """What an arm runs, in words, for titles, headers, verdicts and exports."""
    installed = (
        f"{runtime} as installed ({'fixed upstream' if installed_fixed else 'pre-fix, L == 1'})"
    )
    match threshold.kind:
        case ThresholdKind.STOCK:
            return "pre-fix (L == 1, counterfactual)" if installed_fixed else installed
        case ThresholdKind.INSTALLED:
            return installed
        case ThresholdKind.FORMULA:
            return "formula gate (mlatui's patch)"
        case ThresholdKind.CALIBRATED:
            return "calibrated gate (this device's measured crossover)"
        case ThresholdKind.FIXED:
            return f"fixed gate (absorbed for L <= {threshold.max_queries})"
        case ThresholdKind.COMPILED:
            return "compiled absorbed path (mlatui's own, mx.compile; formula gate)"


ALWAYS_ABSORBED = "always absorbed"


def threshold_text(value: object) -> str:
    """How a threshold reads: UNBOUNDED (where absorbing always wins, d >= 2r), which recordings
    hold as is, says "always absorbed"."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= UNBOUNDED:
        return ALWAYS_ABSORBED
    return str(value)
