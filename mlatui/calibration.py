"""Measured absorbed/materialised crossovers, stored per device and MLA geometry.

`mlatui calibrate` writes them; `patch_model(threshold="calibrated")` reads them through
`load_crossovers`. One JSON file per device in the user's cache folder:
{geometry key: {"crossovers": {context: max absorbed width}, "family": ..., "env": ...}}.
"""

from __future__ import annotations

import json
import os
import re
import statistics
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

CACHE_ENV = "MLATUI_CACHE_DIR"  # overrides platformdirs (tests, CI)


def cache_dir() -> Path:
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    import platformdirs

    return Path(platformdirs.user_cache_dir("mlatui"))


def device_key(env: dict[str, Any] | None = None) -> str:
    if env is None:
        from mlatui.records import environment

        env = environment()
    raw = f"{env.get('backend')}-{env.get('device_name')}"
    if env.get("backend") == "cpu":
        raw += "-" + ("openblas" if str(env.get("blas", "")).startswith("openblas") else "refblas")
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", raw).strip("_")


def calibration_path(env: dict[str, Any] | None = None) -> Path:
    return cache_dir() / "calibration" / f"{device_key(env)}.json"


def _read(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def load_crossovers(geometry, env: dict[str, Any] | None = None) -> dict[int, int] | None:
    """context -> max absorbed width measured on this device for `geometry` (an mla.Geometry), or None."""
    entry = _read(calibration_path(env)).get(geometry.key)
    if not entry or not entry.get("crossovers"):
        return None
    return {int(t): int(w) for t, w in entry["crossovers"].items()}


def save_crossovers(geometry, crossovers: dict[int, int], family: str, env: dict[str, Any]) -> Path:
    path = calibration_path(env)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = _read(path)
    data[geometry.key] = {
        "crossovers": {str(t): int(w) for t, w in sorted(crossovers.items())},
        "family": family,
        "num_heads": geometry.num_heads,
        "env": env,
    }
    path.write_text(json.dumps(data, indent=2) + "\n")
    return path


def find_crossover(
    faster: Callable[[int], bool], max_width: int, progress: Callable[[str], None] = lambda s: None
) -> int:
    """Largest width in [1, max_width] where `faster(width)` (absorbed beats materialised), by
    bisection: assumes absorbed wins at 1 on a warm cache and the win region is contiguous."""
    if faster(max_width):
        return max_width
    lo, hi = 1, max_width
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if faster(mid):
            lo = mid
        else:
            hi = mid
    return lo


def calibrate(
    family: str,
    contexts: Sequence[int],
    reps: int = 5,
    max_width: int = 2048,
    size: str = "full",
    bits: int | None = None,
    progress: Callable[[str], None] = lambda s: None,
) -> tuple[Any, dict[int, int], dict[int, list[tuple[int, float, float]]]]:
    """Forced-branch timing of one attention layer; returns (geometry, crossovers, probes)."""
    from mlatui import attnbench

    arms = attnbench.forced_arms(family, size, bits)
    crossovers, probes = {}, {}
    for context in contexts:
        cache = attnbench.random_cache(arms.absorbed, context)
        probes[context] = []

        def faster(width: int, context=context, cache=cache) -> bool:
            s = attnbench.time_forced(arms, cache, width, reps)
            a, m = statistics.median(s["absorbed"]), statistics.median(s["materialised"])
            probes[context].append((width, a, m))
            progress(f"T={context} L={width}: absorbed {a:.2f} ms, materialised {m:.2f} ms")
            return a < m

        crossovers[context] = find_crossover(faster, max_width)
        del cache
    return arms.geometry, crossovers, probes
