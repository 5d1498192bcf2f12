"""The device's memory bandwidth limit, two ways, and a step's use of it.

Necessary bytes per step are arithmetic on a model's byte census (pure Python: estimates carry
each step's bytes, `StepBytes.to_dict`, so any printer reads them back without mlx);
mlatui.models.step_bytes takes the census of a built model; what each figure counts is said
there.

Measured: a short probe through MLX itself (reductions over a large array read it once; a copy
`a + 1` of half of it reads one half and writes another), the best of a few repetitions, over an
array several times the largest cache so it measures main memory, not a cache. Load from other
processes only slows a probe, so the limit is the most any probe of the device reached
(`Measured.merged`). A step that reads faster than that limit was served (in part) from a cache
or timed while a probe was slowed: it does not move the limit, and its MBU is not a figure
(`LimitCheck`). Published: the vendors' figures for the devices this project runs on. Model
bandwidth utilisation (MBU) is a step's necessary bytes over its time, against the limit; a step's
time interval gives the figure's interval from the same rounds (bytes are fixed per context and
width, so the ends swap).
mlx is imported inside `probe` only: the rest is read by the printers on machines without it.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from mlatui.stream.event_base import Interval
from mlatui.stream.phase_rows import EstimateRow, Quantity

# ---- necessary bytes per step, as arithmetic on a model's byte census ------------------------


@dataclass(frozen=True)
class ByteRange:
    """Fewest and most bytes a step may need (equal where nothing depends on routing)."""

    low: int
    high: int

    def __add__(self, other: ByteRange) -> ByteRange:
        return ByteRange(self.low + other.low, self.high + other.high)


@dataclass(frozen=True)
class RoutedExperts:
    """One layer's routed experts: how many, the bytes of one, and how many a token takes."""

    count: int
    expert_bytes: int
    top_k: int

    def read(self, width: int) -> ByteRange:
        most = min(self.count, width * self.top_k)
        return ByteRange(min(self.top_k, most) * self.expert_bytes, most * self.expert_bytes)


@dataclass(frozen=True)
class LayerWeights:
    whole_bytes: int  # read whole every step: attention, dense MLP, shared experts, norms, router
    routed: RoutedExperts | None = None

    def read(self, width: int) -> ByteRange:
        whole = ByteRange(self.whole_bytes, self.whole_bytes)
        return whole + self.routed.read(width) if self.routed else whole


@dataclass(frozen=True)
class AttentionCache:
    """What one MLA layer caches per row, and what a sparse layer's indexer adds."""

    kv_lora_rank: int
    qk_rope_head_dim: int
    num_heads: int
    qk_nope_head_dim: int
    v_head_dim: int
    itemsize: int  # bytes per cached element
    index_head_dim: int = 0  # 0: a dense layer
    index_topk: int = 0

    def read(self, rows: int, width: int) -> ByteRange:
        """Latent + rope rows an absorbed step reads (all of them, or the selected ones on a
        sparse layer, whose indexer also reads a key per row)."""
        per_row = (self.kv_lora_rank + self.qk_rope_head_dim) * self.itemsize
        if not self.index_head_dim:
            return ByteRange(rows * per_row, rows * per_row)
        keys = rows * self.index_head_dim * self.itemsize
        fewest, most = min(rows, self.index_topk), min(rows, width * self.index_topk)
        return ByteRange(keys + fewest * per_row, keys + most * per_row)

    def materialised_extra(self, rows: int) -> int:
        """Full K (nope part) and V per head, written once and read back once."""
        return 2 * rows * self.num_heads * (self.qk_nope_head_dim + self.v_head_dim) * self.itemsize


@dataclass(frozen=True)
class StepBytes:
    weights: ByteRange
    cache: ByteRange
    materialised_extra: int  # what the materialised branch builds and reads back, beyond `cache`

    @property
    def total(self) -> ByteRange:
        return self.weights + self.cache

    def to_dict(self) -> dict[str, int]:
        return {
            "weights_low": self.weights.low,
            "weights_high": self.weights.high,
            "cache_low": self.cache.low,
            "cache_high": self.cache.high,
            "materialised_extra": self.materialised_extra,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, int]) -> StepBytes:
        """As `to_dict` wrote it (a bench record's `step_bytes`)."""
        return cls(
            ByteRange(int(data["weights_low"]), int(data["weights_high"])),
            ByteRange(int(data["cache_low"]), int(data["cache_high"])),
            int(data["materialised_extra"]),
        )


@dataclass(frozen=True)
class ModelBytes:
    """A model's parameters sorted by how a step reads them, and its attention caches."""

    layers: tuple[LayerWeights, ...]
    other_bytes: int  # outside the layers, read whole: final norm, output projection
    embedding_row_bytes: int  # a row of every input embedding (0: tied, counted in other_bytes)
    caches: tuple[AttentionCache, ...]
    embedding_bytes: int = 0  # the untied input embedding's whole table

    @property
    def parameter_bytes(self) -> int:
        """Every parameter once (the weights' footprint)."""
        layers = sum(
            w.whole_bytes + (w.routed.count * w.routed.expert_bytes if w.routed else 0)
            for w in self.layers
        )
        return layers + self.other_bytes + self.embedding_bytes

    def step(self, width: int, context: int) -> StepBytes:
        """Bytes a step of `width` new tokens reads on a cache holding `context` tokens."""
        rows = context + width
        weights = ByteRange(self.other_bytes, self.other_bytes)
        weights += ByteRange(width * self.embedding_row_bytes, width * self.embedding_row_bytes)
        for layer in self.layers:
            weights += layer.read(width)
        cache = ByteRange(0, 0)
        for c in self.caches:
            cache += c.read(rows, width)
        extra = sum(c.materialised_extra(rows) for c in self.caches)
        return StepBytes(weights, cache, extra)


# ---- the device's limit ------------------------------------------------------------------------

# Past the last-level cache: 4x the largest cache the OS reports, and at least 512 MB, since Apple
# silicon's system-level cache (up to 96 MB on Max/Ultra) is reported nowhere.
CACHE_MULTIPLE = 4
CPU_PROBE_MIN_BYTES = 512 << 20
PROBE_MEMORY_SHARE = 8  # the array and the copy's output: at most 1.5/8 of available memory
# 1 GB is past a GPU's caches: H100's and H200's L2 50 MB, Apple's SLC up to 96 MB.
GPU_PROBE_BYTES = 1 << 30
PROBE_REPS = 5
ROW_FLOATS = 4096
PROBE_BUDGET_S = 0.5  # timed runs of one kind stop past this, after two: a 1 GB probe is seconds
PROBE_STALE_S = 24 * 3600.0  # a day: probed again then, and the best of both kept
SYSFS_CPU = Path("/sys/devices/system/cpu")
MAC_CACHE_SYSCTLS = ("hw.l3cachesize", "hw.l2cachesize", "hw.perflevel0.l2cachesize")


@dataclass(frozen=True)
class Published:
    """A vendor's figure for a device, in GB/s (10^9 bytes per second)."""

    name: str
    gb_s: float
    source: str


# Matched against MLX's device name in order (the first pattern that matches wins).
# NVIDIA: H100 SXM5 3.35 TB/s, H100 PCIe 2.0 TB/s, H100 NVL 3.9 TB/s (H100 datasheet,
#   https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet);
#   H200 SXM 4.8 TB/s (https://www.nvidia.com/en-us/data-center/h200/);
#   A100 80GB SXM 2,039 GB/s, A100 40GB 1,555 GB/s (https://www.nvidia.com/en-us/data-center/a100/).
# Apple: unified memory bandwidth from each chip's announcement (https://www.apple.com/newsroom/,
#   "Apple unveils M1 Pro and M1 Max", "M2 Pro and M2 Max", "M3 family", "M4 Pro and M4 Max",
#   "M2 Ultra", "M3 Ultra") and the product tech-specs pages (https://support.apple.com/specs).
#   Where a chip ships in two memory configurations (M3 Max 300/400, M4 Max 410/546 GB/s) the
#   higher figure is the one kept, so MBU against it is never overstated.
PUBLISHED: tuple[tuple[str, Published], ...] = (
    (r"H200", Published("NVIDIA H200", 4800.0, "nvidia.com/en-us/data-center/h200")),
    (r"H100.*NVL", Published("NVIDIA H100 NVL", 3900.0, "NVIDIA H100 datasheet")),
    (r"H100.*PCIe", Published("NVIDIA H100 PCIe", 2000.0, "NVIDIA H100 datasheet")),
    (r"H100", Published("NVIDIA H100 SXM", 3350.0, "NVIDIA H100 datasheet")),
    (r"A100.*80", Published("NVIDIA A100 80GB", 2039.0, "nvidia.com/en-us/data-center/a100")),
    (r"A100", Published("NVIDIA A100 40GB", 1555.0, "nvidia.com/en-us/data-center/a100")),
    (r"M1 Ultra", Published("Apple M1 Ultra", 800.0, "Apple newsroom, Mac Studio 2022")),
    (r"M1 Max", Published("Apple M1 Max", 400.0, "Apple newsroom, M1 Pro and M1 Max")),
    (r"M1 Pro", Published("Apple M1 Pro", 200.0, "Apple newsroom, M1 Pro and M1 Max")),
    (r"M1\b", Published("Apple M1", 68.25, "Apple M1 tech specs")),
    (r"M2 Ultra", Published("Apple M2 Ultra", 800.0, "Apple newsroom, M2 Ultra")),
    (r"M2 Max", Published("Apple M2 Max", 400.0, "Apple newsroom, M2 Pro and M2 Max")),
    (r"M2 Pro", Published("Apple M2 Pro", 200.0, "Apple newsroom, M2 Pro and M2 Max")),
    (r"M2\b", Published("Apple M2", 100.0, "Apple newsroom, M2")),
    (r"M3 Ultra", Published("Apple M3 Ultra", 819.0, "Apple newsroom, Mac Studio 2025")),
    (r"M3 Max", Published("Apple M3 Max", 400.0, "Apple newsroom, M3 family")),
    (r"M3 Pro", Published("Apple M3 Pro", 150.0, "Apple newsroom, M3 family")),
    (r"M3\b", Published("Apple M3", 100.0, "Apple newsroom, M3 family")),
    (r"M4 Max", Published("Apple M4 Max", 546.0, "Apple newsroom, M4 Pro and M4 Max")),
    (r"M4 Pro", Published("Apple M4 Pro", 273.0, "Apple newsroom, M4 Pro and M4 Max")),
    (r"M4\b", Published("Apple M4", 120.0, "Apple newsroom, M4")),
)


def published(device_name: str) -> Published | None:
    """The vendor's figure for a device MLX names `device_name` (None: not a device we know)."""
    for pattern, figure in PUBLISHED:
        if re.search(pattern, device_name):
            return figure
    return None


def _size_bytes(text: str) -> int | None:
    """sysfs's cache size (`48K`, `2048K`, `4M`) in bytes."""
    match = re.fullmatch(r"(\d+)([KMG]?)", text.strip())
    if match is None:
        return None
    return int(match[1]) << {"": 0, "K": 10, "M": 20, "G": 30}[match[2]]


def _sysctl_bytes(name: str) -> int | None:
    try:
        out = subprocess.run(["sysctl", "-n", name], capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return int(out.stdout) if out.returncode == 0 and out.stdout.strip().isdigit() else None


def cache_sizes(
    sysfs: Path = SYSFS_CPU, sysctl: Callable[[str], int | None] = _sysctl_bytes
) -> list[int]:
    """The CPU caches the OS reports, in bytes: Linux's sysfs (every CPU's every level), else
    macOS's sysctl (L3 on Intel Macs, the performance cores' L2 on Apple silicon); [] elsewhere."""
    sizes = []
    for path in sysfs.glob("cpu[0-9]*/cache/index[0-9]*/size"):
        try:
            size = _size_bytes(path.read_text(encoding="ascii"))
        except (OSError, UnicodeDecodeError):
            size = None
        if size:
            sizes.append(size)
    if not sizes and sys.platform == "darwin":
        sizes = [b for b in map(sysctl, MAC_CACHE_SYSCTLS) if b]
    return sizes


def cpu_probe_bytes(caches: Iterable[int], available_bytes: int) -> int:
    """The CPU probe's array: CACHE_MULTIPLE x the largest cache and at least CPU_PROBE_MIN_BYTES,
    within 1/PROBE_MEMORY_SHARE of the memory available now (a 1 MB multiple)."""
    size = max(CPU_PROBE_MIN_BYTES, CACHE_MULTIPLE * max(caches, default=0))
    return max(1 << 20, min(size, available_bytes // PROBE_MEMORY_SHARE)) >> 20 << 20


@dataclass(frozen=True)
class Measured:
    """The device's limit: GB/s reading (a reduction) and copying (read + write), the best the
    probes of `probe_bytes` reached; `probed_at_s` the latest probe's time (Unix s)."""

    read_gb_s: float
    copy_gb_s: float
    probe_bytes: int
    reps: int
    probed_at_s: float = 0.0

    def needs_probe(self, now_s: float, probe_bytes: int) -> bool:
        """Probe again: the latest probe is older than PROBE_STALE_S, or smaller than a probe
        now would be (it may have read a cache)."""
        return now_s - self.probed_at_s > PROBE_STALE_S or self.probe_bytes < probe_bytes

    def merged(self, fresh: Measured) -> Measured:
        """This limit after a `fresh` probe: never lower than either (a probe on a busy device
        reads low), unless this one was smaller (a cache's figure, not the memory's)."""
        if self.probe_bytes < fresh.probe_bytes:
            return fresh
        return Measured(
            max(self.read_gb_s, fresh.read_gb_s),
            max(self.copy_gb_s, fresh.copy_gb_s),
            fresh.probe_bytes,
            fresh.reps,
            fresh.probed_at_s,
        )


@dataclass(frozen=True)
class LimitCheck:
    """A run's measured read limit against the most any of its steps read (GB/s over the
    necessary bytes, the median over rounds). A step cannot read main memory faster than the
    limit, so above it the step was served (in part) from a cache (or the probe ran while the
    device was busy): MBU against memory bandwidth is then no figure, not over 100%."""

    limit_gb_s: float
    reached_gb_s: float

    @property
    def contradicted(self) -> bool:
        return self.reached_gb_s > self.limit_gb_s


def probe(probe_bytes: int, reps: int = PROBE_REPS, budget_s: float = PROBE_BUDGET_S) -> Measured:
    """Time float32 reductions over `probe_bytes` (its rows of ROW_FLOATS summed down the rows,
    and on a GPU the whole array to one number too: MLX's CPU reads the first 1.8x as fast, its
    SIMD across columns) and a copy of its first half (read one half, write another: the same bytes moved and touched)
    on MLX's default device, `reps` times each or fewer once `budget_s` is spent (two at least);
    the best time of each gives the limit (what the device reached)."""
    import mlx.core as mx

    n = probe_bytes // (4 * ROW_FLOATS) * ROW_FLOATS
    a = mx.ones((n,), dtype=mx.float32)  # written whole (arange took 1.6x as long on the CPU)
    half = a[: n // 2]
    mx.eval(a)
    size = n * 4

    def best_s(run: Callable[[], mx.array]) -> float:
        times: list[float] = []  # the first run is the warm-up too: the best of all drops it
        while len(times) < reps and (len(times) < 2 or sum(times) < budget_s):
            start = time.perf_counter_ns()
            mx.eval(run())
            times.append((time.perf_counter_ns() - start) / 1e9)
        return min(times)

    rows = a.reshape(-1, ROW_FLOATS)  # (n / ROW_FLOATS, ROW_FLOATS)
    read = best_s(lambda: mx.sum(rows, axis=0))
    if mx.default_device() != mx.cpu:  # on a GPU the whole-array sum may be the faster
        read = min(read, best_s(lambda: mx.sum(a)))
    copy = best_s(lambda: half + 1)
    return Measured(size / read / 1e9, size / copy / 1e9, size, reps, time.time())


def effective_gb_s(step_ms: Interval, step_bytes: int) -> Interval | None:
    """Bytes over time per round, as GB/s (the ends of the time interval swap)."""
    return step_ms.reciprocal(step_bytes / 1e6)


def utilisation(step_ms: Interval, step_bytes: int, limit_gb_s: float) -> Interval | None:
    """MBU: effective GB/s over the limit, a fraction (None where no time or no limit is known)."""
    rate = effective_gb_s(step_ms, step_bytes)
    if rate is None or not limit_gb_s > 0:
        return None
    return rate.scaled(1 / limit_gb_s)


@dataclass(frozen=True)
class StepBandwidth:
    """What a run's estimates need to say how much bandwidth each step used: the target model's
    byte census and the device's measured read limit."""

    census: ModelBytes
    limit_gb_s: float

    def step_bytes(self, context: int, widths: list[int]) -> dict[str, dict[str, int]]:
        """Per width (a string key, as JSON keeps it): the step's bytes at `context`."""
        return {str(w): self.census.step(w, context).to_dict() for w in widths}

    def rows(self, context: int, step_ms_rows: list[EstimateRow]) -> list[EstimateRow]:
        """For each step_ms row of an estimate: effective GB/s and MBU over the fewest bytes the
        step must read, and MBU over the most (routing unrecorded: `mbu` .. `mbu_most`), each a
        row of the same shape with the interval from the same rounds."""
        out = []
        for row in step_ms_rows:
            ms = row.interval
            needed = self.census.step(row.width, context).total
            rate = effective_gb_s(ms, needed.low)
            figures = {
                Quantity.GB_S: rate,
                Quantity.MBU: utilisation(ms, needed.low, self.limit_gb_s),
                Quantity.MBU_MOST: utilisation(ms, needed.high, self.limit_gb_s),
            }
            for quantity, iv in figures.items():
                if iv is not None:
                    out.append(EstimateRow.of(quantity, row.arm, row.width, iv))
        return out
