"""Benchmark records, llama-bench style: one record type and the environment it was measured in
(printed through mlatui.views.mdtable).

Every record carries the machine, versions and settings that produced it, and its raw samples
beside the median, so a table can always be traced back to what was measured.
"""

from __future__ import annotations

import platform
import sys
from dataclasses import asdict, dataclass, field
from typing import Any

from mlatui.measure.timing import Stats


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
