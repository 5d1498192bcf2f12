"""The device's measured bandwidth limit, probed once per device and kept beside the calibration
(one JSON file per device in the user's cache folder), with the vendor's figure where known."""

from __future__ import annotations

import json
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
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None  # missing or unreadable: measured again


def measured_limit(env: dict[str, Any]) -> Measured:
    """This device's probe, from the store or measured now (a second or two) and stored."""
    path = bandwidth_path(env)
    found = _stored(path)
    if found is not None:
        return found
    size = CPU_PROBE_BYTES if env.get("backend") == "cpu" else GPU_PROBE_BYTES
    size = min(size, int(env.get("device_memory_bytes") or size) // 16)
    measured = probe(size)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        json.dumps({**measured.__dict__, "device": device_key(env)}, indent=2) + "\n",
        encoding="utf-8",
    )
    return measured


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
