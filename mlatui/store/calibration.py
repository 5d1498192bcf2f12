"""Measured absorbed/materialised crossovers, stored per device and MLA geometry.

`mlatui calibrate` measures them (mlatui/bench/attention.py) and writes them;
`gate.policy.CalibratedPolicy` (threshold = "calibrated") reads them through `load_crossovers`,
once per geometry. One JSON file per device in the user's cache folder: {geometry key:
{"crossovers": {context: max absorbed width}, "family": ..., "dtype": ..., "bits": ...,
"env": ...}}.
"""

from __future__ import annotations

import json
import os
import re
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from mlatui.config.values import is_positive_int


class StoredGeometry(Protocol):
    """What the store reads of a gate.policy.Geometry (the store sits below the gate)."""

    @property
    def key(self) -> str: ...

    @property
    def num_heads(self) -> int: ...


CACHE_ENV = "MLATUI_CACHE_DIR"  # overrides platformdirs (tests, CI)


def cache_dir() -> Path:
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    import platformdirs

    return Path(platformdirs.user_cache_dir("mlatui"))


def blas_key(blas: str) -> str:
    """The BLAS a CPU's crossovers were measured with (host.blas.blas_in_use's label): they
    differ by an order of magnitude between the bundled reference BLAS and a tuned one."""
    for tuned in ("openblas", "accelerate"):
        if blas.startswith(tuned):
            return tuned
    return "refblas"


def device_key(env: dict[str, Any] | None = None) -> str:
    if env is None:
        from mlatui.measure.records import environment

        env = environment()
    raw = f"{env.get('backend')}-{env.get('device_name')}"
    if env.get("backend") == "cpu":
        raw += "-" + blas_key(str(env.get("blas", "")))
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", raw).strip("_")


def calibration_path(env: dict[str, Any] | None = None) -> Path:
    return cache_dir() / "calibration" / f"{device_key(env)}.json"


def _read(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


class CalibrationWarning(UserWarning):
    """A calibration file (or entry) that was ignored or partly ignored; it names the file."""


ENTRY_KEYS = ("crossovers", "family", "num_heads", "dtype", "bits", "rounds_per_probe", "env")
GEOMETRY_KEY = re.compile(r"^r[1-9][0-9]*-n[1-9][0-9]*-v[1-9][0-9]*$")


def _int_text(text: Any) -> int | None:
    try:
        value = int(str(text))
    except ValueError:
        return None
    return value if value > 0 and str(value) == str(text) else None


def entry_problems(entry: Any, file_device: str) -> list[str]:
    """Why a stored entry cannot be used on this device (empty: it can)."""
    if not isinstance(entry, dict):
        return [f"the entry is a {type(entry).__name__}, not a table"]
    problems = []
    env = entry.get("env")
    if env is not None:
        if not isinstance(env, dict):
            problems.append("'env' is not a table")
        elif device_key(env) != file_device:
            problems.append(f"it was measured on another device ({device_key(env)})")
    heads = entry.get("num_heads")
    if heads is not None and not is_positive_int(heads):
        problems.append(f"'num_heads' {heads!r} is not a positive integer")
    crossovers = entry.get("crossovers")
    if not isinstance(crossovers, dict) or not crossovers:
        problems.append("'crossovers' must be a non-empty table {context: max absorbed width}")
        return problems
    for context, width in crossovers.items():
        if _int_text(context) is None:
            problems.append(f"context {context!r} is not a positive integer")
        if not is_positive_int(width):
            problems.append(f"crossover {width!r} at context {context} is not a positive integer")
    return problems


def _warn(path: Path, what: str) -> None:
    warnings.warn(f"{path}: {what}", CalibrationWarning, stacklevel=3)


def load_crossovers(
    geometry: StoredGeometry, env: dict[str, Any] | None = None
) -> dict[int, int] | None:
    """context -> max absorbed width measured on this device for `geometry` (an mla.Geometry), or
    None. A file or entry that cannot be used is reported (a CalibrationWarning naming the file)
    and ignored: the caller falls back to the formula."""
    path = calibration_path(env)
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as e:
        _warn(path, f"unreadable calibration file ({type(e).__name__}: {e}); using the formula")
        return None
    if not isinstance(data, dict):
        _warn(
            path, f"a calibration file holds a table, got {type(data).__name__}; using the formula"
        )
        return None
    unknown = [k for k in data if not GEOMETRY_KEY.match(str(k))]
    if unknown:
        _warn(path, f"unknown keys ignored (not geometry keys like r512-n128-v128): {unknown}")
    entry = data.get(geometry.key)
    if entry is None:
        return None
    extra = sorted(set(entry) - set(ENTRY_KEYS)) if isinstance(entry, dict) else []
    if extra:
        _warn(path, f"{geometry.key}: unknown keys ignored: {', '.join(map(str, extra))}")
    problems = entry_problems(entry, path.stem)
    if problems:
        _warn(path, f"{geometry.key}: ignored ({'; '.join(problems)}); using the formula")
        return None
    return {int(t): int(w) for t, w in entry["crossovers"].items()}


@dataclass(frozen=True)
class ProbedIn:
    """What crossovers were measured in: the layer's dtype, its quantisation (None: the weights
    were not quantised) and the sampler rounds per probe (None: not recorded)."""

    dtype: str | None = None
    bits: int | None = None
    rounds: int | None = None


def save_crossovers(
    geometry: StoredGeometry,
    crossovers: dict[int, int],
    family: str,
    env: dict[str, Any],
    probed: ProbedIn = ProbedIn(),
) -> Path:
    """Store the crossovers with what they were measured in."""
    path = calibration_path(env)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = _read(path)
    data[geometry.key] = {
        "crossovers": {str(t): int(w) for t, w in sorted(crossovers.items())},
        "family": family,
        "num_heads": geometry.num_heads,
        "dtype": probed.dtype,
        "bits": probed.bits,
        "rounds_per_probe": probed.rounds,
        "env": env,
    }
    path.write_text(json.dumps(data, indent=2) + "\n")
    return path
