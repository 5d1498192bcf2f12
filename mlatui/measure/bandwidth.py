"""The device's memory bandwidth limit, two ways, and a step's use of it.

Measured: a short probe through MLX itself (a reduction over a large array reads it once; a copy
`a + 1` reads it and writes it once), the best of a few repetitions. Load from other processes
only slows a probe, so the limit is the most the device was ever seen to reach: the best over
every probe kept and every step a run timed (`Measured.merged`); a run whose step read faster than
the limit it was given contradicts that limit (`LimitCheck`), and its MBU is not a figure.
Published: the vendors' figures for the devices this project runs on. Model bandwidth utilisation (MBU) is a step's
necessary bytes over its time, against the limit; a step's time interval gives the figure's
interval from the same rounds (bytes are fixed per context and width, so the ends swap).
mlx is imported inside `probe` only: the rest is read by the printers on machines without it.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mlatui.measure.byte_census import ModelBytes
from mlatui.stream.interval import Interval

CPU_PROBE_BYTES = 32 << 20
GPU_PROBE_BYTES = 1 << 30
PROBE_REPS = 5
PROBE_STALE_S = 24 * 3600.0  # a day: a probe is cheap (0.2 s on the 2-core CPU), and can only raise


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


@dataclass(frozen=True)
class Measured:
    """The device's limit: GB/s reading (a reduction) and copying (read + write), the best the
    probes reached; `probed_at_s` the latest probe's time (Unix s); `reached_gb_s` the most a
    run's step read above the limit since then (folded in at the next probe)."""

    read_gb_s: float
    copy_gb_s: float
    probe_bytes: int
    reps: int
    probed_at_s: float = 0.0
    reached_gb_s: float = 0.0

    def needs_probe(self, now_s: float) -> bool:
        """Probe again: the latest probe is older than PROBE_STALE_S, or a run contradicted it."""
        return now_s - self.probed_at_s > PROBE_STALE_S or self.reached_gb_s > self.read_gb_s

    def merged(self, fresh: Measured) -> Measured:
        """This limit after a `fresh` probe: never lower than either probe, nor than what a run
        reached (a probe on a busy device reads low; a fast step is a reading too)."""
        return Measured(
            max(self.read_gb_s, fresh.read_gb_s, self.reached_gb_s),
            max(self.copy_gb_s, fresh.copy_gb_s),
            fresh.probe_bytes,
            fresh.reps,
            fresh.probed_at_s,
        )


@dataclass(frozen=True)
class LimitCheck:
    """A run's measured read limit against the most any of its steps read (GB/s over the
    necessary bytes, the median over rounds). A step cannot read faster than the device's limit,
    so above it the limit is contradicted (a probe taken while the device was busy, or a model
    small enough to be served from cache) and MBU against it is unknown, not over 100%."""

    limit_gb_s: float
    reached_gb_s: float

    @property
    def contradicted(self) -> bool:
        return self.reached_gb_s > self.limit_gb_s


def probe(probe_bytes: int, reps: int = PROBE_REPS) -> Measured:
    """Time a float32 reduction and a copy over `probe_bytes` on MLX's default device, `reps`
    times each after a warm-up; the best time of each gives the limit (what the device reached)."""
    import mlx.core as mx

    n = probe_bytes // 4
    a = mx.arange(n, dtype=mx.float32)
    mx.eval(a)
    size = n * 4

    def best_s(run: Callable[[], mx.array]) -> float:
        mx.eval(run())
        times = []
        for _ in range(reps):
            start = time.perf_counter_ns()
            mx.eval(run())
            times.append((time.perf_counter_ns() - start) / 1e9)
        return min(times)

    read = best_s(lambda: mx.sum(a))
    copy = best_s(lambda: a + 1)
    return Measured(size / read / 1e9, 2 * size / copy / 1e9, size, reps, time.time())


def effective_gb_s(step_ms: Interval, step_bytes: int) -> Interval | None:
    """Bytes over time per round, as GB/s (the ends of the time interval swap)."""
    return step_ms.reciprocal(step_bytes / 1e6)


def utilisation(step_ms: Interval, step_bytes: int, limit_gb_s: float) -> Interval | None:
    """MBU: effective GB/s over the limit, a fraction (None where no time or no limit is known)."""
    rate = effective_gb_s(step_ms, step_bytes)
    if rate is None or not limit_gb_s > 0:
        return None
    return rate.scaled(1 / limit_gb_s)


BANDWIDTH_QUANTITIES = ("gb_s", "mbu", "mbu_most")


@dataclass(frozen=True)
class StepBandwidth:
    """What a run's estimates need to say how much bandwidth each step used: the target model's
    byte census and the device's measured read limit; `note_reached` is told of a step that read
    faster than the limit (the store keeps it, and the next run probes again)."""

    census: ModelBytes
    limit_gb_s: float
    note_reached: Callable[[float], None] | None = None

    def step_bytes(self, context: int, widths: list[int]) -> dict[str, dict[str, int]]:
        """Per width (a string key, as JSON keeps it): the step's bytes at `context`."""
        return {str(w): self.census.step(w, context).to_dict() for w in widths}

    def rows(self, context: int, step_ms_rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """For each step_ms row of an estimate: effective GB/s and MBU over the fewest bytes the
        step must read, and MBU over the most (routing unrecorded: `mbu` .. `mbu_most`), each a
        row of the same shape with the interval from the same rounds."""
        out = []
        for row in step_ms_rows:
            ms = Interval(row["median"], row["low"], row["high"], row["n"])
            needed = self.census.step(row["width"], context).total
            rate = effective_gb_s(ms, needed.low)
            if rate is not None and self.note_reached is not None:
                if LimitCheck(self.limit_gb_s, rate.median).contradicted:
                    self.note_reached(rate.median)
            figures = {
                "gb_s": rate,
                "mbu": utilisation(ms, needed.low, self.limit_gb_s),
                "mbu_most": utilisation(ms, needed.high, self.limit_gb_s),
            }
            for quantity, iv in figures.items():
                if iv is not None:
                    out.append(
                        {
                            "quantity": quantity,
                            "arm": row["arm"],
                            "width": row["width"],
                            "median": iv.median,
                            "low": iv.low,
                            "high": iv.high,
                            "n": iv.n,
                        }
                    )
        return out
