"""What the engine decides once the model is loaded: the gates each arm slot runs (the plan's arms
against the installed code's state), the passes, the run header (the self-describing first record
of every recording: machine, versions, model geometry, thresholds, scenario, settings, and the
distributed world when there is one) and the log lines the run opens with after it (estimates,
warnings, what kind of run); how a run that never got that far, or failed, is still told in
events; and the tokens contexts are cut from (shipped text for a model with a tokenizer, else
seeded ids)."""

from __future__ import annotations

import datetime as dt
import functools
import inspect
import platform
import random
import traceback
from collections.abc import Callable
from dataclasses import dataclass

import msgspec

from mlatui.config.phase_kind import Pass
from mlatui.config.run_plan import RunPlan
from mlatui.config.scenario import Scenario, ScenarioError
from mlatui.gate import mla
from mlatui.gate.policy import THRESHOLD_CONTEXTS, FormulaPolicy, Gates, stored_crossovers
from mlatui.measure.sampler import timed_gc_paused
from mlatui.models.embedded import prompts, transformers_quiet
from mlatui.models.fit import context_warnings, largest_context
from mlatui.models.loading import NO_DRAFT, DraftKind, Loaded, LoadError, vocab_size
from mlatui.models.vlm import indexer_notices
from mlatui.run.arms import (
    PREFILL_SAID,
    RuntimeGates,
    SourceModels,
    Variant,
    arm_cpus,
    arm_settings,
    build_sources,
    cache_rounds,
    merge_source_settings,
    resolve_gates,
    runtime_gates,
    source_arms_text,
)
from mlatui.run.engine_dist import DistRun
from mlatui.run.phases.indexer import load_warnings
from mlatui.store import device_bandwidth
from mlatui.stream.events import SCHEMA_VERSION, DeviceInfo, ErrorEvent, RunHeader, Thresholds
from mlatui.stream.run_settings import (
    ArmSlot,
    BandwidthLimit,
    RunSettings,
    RuntimeRecord,
    WorldRecord,
)


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


def header_settings(plan: RunPlan, loaded: Loaded, setup: ArmSetup) -> tuple[RunSettings, str]:
    """The header's settings, and the key its harness bias is stored under."""
    from mlatui.store import bias_key, kept_bias

    runtime = setup.runtime
    settings = msgspec.structs.replace(
        run_settings(plan, loaded, setup.gates, [p.tag for p in setup.passes]),
        # what code each slot ran (files and their hashes), so that compare can tell two
        # recordings of different code apart; how a source arm shares the prefill
        arms=merge_source_settings(arm_settings(setup.gates, runtime), setup.sources, loaded.model),
        prefill=PREFILL_SAID if setup.sources else "",
        runtime=RuntimeRecord(
            name=runtime.runtime,
            version=runtime.version,
            gate_forms={cls: form.value for cls, form in runtime.forms.items()},
            state="fixed" if runtime.fixed else "pre-fix",
        ),
    )
    key = bias_key(plan.scenario.name, settings, loaded.name)
    return msgspec.structs.replace(settings, harness_bias=kept_bias(key)), key


def bare_header(plan: RunPlan, dist: DistRun) -> RunHeader:
    """The header of a run that ended before its model was ready (a recording always has one)."""
    return header(plan.scenario, plan.model, None, None, RunSettings(), dist.describe())


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


def header(
    scenario: Scenario,
    model_ref: str | None,
    loaded: Loaded | None,
    report: mla.PatchReport | None,
    settings: RunSettings,
    distributed: WorldRecord | None = None,
) -> RunHeader:
    from mlatui import __version__
    from mlatui.measure.records import environment

    env = environment()
    geometry, thresholds = (
        _geometry(scenario, report)
        if loaded is not None and report is not None
        else ({}, Thresholds())
    )
    device = DeviceInfo(
        name=env["device_name"],
        architecture=env["architecture"],
        backend=env["backend"],
        memory_bytes=env["device_memory_bytes"],
        blas=env["blas"],
        blas_threading=env["blas_threading"],
        cpu_count=env["cpu_count"],
        bandwidth=msgspec.convert(device_bandwidth(env), BandwidthLimit),
    )
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
        scenario.record(),
        loaded.draft_label if loaded else NO_DRAFT.label,
        bool(loaded and (loaded.random_weights or loaded.draft.kind is DraftKind.SYNTHETIC)),
        dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        settings,
        distributed or WorldRecord(),
    )


def _geometry(scenario: Scenario, report: mla.PatchReport) -> tuple[dict, Thresholds]:
    """The patched MLA geometry and its thresholds: the formula's, at the usual contexts and the
    scenario's, and this device's calibrated crossovers where one is stored."""
    if report.geometry is None:
        return {}, Thresholds()
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
    thresholds = Thresholds(
        policy=report.policy,
        formula_inf=FormulaPolicy().limit(g),  # whatever the patched slot runs
        formula_at={
            t: FormulaPolicy().limit(g, t)
            for t in sorted(
                {*THRESHOLD_CONTEXTS, *(c for p in scenario.phases for c in p.contexts)}
            )
        },
        calibrated=dict(calibrated) if calibrated else None,
    )
    return geometry, thresholds


def run_settings(plan: RunPlan, loaded: Loaded, gates: Gates, passes: list[str]) -> RunSettings:
    """The header's `settings`: every choice that shapes the figures (and keys the harness bias),
    and the run's plan as resolved before anything loaded (`plan`)."""
    said = plan.recorded()
    return RunSettings(
        threshold=str(gates.threshold),
        indexer=gates.indexer.value,
        null=plan.null,
        passes=tuple(passes),
        fill=plan.fill,
        settle=plan.settle,
        cache_rounds=cache_rounds().value,
        timed_gc="on" if not timed_gc_paused() else "paused",
        seed=plan.seed_offset,
        overrides=said.overrides,
        random_weights=loaded.random_weights,
        arm_threads=plan.arm_threads,
        arm_cpus=tuple(sorted(arm_cpus() or [])),
        draft_kinds=tuple(d.kind.value for d in loaded.draft_kinds),
        mtp_missing=loaded.mtp_missing or "",
        plan=said,
    )


NULL_NOTICE = (
    "A/A null run: both arms run the same variant (every gated layer, dense and "
    "sparse, and every draft); any difference is the harness's own bias"
)
RANDOM_LATENTS_WARNING = (
    "caches filled with random latents (timing only: branch costs do not depend "
    "on the values; outputs and acceptance mean nothing)"
)


def arms_notices(
    runtime: str, arms: dict[str, ArmSlot], null: bool
) -> tuple[tuple[str, str], list[tuple[str, str]]]:
    """The runtime and what each arm slot runs (first in the log); a warning for each slot
    whose source tree's gate mlatui cannot count. An A/A names the slots A and B: each pass runs
    one variant in both, so 'stock slot' / 'patched slot' would name what did not run there."""
    label = {slot: arms[slot].label for slot in ("stock", "patched")}
    if null:
        said = (
            f"runtime: {runtime} · A/A: slots A and B both run stock = {label['stock']} "
            f"(pass aa-stock), then both patched = {label['patched']} (pass aa-patched)"
        )
    else:
        said = (
            f"runtime: {runtime} · arms: stock slot = {label['stock']} · patched slot = "
            + label["patched"]
        )
    uncounted = []
    for slot in ("stock", "patched"):  # a source tree whose gate mlatui cannot count
        if arms[slot].counters:
            name = (
                f"the {slot} variant (slots A and B of pass aa-{slot})" if null else f"{slot} slot"
            )
            uncounted.append(
                (
                    "warning",
                    f"{name} ({label[slot]}): {arms[slot].counters}; it runs as the tree wrote it",
                )
            )
    return ("info", said), uncounted


def opening_notices(
    loaded: Loaded,
    plan: RunPlan,
    report: mla.PatchReport,
    fit: tuple[list[str], list[str]],
) -> list[tuple[str, str]]:
    """(level, text) in the order they are logged: the load's notes (`fit`: the memory check's
    notes and warnings), every warning about contexts the model cannot serve, the patched arm's
    summary, then the A/A and random-fill notices."""
    scenario, null = plan.scenario, plan.null
    fit_notes, fit_warnings = fit
    longest = largest_context(scenario)
    notices = [("info", note) for note in fit_notes]
    if loaded.mtp_missing:  # the run goes on without it: say why, and how to restore it
        notices.append(("warning", loaded.mtp_missing))
    notices += [("info", note) for note in loaded.draft_notes]
    warnings = list(fit_warnings)
    if loaded.name == "embedded":
        from mlatui.models.embedded import trained_window

        args = getattr(loaded.model, "args", None)
        limit = getattr(args, "max_position_embeddings", None)
        warnings.extend(context_warnings({"max_position_embeddings": limit}, longest))
        decoded = largest_context(scenario, decoded_only=True)
        warnings.extend(context_warnings({}, decoded, trained_window()))
    warnings.extend(load_warnings(loaded.model, loaded.name, scenario.phases))
    notices += [("info", fact) for fact in indexer_notices(loaded.model)]  # a runtime's own indexer
    notices += [("warning", w) for w in warnings]
    # an A/A's first pass runs the stock variant in both slots: say so, not "patched arm"
    who = "slots A and B (aa-stock pass, then aa-patched)" if null else "patched arm"
    notices.append(("info", f"{who}: {report.summary()}"))
    if null:
        notices.append(("info", NULL_NOTICE))
    if plan.fill == "random-latents":
        notices.append(("warning", RANDOM_LATENTS_WARNING))
    if _on_reference_blas():
        notices.append(("warning", REFERENCE_BLAS_WARNING))
    return notices


REFERENCE_BLAS_WARNING = (
    "the CPU runs the bundled reference BLAS (a few GFLOP/s): every matmul is compute-bound, so a "
    "verify step of width 2 costs about twice a plain step and speculation cannot win on either "
    "arm; unset MLATUI_BLAS (or apt-get install libopenblas0-pthread) to see the story"
)


def _on_reference_blas() -> bool:
    """The run computes on the CPU through the reference BLAS the mlx wheel bundles."""
    import mlx.core as mx

    from mlatui.host.blas import blas_in_use

    return mx.default_device() == mx.cpu and blas_in_use().startswith("bundled reference BLAS")


CONTEXT_TEXT_MODULES = (
    "textwrap",
    "argparse",
    "json.decoder",
    "string",
    "fractions",
    "heapq",
    "bisect",
    "statistics",
    "shlex",
    "difflib",
)


@functools.cache
def context_text() -> str:
    """Deterministic text of a few hundred KB from Python standard library sources (the same on
    every machine with this Python)."""
    import importlib

    parts = []
    for name in CONTEXT_TEXT_MODULES:
        try:
            parts.append(inspect.getsource(importlib.import_module(name)))
        except (OSError, ImportError):
            continue
    return "\n\n".join(parts)


def text_tokens(loaded: Loaded, seed: int) -> Callable[[int], list[int]]:
    """Context tokens: real text for a model with a tokenizer (the shipped prompts, repeated),
    seeded random ids for random weights."""
    vocab = vocab_size(loaded.model)
    cache: list[int] = []
    if loaded.tokenizer is not None:
        text = context_text()
        if loaded.name == "embedded":  # its held-out prompts first: text it never trained on
            text = "\n\n".join(prompts()) + "\n\n" + text
        with transformers_quiet():  # its warning that the text is longer than the model's maximum
            cache = list(loaded.tokenizer.encode(text))
    rng = random.Random(seed)

    def tokens_for(n: int) -> list[int]:
        nonlocal cache
        while len(cache) < n:
            if loaded.tokenizer is not None and cache:
                cache += cache[: n - len(cache)]
            else:
                cache.append(rng.randrange(vocab))
        return cache[:n]

    return tokens_for
