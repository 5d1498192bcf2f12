"""Use a fast system BLAS with the `mlx-cpu` wheel when one is installed.

The wheel bundles netlib's reference BLAS (fp32 matmul ~5 GFLOP/s). Loading a system
OpenBLAS with RTLD_GLOBAL *before* `mlx.core` is imported makes libmlx resolve its
`cblas_*` symbols there instead (measured 4 -> 155 GFLOP/s on a 2-core VM).
Nothing here imports mlx.
"""

from __future__ import annotations

import ctypes
import os
import sys

OPENBLAS_DIRS = (
    "/usr/lib/x86_64-linux-gnu/openblas-pthread",
    "/usr/lib/aarch64-linux-gnu/openblas-pthread",
    "/usr/lib64/openblas-pthread",
    "/usr/lib/openblas-pthread",
)
_preloaded: str | None = None


def preload_fast_blas() -> str | None:
    """Preload OpenBLAS if present and mlx is not imported yet. Returns the path or None."""
    global _preloaded
    if _preloaded or not sys.platform.startswith("linux"):
        return _preloaded
    if os.environ.get("MLATUI_BLAS", "").lower() in ("reference", "bundled", "off"):
        return None
    if "mlx.core" in sys.modules:
        return None
    for folder in OPENBLAS_DIRS:
        blas = os.path.join(folder, "libblas.so.3")
        if os.path.exists(blas):
            try:
                ctypes.CDLL(blas, mode=ctypes.RTLD_GLOBAL)
                lapack = os.path.join(folder, "liblapack.so.3")
                if os.path.exists(lapack):
                    ctypes.CDLL(lapack, mode=ctypes.RTLD_GLOBAL)
            except OSError:
                continue
            _preloaded = blas
            return blas
    return None


def blas_in_use() -> str:
    """Which BLAS this process resolved: 'openblas (<path>)', 'bundled reference BLAS', 'accelerate' or 'n/a'."""
    if sys.platform == "darwin":
        return "accelerate"
    try:
        with open("/proc/self/maps") as f:
            libs = {line.split()[-1] for line in f if "blas" in line.lower() and "/" in line}
    except OSError:
        return "unknown"
    system = sorted(p for p in libs if "openblas" in p or p.startswith("/usr/"))
    if _preloaded or system:
        return f"openblas ({_preloaded or system[0]})"
    if any("mlx_cpu.libs" in p for p in libs):
        return "bundled reference BLAS (slow; apt-get install libopenblas0-pthread)"
    return "n/a"
