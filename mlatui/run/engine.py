"""The engine: load, build both arms, run the scenario's phases, emit events.

`run(config, emit, stop)` is the one entry point used by `bench SCENARIO`, `launch` (in a worker
thread or a child process) and the tests. It never raises: failures become an ErrorEvent and a
RunEnd with status "error".
"""

from __future__ import annotations

import random
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import mlx.core as mx

from mlatui.config.runconfig import RunConfig
from mlatui.config.scenario import Scenario, ScenarioError, load_scenario
from mlatui.gate import mla
from mlatui.models.loading import (
    EMBEDDED_DRAFT,
    NO_DRAFT,
    Draft,
    DraftKind,
    Loaded,
    LoadError,
    load_draft,
    load_target,
    vocab_size,
)
from mlatui.run.arms import (
    Arm,
    ArmWorker,
    Baton,
    Gates,
    Variant,
    arm_cpus,
    build_arms,
    gate_model,
    sparse_layers,
)
from mlatui.run.drafts import DraftModelSource
from mlatui.run.engine_dist import DistRun
from mlatui.run.header import header
from mlatui.run.phases.base import RunContext, Stopped, run_sweep
from mlatui.stream.events import (
    ErrorEvent,
    Estimate,
    Event,
    LogMessage,
    RunEnd,
)


def _phase_runner(kind: str) -> Callable:
    if kind == "sweep":
        return run_sweep
    if kind in ("decode", "tune"):
        from mlatui.run.phases.decode import run_decode

        return run_decode
    if kind == "indexer":
        from mlatui.run.phases.indexer import run_indexer_phase

        return run_indexer_phase
    raise ScenarioError(f"unknown phase kind {kind!r}")


def apply_overrides(scenario: Scenario, overrides: dict) -> Scenario:
    """Quick runs: override reps/warmup/tokens/contexts of every phase (tests, --quick)."""
    if not overrides:
        return scenario
    from dataclasses import replace

    phases = []
    only = overrides.get("only_phases")
    if only:
        unknown = set(only) - {p.name for p in scenario.phases}
        if unknown:
            raise ScenarioError(
                f"{scenario.path}: no phase named {', '.join(sorted(unknown))} (phases: {', '.join(p.name for p in scenario.phases)})"
            )
    for p in scenario.phases:
        if only and p.name not in only:
            continue
        changes: dict[str, Any] = {
            k: (tuple(v) if isinstance(v, list) else v)
            for k, v in overrides.items()
            if hasattr(p, k)
        }
        phases.append(replace(p, **changes))
    return replace(scenario, phases=tuple(phases))


def text_tokens(loaded: Loaded, seed: int) -> Callable[[int], list[int]]:
    """Context tokens: real text for a model with a tokenizer (the shipped prompts, repeated),
    seeded random ids for random weights."""
    vocab = vocab_size(loaded.model)
    cache: list[int] = []
    if loaded.tokenizer is not None:
        from mlatui.run.prompts import context_text

        text = context_text()
        if loaded.name == "embedded":  # its held-out prompts first: text it never trained on
            from mlatui.models.embedded import prompts

            text = "\n\n".join(prompts()) + "\n\n" + text
        cache = _encode_quietly(loaded.tokenizer, text)
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


def _encode_quietly(tokenizer, text: str) -> list[int]:
    """Tokenize the whole context text without transformers' warning that it is longer than the
    model's maximum (we only ever feed it up to each context length)."""
    try:
        from transformers.utils import logging as hf_logging
    except ImportError:
        return list(tokenizer.encode(text))
    level = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        return list(tokenizer.encode(text))
    finally:
        hf_logging.set_verbosity(level)


def _draft_factory(loaded: Loaded, scenario: Scenario, seed: int) -> Callable[[Arm], object] | None:
    kind = loaded.draft.kind
    if kind is DraftKind.SYNTHETIC:
        from mlatui.run.decode_stream import SyntheticDraft

        vocab = vocab_size(loaded.model)

        def synthetic(arm: Arm):
            cost = (
                _arm_draft_model(arm, loaded.draft_model)
                if loaded.draft_model is not None
                else None
            )
            return SyntheticDraft(
                scenario.draft.acceptance, seed, vocab, cost
            )  # same draws in both arms

        return synthetic
    if loaded.draft.is_mtp:
        from mlatui.run.mtp import load_mtp_draft

        probe = (
            load_mtp_draft(loaded.path, loaded.model, required=kind is DraftKind.MTP)
            if loaded.path
            else None
        )
        if probe is None:
            loaded.draft = NO_DRAFT
            return None
        loaded.draft = Draft(DraftKind.MTP)

        def mtp(arm: Arm):
            head = probe.twin()  # shares the head's weights, own cache; gated like its arm
            _gate_if_mla(head.head, arm)
            return head

        return mtp
    if loaded.draft_model is not None:

        def draft_model(arm: Arm):
            return DraftModelSource(_arm_draft_model(arm, loaded.draft_model), loaded.draft.label)

        return draft_model
    return None


def _arm_draft_model(arm: Arm, model):
    """Each arm's draft is a twin gated like the arm (the fix applies process-wide, so the
    patched variant's draft has the patched gates too; an A/A gives both arms the same draft)."""
    model = mla.twin(model)
    _gate_if_mla(model, arm)
    return model


def _gate_if_mla(model, arm: Arm) -> None:
    if mla.mla_modules(model) or sparse_layers(model):
        gate_model(model, arm.variant or Variant.STOCK, arm.gates or Gates())


NULL_PASSES = ((Variant.STOCK, Variant.STOCK), (Variant.PATCHED, Variant.PATCHED))


def pass_name(variants: tuple[Variant, Variant], null: bool) -> str:
    """'' for a real run; 'aa-stock' / 'aa-patched' for the passes of an A/A run."""
    return f"aa-{variants[0].value}" if null else ""


def run(
    config: RunConfig, emit: Callable[[Event], None], stop: threading.Event | None = None
) -> str:
    """Run the scenario; emit every event; return "completed", "interrupted" or "error"."""
    stop = stop or threading.Event()
    finals: list[Estimate] = []
    emit = _collecting(_serialized(emit), finals)
    t0 = time.perf_counter_ns()
    workers: dict[str, ArmWorker] = {}
    workers_all: list[ArmWorker] = []
    sampler = None
    header_sent = False
    scenario = None
    ctx = None
    dist = DistRun(None)

    def now() -> float:
        return (time.perf_counter_ns() - t0) / 1e9

    try:
        scenario = apply_overrides(load_scenario(config.scenario), config.overrides)
        from mlatui.models.fit import (
            context_warnings,
            estimate,
            largest_context,
            refuse_unless_fits,
        )

        longest = largest_context(scenario)
        fit_notes: list[str] = []  # logged once the header is out (it is the first event)
        fit_warnings: list[str] = []

        dist = DistRun.for_scenario(scenario)
        seed = scenario.run_seed(config.seed)

        def fit_check(model_config: dict, dtype: str, weights_bytes: int) -> None:
            e = dist.per_rank(estimate(model_config, dtype, weights_bytes, longest))
            refuse_unless_fits(e, config.force)
            fit_notes.append(f"memory estimate: {e.describe()}")
            fit_warnings.extend(context_warnings(model_config, longest))

        from mlatui.models.fit import prebuild_checks

        before = prebuild_checks(scenario, config.model, config.random_weights)
        if before is not None:
            refuse_unless_fits(estimate(*before, longest), config.force)
        from mlatui.host.signals import Interrupted, run_interruptibly
        from mlatui.models.load_watch import watcher

        watch = watcher(emit, now)  # LoadStart/LoadProgress: before the header (see recorder)

        target_scenario = scenario

        def load():
            loaded = load_target(
                config.model,
                target_scenario,
                config.random_weights,
                seed,
                fit_check,
                watch,
                dist.prepare_target(),
            )
            load_draft(
                config.draft_model,
                target_scenario.draft,
                loaded,
                seed,
                watch,
                dist.prepare_draft(),
            )
            return loaded

        try:  # a stop during a minutes-long read takes effect at once, not when it returns
            loaded = run_interruptibly(load, stop)
        except Interrupted:
            raise Stopped() from None
        dist.after_load(loaded, emit, now, config.record, stop)
        fit_notes += dist.notes
        if dist.stop_requested(stop.is_set()):
            raise Stopped()
        if config.random_weights and loaded.draft == EMBEDDED_DRAFT:
            loaded.draft = NO_DRAFT
        make_draft = _draft_factory(loaded, scenario, seed)
        mx.eval(loaded.model.parameters())
        # the one policy object of this run: the CLI's choice, else the scenario's, else formula
        gates = Gates.parse(
            config.threshold or scenario.threshold, config.indexer or scenario.indexer
        )
        null = config.null or scenario.null
        fill = config.fill or scenario.model.fill
        if fill == "random-latents" and not loaded.random_weights:
            raise ScenarioError(
                "fill = random-latents is a timing-only fill for random weights; add --random-weights"
            )
        passes = NULL_PASSES if null else ((Variant.STOCK, Variant.PATCHED),)
        stock, patched = build_arms(loaded.model, gates, passes[0])
        settings = {
            "threshold": str(gates.threshold),
            "indexer": gates.indexer.value,
            "null": null,
            "passes": [pass_name(p, null) for p in passes],
            "fill": fill,
            "settle": config.settle,
            "seed": config.seed,
            "overrides": config.overrides,
            "random_weights": loaded.random_weights,
            "arm_threads": "shared" if config.shared_arm_thread else "one per arm",
            "arm_cpus": sorted(arm_cpus() or []),
        }
        from mlatui.store.harness_bias import bias_key, lookup

        key = bias_key(scenario.name, settings, loaded.name)
        bias = lookup(key)
        if bias is not None:
            settings["harness_bias"] = bias
        emit(header(config, scenario, loaded, patched.report, settings, dist.describe()))
        header_sent = True
        for note in fit_notes:
            emit(LogMessage(now(), "info", note))
        if loaded.name == "embedded":
            from mlatui.models.embedded import trained_window

            args = getattr(loaded.model, "args", None)
            limit = getattr(args, "max_position_embeddings", None)
            fit_warnings.extend(
                context_warnings({"max_position_embeddings": limit}, longest, trained_window())
            )
        from mlatui.run.phases.indexer_sites import load_warnings

        fit_warnings.extend(load_warnings(loaded.model, loaded.name, scenario.phases))
        for warning in fit_warnings:
            emit(LogMessage(now(), "warning", warning))
        emit(LogMessage(now(), "info", f"patched arm: {patched.report.summary()}"))
        if null:
            emit(
                LogMessage(
                    now(),
                    "info",
                    "A/A null run: both arms run the same variant (every gated layer, dense and "
                    "sparse, and every draft); any difference is the harness's own bias",
                )
            )
        if fill == "random-latents":
            emit(
                LogMessage(
                    now(),
                    "warning",
                    "caches filled with random latents (timing only: branch costs do not depend "
                    "on the values; outputs and acceptance mean nothing)",
                )
            )
        from mlatui.host.memory import MemorySampler

        if dist.leader:  # the others' figures would go nowhere: only rank 0 records
            sampler = MemorySampler(lambda e: emit(e), interval_s=1.0, clock=now)
            sampler.start()
        tokens_for = text_tokens(loaded, seed)  # tokenized once, for every pass
        for n, variants in enumerate(passes):
            if n:
                stock, patched = build_arms(loaded.model, gates, variants)
            for arm in (stock, patched):
                arm.model_name = loaded.name
            baton = Baton()
            workers = {"stock": ArmWorker(stock, baton)}
            host = workers["stock"] if config.shared_arm_thread else None
            workers["patched"] = ArmWorker(patched, baton, host=host)
            if make_draft is not None:
                for w in workers.values():
                    w.call(lambda a: setattr(a, "draft", make_draft(a)))
            # prefills run the uninstrumented stock model on a third thread; both arms copy it
            # (an MTP draft: the prefill also computes the target's hidden states for it)
            prefill_arm = Arm("prefill", loaded.model, patched.report, draft=stock.draft)
            prefill_worker = ArmWorker(prefill_arm, baton)
            workers_all = [*workers.values(), prefill_worker]
            invalid: set[int] = ctx.invalid_contexts if ctx else set()
            ctx = RunContext(
                workers,
                emit,
                stop,
                t0,
                tokens_for,
                vocab_size(loaded.model),
                make_draft,
                prefill_worker=prefill_worker,
                invalid_contexts=invalid,
                seed=seed,
                fill=fill,
                settle=config.settle,
                lockstep=dist.lockstep,
            )
            budget_s = scenario.budget_s if config.budget_s is None else config.budget_s
            if n == 0 and budget_s > 0 and not null:
                from mlatui.run.budget_probe import apply_budget

                scenario = apply_budget(ctx, scenario, budget_s)
            tag = pass_name(variants, null)
            for i, phase in enumerate(scenario.phases):
                if tag:
                    phase = replace(phase, name=f"{phase.name}/{tag}")
                _phase_runner(phase.kind)(
                    ctx, phase, i + n * len(scenario.phases), len(scenario.phases) * len(passes)
                )
            for w in workers_all:
                w.close()
            workers_all = []
        if null:
            from mlatui.store.harness_bias import store

            where = store(key, finals)
            if where:
                emit(
                    LogMessage(
                        now(), "info", f"harness bias stored for this device and scenario: {where}"
                    )
                )
        status = "completed"
    except Stopped:
        status = "interrupted"
        if not header_sent:
            emit(
                header(config, scenario or _empty_scenario(config), None, None, {}, dist.describe())
            )
            header_sent = True
            emit(LogMessage(now(), "warning", "stopped while loading the model, before any step"))
    except BaseException as e:  # noqa: BLE001 - reported as an event, never lost
        status = "interrupted" if isinstance(e, KeyboardInterrupt) else "error"
        if not header_sent:
            try:
                emit(
                    header(
                        config,
                        scenario or _empty_scenario(config),
                        None,
                        None,
                        {},
                        dist.describe(),
                    )
                )
            except Exception:  # noqa: BLE001
                pass
        if status == "error":
            frame = traceback.extract_tb(e.__traceback__)[-1]
            msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            lost = dist.failure(e)  # a rank died or hung: say which, not where we noticed
            msg = lost or msg
            from mlatui.models.fit import FitError

            emit(
                ErrorEvent(
                    now(),
                    msg,
                    f"{frame.filename.rsplit('/', 1)[-1]}:{frame.lineno}"
                    if not (lost or isinstance(e, (LoadError, ScenarioError, FitError)))
                    else "",
                    isinstance(e, FitError),
                )
            )
    finally:
        if sampler is not None:
            sampler.stop()
        for w in workers_all or workers.values():
            w.close()
        dist.close()
    emit(RunEnd(now(), status, tuple(sorted(ctx.invalid_contexts)) if ctx else ()))
    return status


def _collecting(emit: Callable[[Event], None], finals: list) -> Callable[[Event], None]:
    """Keep the final estimates (an A/A run stores its harness bias from them)."""

    def keep(event: Event) -> None:
        if isinstance(event, Estimate) and event.final:
            finals.append(event)
        emit(event)

    return keep


def _serialized(emit: Callable[[Event], None]) -> Callable[[Event], None]:
    """The memory sampler emits from its own thread: keep sinks single-threaded."""
    lock = threading.Lock()

    def locked(event: Event) -> None:
        with lock:
            emit(event)

    return locked


def _empty_scenario(config: RunConfig) -> Scenario:
    from mlatui.config.scenario import DraftSpec, ModelSpec

    return Scenario("?", str(config.scenario or "default"), "", ModelSpec(), DraftSpec(), ())
