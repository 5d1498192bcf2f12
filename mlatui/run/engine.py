"""The engine orchestrates a run: load, build both arms, run the scenario's phases, emit events.

`run(config, emit, stop)` is the one entry point used by `bench SCENARIO`, `launch` (in a worker
thread or a child process) and the tests. It never raises: failures become an ErrorEvent and a
RunEnd with status "error".
"""

from __future__ import annotations

import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import replace

import mlx.core as mx

from mlatui.config.run_plan import RunPlan, resolve_plan
from mlatui.config.runconfig import RunConfig
from mlatui.config.scenario import Scenario, ScenarioError
from mlatui.models.loading import (
    EMBEDDED_DRAFT,
    NO_DRAFT,
    LoadError,
    load_draft,
    load_target,
    vocab_size,
)
from mlatui.run.arm_plan import arm_settings, resolve_gates, runtime_gates
from mlatui.run.arms import Arm, ArmWorker, Baton, Variant, build_arms
from mlatui.run.draft_factory import draft_factories, hidden_reader, install_drafts
from mlatui.run.engine_dist import DistRun
from mlatui.run.header import header, run_settings
from mlatui.run.notices import arms_notices, opening_notices
from mlatui.run.phases.base import RunContext, Stopped
from mlatui.run.phases.more import CheckBook, serve_more
from mlatui.run.phases.sweep import run_sweep
from mlatui.run.prompts import text_tokens
from mlatui.stream.control import RunControl
from mlatui.stream.events import (
    ErrorEvent,
    Estimate,
    Event,
    LogMessage,
    RunEnd,
)

NULL_BUDGET_NOTICE = (
    "budget {:.0f} s not applied: an A/A (--null) runs the phases as written, the same plan in "
    "both passes"
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


NULL_PASSES = ((Variant.STOCK, Variant.STOCK), (Variant.PATCHED, Variant.PATCHED))


def pass_name(variants: tuple[Variant, Variant], null: bool) -> str:
    """'' for a real run; 'aa-stock' / 'aa-patched' for the passes of an A/A run."""
    return f"aa-{variants[0].value}" if null else ""


def run(
    request: RunConfig | RunPlan,
    emit: Callable[[Event], None],
    stop: threading.Event | None = None,
) -> str:
    """Run a plan (a request is resolved into one first thing); emit every event; return
    "completed", "interrupted" or "error"."""
    stop = stop or threading.Event()
    finals: list[Estimate] = []
    book = CheckBook()  # the checks as emitted: what `+` measures after the run
    emit = book.tee(_collecting(_serialized(emit), finals))
    end_sent = False
    t0 = time.perf_counter_ns()
    workers: dict[str, ArmWorker] = {}
    workers_all: list[ArmWorker] = []
    sampler = None
    header_sent = False
    plan: RunPlan | None = request if isinstance(request, RunPlan) else None
    ctx = None
    dist = DistRun(None)

    def now() -> float:
        return (time.perf_counter_ns() - t0) / 1e9

    try:
        if plan is None:
            assert isinstance(request, RunConfig)
            plan = resolve_plan(request)
        scenario = plan.scenario
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
        seed, force = plan.seed, plan.force

        def fit_check(model_config: dict, dtype: str, weights_bytes: int) -> None:
            e = dist.per_rank(estimate(model_config, dtype, weights_bytes, longest))
            refuse_unless_fits(e, force)
            fit_notes.append(f"memory estimate: {e.describe()}")
            fit_warnings.extend(context_warnings(model_config, longest))

        from mlatui.models.fit import prebuild_checks

        before = prebuild_checks(scenario, plan.model, plan.random_weights)
        if before is not None:
            refuse_unless_fits(estimate(*before, longest), plan.force)
        from mlatui.host.signals import Interrupted, run_interruptibly
        from mlatui.models.load_watch import GatedEmit, watcher

        load_emit = GatedEmit(emit)  # closed when a stop abandons the load thread
        watch = watcher(load_emit, now)  # LoadStart/LoadProgress: before the header (see recorder)

        model_ref, draft_ref, random_weights = plan.model, plan.draft_model, plan.random_weights

        def load():
            loaded = load_target(
                model_ref,
                scenario,
                random_weights,
                seed,
                fit_check,
                watch,
                dist.prepare_target(),
            )
            load_draft(
                draft_ref,
                scenario.draft,
                loaded,
                seed,
                watch,
                dist.prepare_draft(),
            )
            return loaded

        try:  # a stop during a minutes-long read takes effect at once, not when it returns
            loaded = run_interruptibly(load, stop)
        except Interrupted:
            load_emit.close()
            raise Stopped() from None
        dist.after_load(loaded, emit, now, plan.record, stop)
        fit_notes += dist.notes
        if dist.stop_requested(stop.is_set()):
            raise Stopped()
        if plan.random_weights and loaded.draft == EMBEDDED_DRAFT:
            loaded.draft = NO_DRAFT
        make_drafts = draft_factories(loaded, scenario, seed)
        mx.eval(loaded.model.parameters())
        # the arms follow the runtime's state: the CLI's choice, else the scenario's, else the
        # installed code against the patch (pre-fix code) or the pre-fix gate against it (fixed)
        runtime = runtime_gates(loaded.model)
        # arms whose model code comes from another source tree: built on the loaded arrays and
        # refused on the first parameter that differs, before anything is timed
        from mlatui.run.source_arm import (
            PREFILL_SAID,
            SourceModels,
            build_sources,
            merge_source_settings,
            source_arms_text,
        )

        arm_sources = dict(plan.arms.sources)
        sources = build_sources(loaded.model, arm_sources) if arm_sources else SourceModels()
        gates = resolve_gates(
            source_arms_text(plan.arms.arms, arm_sources),
            plan.arms.threshold,
            plan.arms.indexer,
            runtime,
        )
        null, fill = plan.null, plan.fill
        if fill == "random-latents" and not loaded.random_weights:
            raise ScenarioError(
                "fill = random-latents is a timing-only fill for random weights; add --random-weights"
            )
        passes = NULL_PASSES if null else ((Variant.STOCK, Variant.PATCHED),)
        # `+`: the last pass's arms stay loaded after the run's end (not under mlx.launch, whose
        # ranks would each need the same request)
        offering = isinstance(stop, RunControl) and stop.offer_more and dist.lockstep is None
        stock, patched = build_arms(loaded.model, gates, passes[0], sources.models)
        settings = run_settings(plan, loaded, gates, [pass_name(p, null) for p in passes])
        settings["arms"] = arm_settings(gates, runtime)
        # what code each slot ran (files and their hashes), so that compare can tell two
        # recordings of different code apart; how a source arm shares the prefill
        merge_source_settings(settings["arms"], sources, loaded.model)
        if sources:
            settings["prefill"] = PREFILL_SAID
        settings["runtime"] = {
            "name": runtime.runtime,
            "version": runtime.version,
            "gate_forms": {cls: form.value for cls, form in runtime.forms.items()},
            "state": "fixed" if runtime.fixed else "pre-fix",
        }
        from mlatui.store.harness_bias import bias_key, lookup

        key = bias_key(scenario.name, settings, loaded.name)
        bias = lookup(key)
        if bias is not None:
            settings["harness_bias"] = bias
        emit(header(scenario, plan.model, loaded, patched.report, settings, dist.describe()))
        header_sent = True
        notices = opening_notices(
            loaded, scenario, patched.report, longest, fit_notes, fit_warnings, null, fill
        )
        first, uncounted = arms_notices(runtime.describe(), settings["arms"], null)
        notices = [first, *notices, *uncounted]
        for level, text in notices:
            emit(LogMessage(now(), level, text))
        from mlatui.host.memory import MemorySampler

        if dist.leader:  # the others' figures would go nowhere: only rank 0 records
            sampler = MemorySampler(lambda e: emit(e), interval_s=1.0, clock=now)
            sampler.start()
        tokens_for = text_tokens(loaded, seed)  # tokenized once, for every pass
        for n, variants in enumerate(passes):
            if n:
                stock, patched = build_arms(loaded.model, gates, variants, sources.models)
            for arm in (stock, patched):
                arm.model_name = loaded.name
            baton = Baton()
            workers = {"stock": ArmWorker(stock, baton)}
            host = workers["stock"] if plan.shared_arm_thread else None
            workers["patched"] = ArmWorker(patched, baton, host=host)
            for w in workers.values():
                w.call(lambda a: install_drafts(a, make_drafts))
            # prefills run the uninstrumented stock model on a third thread; both arms copy it
            # (an MTP draft: the prefill also computes the target's hidden states for it)
            prefill_arm = Arm("prefill", loaded.model, patched.report, draft=hidden_reader(stock))
            prefill_worker = ArmWorker(prefill_arm, baton)
            workers_all = [*workers.values(), prefill_worker]
            left_out: set[tuple[str, int]] = ctx.left_out if ctx else set()
            ctx = RunContext(
                workers,
                emit,
                stop,
                t0,
                tokens_for,
                vocab_size(loaded.model),
                tuple(make_drafts),
                prefill_worker=prefill_worker,
                left_out=left_out,
                seed=seed,
                fill=fill,
                settle=plan.settle,
                lockstep=dist.lockstep,
            )
            replanner = None
            if n == 0 and plan.budgeted:
                from mlatui.run.budget_probe import apply_budget

                # the budget's plan is a new plan value; its BudgetPlanned event says what changed
                budgeted, replanner = apply_budget(ctx, plan.scenario, plan.budget_s)
                plan = plan.with_phases(budgeted.phases)
                ctx.emit = replanner.tee(ctx.emit)
            elif n == 0 and plan.budget_s > 0:
                emit(LogMessage(now(), "info", NULL_BUDGET_NOTICE.format(plan.budget_s)))
            tag = pass_name(variants, null)
            for i in range(len(plan.phases)):
                if replanner is not None and i > 0:  # a re-plan: a new plan value and an event
                    plan = plan.with_phases(replanner.replan(ctx, plan.phases, i))
                phases = plan.phases
                phase = phases[i]
                if tag:  # a tune reads the verify steps of its own pass's sweep
                    source = f"{phase.verify_from}/{tag}" if phase.verify_from else ""
                    phase = replace(phase, name=f"{phase.name}/{tag}", verify_from=source)
                _phase_runner(phase.kind)(
                    ctx, phase, i + n * len(phases), len(phases) * len(passes)
                )
            if replanner is not None:  # what is left of the budget goes to what is undecided
                replanner.finish(ctx)
            if offering and n == len(passes) - 1:
                break  # the arms stay for `+`; `finally` closes them
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
        if offering and ctx is not None and isinstance(stop, RunControl):
            if sampler is not None:  # nothing is measured until a request: no samples
                sampler.stop()
                sampler = None
            tag = pass_name(passes[-1], null)
            serve_more(ctx, stop, book, tag, len(plan.phases) * len(passes))
            end_sent = True
    except Stopped:
        status = "interrupted"
        if not header_sent:
            emit(_bare_header(request, plan, dist))
            header_sent = True
            emit(LogMessage(now(), "warning", "stopped while loading the model, before any step"))
    except BaseException as e:  # noqa: BLE001 - reported as an event, never lost
        status = "interrupted" if isinstance(e, KeyboardInterrupt) else "error"
        if not header_sent:
            try:
                emit(_bare_header(request, plan, dist))
            except Exception:  # noqa: BLE001
                pass
        if status == "error":
            emit(_error_event(e, dist, now))
    finally:
        if sampler is not None:
            sampler.stop()
        for w in workers_all or workers.values():
            w.close()
        dist.close()
    if not end_sent:
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


def _bare_header(request: RunConfig | RunPlan, plan: RunPlan | None, dist: DistRun):
    """The header of a run that ended before its model was ready (a recording always has one);
    without a plan (its scenario could not be read), one named after the request."""
    if plan is None:
        from mlatui.config.draft_spec import DraftSpec
        from mlatui.config.scenario import ModelSpec

        assert isinstance(request, RunConfig)
        scenario = Scenario(
            "?", str(request.scenario or "default"), "", ModelSpec(), DraftSpec(), ()
        )
        return header(scenario, request.model, None, None, {}, dist.describe())
    return header(plan.scenario, plan.model, None, None, {}, dist.describe())


def _error_event(e: BaseException, dist: DistRun, now: Callable[[], float]) -> ErrorEvent:
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
