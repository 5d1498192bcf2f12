"""The device's measured bandwidth limit, kept beside the calibration (one JSON file per device
in the user's cache folder), with the vendor's figure where known. A run's start probes again
when the kept probe is a day old or a run's step read faster than it (the probe is cheap: 0.2 s
on the 2-core CPU), and keeps the best of all (mlatui.measure.bandwidth.Measured.merged)."""

from __future__ import annotations

import dataclasses
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mlatui.measure.bandwidth import (
    CPU_PROBE_BYTES,
    GPU_PROBE_BYTES,
    Measured,
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
            float(data.get("reached_gb_s", 0.0)),
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


def _probe_size(env: dict[str, Any]) -> int:
    size = CPU_PROBE_BYTES if env.get("backend") == "cpu" else GPU_PROBE_BYTES
    return min(size, int(env.get("device_memory_bytes") or size) // 16)


def measured_limit(env: dict[str, Any], now_s: float | None = None) -> Measured:
    """This device's limit, probed now (a second or two) where none is kept, the kept one is
    stale or a run contradicted it; merged with the kept one and stored."""
    path = bandwidth_path(env)
    found = _stored(path)
    now_s = time.time() if now_s is None else now_s
    if found is not None and not found.needs_probe(now_s):
        return found
    fresh = dataclasses.replace(probe(_probe_size(env)), probed_at_s=now_s)
    measured = fresh if found is None else found.merged(fresh)
    _store(path, measured, env)
    return measured


def kept_limit(env: dict[str, Any]) -> Measured:
    """The limit as kept (the run's header probed it at the start), without probing again
    mid-run: a step noted above it changes the next run's limit, not this one's."""
    return _stored(bandwidth_path(env)) or measured_limit(env)


def reached_recorder(env: dict[str, Any]) -> Callable[[float], None]:
    """`note_reached` for a run's StepBandwidth: keeps the most a step read above the limit in
    the device's file (written only when it rises), so the next run's start probes again and its
    limit is never below what this run reached."""
    most = [0.0]

    def note(gb_s: float) -> None:
        if gb_s <= most[0]:
            return
        most[0] = gb_s
        path = bandwidth_path(env)
        found = _stored(path)
        if found is not None and gb_s > max(found.read_gb_s, found.reached_gb_s):
            _store(path, dataclasses.replace(found, reached_gb_s=gb_s), env)

    return note


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
