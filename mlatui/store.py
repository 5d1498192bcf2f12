"""What mlatui remembers per device between runs: one JSON file per device and kind in the user's
cache folder (`MLATUI_CACHE_DIR` overrides it), each written whole, then renamed, so a reader
(ranks share the folder) never sees half a file.

- Calibrated crossovers, per MLA geometry: `mlatui calibrate` measures them
  (mlatui/bench/attention.py) and `save_crossovers` keeps them; `gate.policy.CalibratedPolicy`
  (threshold = "calibrated") reads them through `load_crossovers`, once per geometry: {geometry
  key: {"crossovers": {context: max absorbed width}, "family": ..., "dtype": ..., "bits": ...,
  "env": ...}}.
- The harness's own bias, per scenario, measured by A/A (null) runs: both arms run the same
  variant, so every paired stock/patched ratio should be 1; what it measures instead is the
  harness's bias. `summarise_bias` turns a null run's final estimates into one figure (the largest
  |median - 1| over every pass, context and width, with whether every CI contains 1),
  `store_bias` keeps it and `kept_bias` hands the last one for this device and scenario to the
  next run's header, which shows it beside the verdicts.
- The device's measured bandwidth limit, with the vendor's figure where known. A run's start
  probes again when the kept probe is a day old or smaller than a probe past today's caches would
  be, and keeps the best of both (mlatui.measure.bandwidth.Measured.merged). A step faster than
  the limit is cache-served, not memory: it is shown as such and never stored.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import re
import time
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import msgspec

from mlatui.config.model_inputs import is_positive_int
from mlatui.measure.bandwidth import (
    GPU_PROBE_BYTES,
    Measured,
    cache_sizes,
    cpu_probe_bytes,
    probe,
    published,
)
from mlatui.measure.estimates import judge_estimates
from mlatui.stream.events import Estimate
from mlatui.stream.phase_rows import Quantity
from mlatui.stream.run_settings import HarnessBias, RunSettings

# ---- the folder, the device's key, a file read and written whole ------------------------------

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


def device_file(kind: str, env: dict[str, Any] | None = None) -> Path:
    """This device's file of `kind` ("calibration", "harness-bias", "bandwidth")."""
    return cache_dir() / kind / f"{device_key(env)}.json"


def _read(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _write_whole(path: Path, text: str) -> None:
    """Written whole then renamed: a reader never sees half a file (ranks share the folder)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    part = path.with_name(f"{path.name}.{os.getpid()}.part")
    part.write_text(text + "\n", encoding="utf-8")
    part.replace(path)


# ---- calibrated crossovers --------------------------------------------------------------------


class StoredGeometry(Protocol):
    """What the store reads of a gate.policy.Geometry (the store sits below the gate)."""

    @property
    def key(self) -> str: ...

    @property
    def num_heads(self) -> int: ...


def calibration_path(env: dict[str, Any] | None = None) -> Path:
    return device_file("calibration", env)


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
    _write_whole(path, json.dumps(data, indent=2))
    return path


# ---- the harness's bias ----------------------------------------------------------------------


def summarise_bias(finals: Iterable[Estimate]) -> dict[str, Any] | None:
    finals = list(finals)
    cells: list[dict[str, Any]] = []
    for e in finals:
        for row in e.rows:
            if row.quantity == Quantity.RATIO:
                cells.append(
                    {
                        "phase": e.phase,
                        "context": e.context,
                        "width": row.width,
                        "bias_pct": (row.median - 1) * 100,
                        "low_pct": (row.low - 1) * 100,
                        "high_pct": (row.high - 1) * 100,
                        "quads": row.n,
                    }
                )
    judged = judge_estimates(finals)  # the cells' CIs, counted as the verdict strip counts them
    if judged is None:
        return None
    # The headline is the L = 1 control (the most quads, the tightest CIs); wider widths, with
    # a quarter of the quads, are kept beside it as "worst" and in the cells.
    control = [c for c in cells if c["width"] == 1] or cells
    headline = max(control, key=lambda c: abs(c["bias_pct"]))
    worst = max(cells, key=lambda c: abs(c["bias_pct"]))
    return {
        "max_abs_bias_pct": abs(headline["bias_pct"]),
        "at": headline,
        "worst": worst,
        "cis_containing_zero": judged.cells - judged.excluded,
        "n_cells": judged.cells,
        "all_ci_contain_zero": judged.excluded == 0,
        "cells": cells,
    }


def describe_bias(bias: HarnessBias | None) -> str:
    """'harness bias ±0.4% at L=1 (A/A 2026-12-01, 24/24 CIs contain 1)' or '': the A/B ratios'
    CIs, as the A/A verdict counts them (a bias of 0% is a ratio of 1)."""
    if bias is None:
        return ""
    n, k = bias.n_cells, bias.cis_containing_zero
    ci = (
        f"{k}/{n} CIs contain 1"
        if n
        else ("CIs contain 1" if bias.all_ci_contain_zero else "some CIs exclude 1")
    )
    return f"harness bias ±{bias.max_abs_bias_pct:.1f}% at L=1 (A/A {bias.measured_at[:10]}, {ci})"


def bias_key(scenario: str, settings: RunSettings, model: str = "") -> str:
    """What a harness bias is valid for: the scenario, the model and every setting that changes
    how the arms are measured (an A/A on random latents says nothing about a real prefill)."""
    parts = [
        scenario,
        model,
        f"fill={settings.fill or 'prefill'}",
        f"threads={settings.arm_threads}",
        f"settle={settings.settles}",
        f"random={bool(settings.random_weights)}",
    ]
    return " | ".join(parts)


def store_bias(
    scenario: str, finals: Sequence[Estimate], env: dict[str, Any] | None = None
) -> Path | None:
    bias = summarise_bias(finals)
    if bias is None:
        return None
    bias["measured_at"] = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    path = device_file("harness-bias", env)
    data = _read(path)
    data[scenario] = {k: v for k, v in bias.items() if k != "cells"} | {"cells": bias["cells"]}
    try:
        _write_whole(path, json.dumps(data, indent=1))
    except OSError:
        return None  # remembering is a convenience; the run's own recording has everything
    return path


def kept_bias(scenario: str, env: dict[str, Any] | None = None) -> HarnessBias | None:
    """The bias kept for `scenario` on this device; None where none is, or what is kept is not
    one (a broken cache folder must not stop a run)."""
    try:
        entry = _read(device_file("harness-bias", env)).get(scenario)
        return msgspec.convert(entry, HarnessBias) if isinstance(entry, dict) else None
    except Exception:  # noqa: BLE001 - a broken cache folder must not stop a run
        return None


# ---- the bandwidth limit ----------------------------------------------------------------------


def bandwidth_path(env: dict[str, Any]) -> Path:
    return device_file("bandwidth", env)


def _stored(path: Path) -> Measured | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return Measured(
            float(data["read_gb_s"]),
            float(data["copy_gb_s"]),
            int(data["probe_bytes"]),
            int(data["reps"]),
            float(data.get("probed_at_s", 0.0)),
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None  # missing or unreadable: measured again


def _store(path: Path, measured: Measured, env: dict[str, Any]) -> None:
    text = json.dumps({**dataclasses.asdict(measured), "device": device_key(env)}, indent=2)
    _write_whole(path, text)


def available_bytes() -> int:
    import psutil

    return int(psutil.virtual_memory().available)


PROBE_MB_ENV = "MLATUI_PROBE_MB"  # the probe's size set by hand (the tests' child runs: 32)


def _probe_size(env: dict[str, Any]) -> int:
    """Past the CPU's caches on the CPU (mlatui.measure.bandwidth.cpu_probe_bytes), the GPU's
    fixed size there, or MLATUI_PROBE_MB; none over 1/16 of the device's memory."""
    if raw := os.environ.get(PROBE_MB_ENV, "").strip():
        if not raw.isdigit() or int(raw) == 0:
            raise ValueError(f"{PROBE_MB_ENV}={raw!r}: expected a whole number of MB, e.g. 1024")
        size = int(raw) << 20
    elif env.get("backend") == "cpu":
        size = cpu_probe_bytes(cache_sizes(), available_bytes())
    else:
        size = GPU_PROBE_BYTES
    return min(size, int(env.get("device_memory_bytes") or size) // 16)


def measured_limit(env: dict[str, Any], now_s: float | None = None) -> Measured:
    """This device's limit, probed now (a second or two) where none is kept, or the kept one is
    stale or smaller than this probe; merged with the kept one and stored."""
    path = bandwidth_path(env)
    found = _stored(path)
    now_s = time.time() if now_s is None else now_s
    size = _probe_size(env)
    if found is not None and not found.needs_probe(now_s, size):
        return found
    fresh = dataclasses.replace(probe(size), probed_at_s=now_s)
    measured = fresh if found is None else found.merged(fresh)
    _store(path, measured, env)
    return measured


def kept_limit(env: dict[str, Any]) -> Measured:
    """The limit as kept (the run's header probed it at the start), without probing again
    mid-run."""
    return _stored(bandwidth_path(env)) or measured_limit(env)


def device_bandwidth(env: dict[str, Any]) -> dict[str, Any]:
    """The header's `device.bandwidth`: the measured limit (reading, copying) and the vendor's
    figure where the device is known (None otherwise)."""
    measured = measured_limit(env)
    vendor = published(str(env.get("device_name", "")))
    return {
        "measured_read_gb_s": measured.read_gb_s,
        "measured_copy_gb_s": measured.copy_gb_s,
        "probe_bytes": measured.probe_bytes,
        "published_gb_s": vendor.gb_s if vendor else None,
        "published_name": vendor.name if vendor else None,
        "published_source": vendor.source if vendor else None,
    }
