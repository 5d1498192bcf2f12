"""What the engine decides once the model is loaded: the gates each arm slot runs (the plan's arms
against the installed code's state), the passes, the header's settings and the run's first log
lines; and how a run that never got that far, or failed, is still told in events."""

from __future__ import annotations

import traceback
from collections.abc import Callable
from dataclasses import dataclass

from mlatui.config.phase_kind import Pass
from mlatui.config.run_plan import RunPlan
from mlatui.config.scenario import ScenarioError
from mlatui.gate.policy import Gates
from mlatui.models.loading import Loaded, LoadError
from mlatui.run.arm_plan import RuntimeGates, arm_settings, resolve_gates, runtime_gates
from mlatui.run.arms import Variant
from mlatui.run.engine_dist import DistRun
from mlatui.run.header import header, run_settings
from mlatui.run.source_arm import SourceModels
from mlatui.stream.events import ErrorEvent, RunHeader


def pass_variants(run_pass: Pass) -> tuple[Variant, Variant]:
    """What the two arm slots run in `run_pass`."""
    a, b = run_pass.variants
    return Variant(a), Variant(b)


@dataclass(frozen=True)
class ArmSetup:
    """The arms as decided on the loaded model."""

    runtime: RuntimeGates
    gates: Gates
    sources: SourceModels
    passes: tuple[Pass, ...]


def arm_setup(plan: RunPlan, loaded: Loaded) -> ArmSetup:
    """The arms follow the runtime's state: the plan's choice, else the installed code against
    the patch (pre-fix code) or the pre-fix gate against it (fixed). Arms whose model code comes
    from another source tree are built on the loaded arrays and refused on the first parameter
    that differs, before anything is timed."""
    from mlatui.run.source_arm import build_sources, source_arms_text

    if plan.fill == "random-latents" and not loaded.random_weights:
        raise ScenarioError(
            "fill = random-latents is a timing-only fill for random weights; add --random-weights"
        )
    runtime = runtime_gates(loaded.model)
    arm_sources = dict(plan.arms.sources)
    sources = build_sources(loaded.model, arm_sources) if arm_sources else SourceModels()
    gates = resolve_gates(
        source_arms_text(plan.arms.arms, arm_sources),
        plan.arms.threshold,
        plan.arms.indexer,
        runtime,
    )
    return ArmSetup(runtime, gates, sources, plan.passes)


def header_settings(plan: RunPlan, loaded: Loaded, setup: ArmSetup) -> tuple[dict, str]:
    """The header's settings, and the key its harness bias is stored under."""
    from mlatui.run.source_arm import PREFILL_SAID, merge_source_settings
    from mlatui.store.harness_bias import bias_key, lookup

    runtime = setup.runtime
    passes = [p.tag for p in setup.passes]
    settings = run_settings(plan, loaded, setup.gates, passes)
    settings["arms"] = arm_settings(setup.gates, runtime)
    # what code each slot ran (files and their hashes), so that compare can tell two
    # recordings of different code apart; how a source arm shares the prefill
    merge_source_settings(settings["arms"], setup.sources, loaded.model)
    if setup.sources:
        settings["prefill"] = PREFILL_SAID
    settings["runtime"] = {
        "name": runtime.runtime,
        "version": runtime.version,
        "gate_forms": {cls: form.value for cls, form in runtime.forms.items()},
        "state": "fixed" if runtime.fixed else "pre-fix",
    }
    key = bias_key(plan.scenario.name, settings, loaded.name)
    bias = lookup(key)
    if bias is not None:
        settings["harness_bias"] = bias
    return settings, key


def bare_header(plan: RunPlan, dist: DistRun) -> RunHeader:
    """The header of a run that ended before its model was ready (a recording always has one)."""
    return header(plan.scenario, plan.model, None, None, {}, dist.describe())


def error_event(e: BaseException, dist: DistRun, now: Callable[[], float]) -> ErrorEvent:
    """A failure in one line: a lost rank by name, a user's mistake without a source location,
    anything else with the file and line it came from."""
    from mlatui.models.fit import FitError

    where = traceback.extract_tb(e.__traceback__)[-1]
    msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    lost = dist.failure(e)  # a rank died or hung: say which, not where we noticed
    located = not (lost or isinstance(e, (LoadError, ScenarioError, FitError)))
    return ErrorEvent(
        now(),
        lost or msg,
        f"{where.filename.rsplit('/', 1)[-1]}:{where.lineno}" if located else "",
        isinstance(e, FitError),
    )
