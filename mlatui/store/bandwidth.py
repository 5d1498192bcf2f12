"""The device's measured bandwidth limit, kept beside the calibration (one JSON file per device
in the user's cache folder), with the vendor's figure where known. A run's start probes again
when the kept probe is a day old or smaller than a probe past today's caches would be, and keeps
the best of both (mlatui.measure.bandwidth.Measured.merged). A step faster than the limit is
cache-served, not memory: it is shown as such and never stored."""

from __future__ import annotations

import dataclasses
import json
import os
import time
from pathlib import Path
from typing import Any

from mlatui.measure.bandwidth import (
    GPU_PROBE_BYTES,
    Measured,
    cache_sizes,
    cpu_probe_bytes,
    probe,
    published,
)
from mlatui.store.calibration import cache_dir, device_key


def bandwidth_path(env: dict[str, Any]) -> Path:
    return cache_dir() / "bandwidth" / f"{device_key(env)}.json"


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
    """Written whole then renamed: a reader never sees half a file (ranks share the folder)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    part = path.with_name(f"{path.name}.{os.getpid()}.part")
    text = json.dumps({**dataclasses.asdict(measured), "device": device_key(env)}, indent=2)
    part.write_text(text + "\n", encoding="utf-8")
    part.replace(path)


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
