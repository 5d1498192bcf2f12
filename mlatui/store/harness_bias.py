"""The harness's own bias, measured by A/A (null) runs and remembered per device and scenario.

An A/A run gives both arms the same variant, so every paired stock/patched ratio it measures
should be 1; what it measures instead is the harness's bias. `summarise` turns a null run's final
estimates into one figure (the largest |median - 1| over every pass, context and width, with
whether every CI contains 1); `store` keeps it in the user's cache folder; `lookup` hands the last
one for this device and scenario to the next run's header, which shows it beside the verdicts.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import msgspec

from mlatui.stream.events import Estimate
from mlatui.stream.run_settings import HarnessBias, RunSettings


def summarise(finals: Iterable[Estimate]) -> dict[str, Any] | None:
    cells = []
    for e in finals:
        for row in e.rows:
            if row["quantity"] == "ratio":
                cells.append(
                    {
                        "phase": e.phase,
                        "context": e.context,
                        "width": row["width"],
                        "bias_pct": (row["median"] - 1) * 100,
                        "low_pct": (row["low"] - 1) * 100,
                        "high_pct": (row["high"] - 1) * 100,
                        "quads": row["n"],
                    }
                )
    if not cells:
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
        "cis_containing_zero": sum(c["low_pct"] <= 0 <= c["high_pct"] for c in cells),
        "n_cells": len(cells),
        "all_ci_contain_zero": all(c["low_pct"] <= 0 <= c["high_pct"] for c in cells),
        "cells": cells,
    }


def describe(bias: HarnessBias | None) -> str:
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


def _path(env: dict[str, Any] | None = None) -> Path:
    from mlatui.store.calibration import cache_dir, device_key

    return cache_dir() / "harness-bias" / f"{device_key(env)}.json"


def _read(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


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


def store(
    scenario: str, finals: Sequence[Estimate], env: dict[str, Any] | None = None
) -> Path | None:
    bias = summarise(finals)
    if bias is None:
        return None
    bias["measured_at"] = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    path = _path(env)
    data = _read(path)
    data[scenario] = {k: v for k, v in bias.items() if k != "cells"} | {"cells": bias["cells"]}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(data, indent=1) + "\n")
    except OSError:
        return None  # remembering is a convenience; the run's own recording has everything
    return path


def lookup(scenario: str, env: dict[str, Any] | None = None) -> HarnessBias | None:
    """The bias kept for `scenario` on this device; None where none is, or what is kept is not
    one (a broken cache folder must not stop a run)."""
    try:
        entry = _read(_path(env)).get(scenario)
        return msgspec.convert(entry, HarnessBias) if isinstance(entry, dict) else None
    except Exception:  # noqa: BLE001 - a broken cache folder must not stop a run
        return None
