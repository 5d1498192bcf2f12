"""The run header, the self-describing first record of every recording (machine, versions,
model geometry, thresholds, scenario, settings, and the distributed world when there is one)."""

from __future__ import annotations

import datetime as dt
import platform

from mlatui.config.run_plan import RunPlan
from mlatui.config.scenario import Scenario
from mlatui.gate import mla
from mlatui.gate.policy import FormulaPolicy, Gates, stored_crossovers
from mlatui.measure.timing import timed_gc_paused
from mlatui.models.loading import NO_DRAFT, DraftKind, Loaded
from mlatui.run.arms import arm_cpus, cache_rounds
from mlatui.store.bandwidth import device_bandwidth
from mlatui.stream.events import SCHEMA_VERSION, RunHeader

HEADER_CONTEXTS = (512, 1024, 2048, 4096, 8192, 16384, 32768, 131072)


def header(
    scenario: Scenario,
    model_ref: str | None,
    loaded: Loaded | None,
    report: mla.PatchReport | None,
    settings: dict,
    distributed: dict | None = None,
) -> RunHeader:
    from mlatui import __version__
    from mlatui.measure.records import environment

    env = environment()
    geometry, thresholds = (
        _geometry(scenario, report) if loaded is not None and report is not None else ({}, {})
    )
    device = {
        "name": env["device_name"],
        "architecture": env["architecture"],
        "backend": env["backend"],
        "memory_bytes": env["device_memory_bytes"],
        "blas": env["blas"],
        "blas_threading": env["blas_threading"],
        "cpu_count": env["cpu_count"],
        "bandwidth": device_bandwidth(env),
    }
    return RunHeader(
        SCHEMA_VERSION,
        __version__,
        env["mlx"],
        env["mlx_lm"],
        platform.python_version(),
        env["platform"],
        device,
        loaded.name if loaded else (model_ref or "embedded"),
        loaded.model_type if loaded else "?",
        geometry,
        thresholds,
        scenario.to_dict(),
        loaded.draft_label if loaded else NO_DRAFT.label,
        bool(loaded and (loaded.random_weights or loaded.draft.kind is DraftKind.SYNTHETIC)),
        dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        settings,
        distributed or {},
    )


def _geometry(scenario: Scenario, report: mla.PatchReport) -> tuple[dict, dict]:
    """The patched MLA geometry and its thresholds: the formula's, at the usual contexts and the
    scenario's, and this device's calibrated crossovers where one is stored."""
    if report.geometry is None:
        return {}, {}
    g = report.geometry
    geometry = {
        "kv_lora_rank": g.kv_lora_rank,
        "qk_nope_head_dim": g.qk_nope_head_dim,
        "v_head_dim": g.v_head_dim,
        "num_heads": g.num_heads,
        "num_mla_layers": len(report.modules),
    }
    try:
        calibrated = stored_crossovers(g)
    except Exception:  # noqa: BLE001 - calibration is optional
        calibrated = None
    thresholds = {
        "policy": report.policy,
        "formula_inf": FormulaPolicy().limit(g),  # whatever the patched slot runs
        "formula_at": {
            str(t): FormulaPolicy().limit(g, t)
            for t in sorted({*HEADER_CONTEXTS, *(c for p in scenario.phases for c in p.contexts)})
        },
        "calibrated": {str(k): v for k, v in calibrated.items()} if calibrated else None,
    }
    return geometry, thresholds


def run_settings(plan: RunPlan, loaded: Loaded, gates: Gates, passes: list[str]) -> dict:
    """The header's `settings`: every choice that shapes the figures (and keys the harness bias),
    and the run's plan as resolved before anything loaded (`plan`)."""
    return {
        "threshold": str(gates.threshold),
        "indexer": gates.indexer.value,
        "null": plan.null,
        "passes": passes,
        "fill": plan.fill,
        "settle": plan.settle,
        "cache_rounds": cache_rounds().value,
        "timed_gc": "on" if not timed_gc_paused() else "paused",
        "seed": plan.seed_offset,
        "overrides": plan.to_dict()["overrides"],
        "random_weights": loaded.random_weights,
        "arm_threads": "shared" if plan.shared_arm_thread else "one per arm",
        "arm_cpus": sorted(arm_cpus() or []),
        "draft_kinds": [d.kind.value for d in loaded.draft_kinds],
        **({"mtp_missing": loaded.mtp_missing} if loaded.mtp_missing else {}),
        "plan": plan.to_dict(),
    }
