"""The engine orchestrates a run: load, build both arms, run the plan's phases, emit events.

`run(plan, emit, stop)` is the one entry point used by `bench SCENARIO`, `launch` (in a worker
thread, or in a child process that receives the plan its parent resolved) and the tests. Every
setting is read from the plan (config.run_plan), resolved once before anything loads. It never
raises: failures become an ErrorEvent and a RunEnd with status "error".

Each phase kind's runner and what it reads of the earlier phases are `RUNNERS`, the run layer's
registry: adding a kind adds its runner module and one line there. A kind's rules (parsing, what
the budget may cut) are `mlatui.config.phase_kind`'s; its plan segments
`mlatui.measure.plans.SEGMENTS`; its tables, export rows and fold `mlatui.views`'s registry.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import mlx.core as mx
import msgspec
from msgspec import structs

from mlatui.config.phase_kind import Pass, PhaseKind
from mlatui.config.run_plan import RunPlan
from mlatui.config.scenario import Phase, ScenarioError
from mlatui.gate.mla import PatchReport
from mlatui.host.memory import MemorySampler, WiredLimit, wired_memory
from mlatui.measure.estimates import ContextEstimates
from mlatui.measure.plans import phase_plans
from mlatui.models.loading import (
    EMBEDDED_DRAFT,
    NO_DRAFT,
    Loaded,
    LoadHooks,
    load_draft,
    load_target,
    vocab_size,
)
from mlatui.models.step_bytes import step_bandwidth
from mlatui.run.arms import Arm, ArmWorker, Baton, build_arms
from mlatui.run.decode_stream import draft_factories, hidden_reader, install_drafts
from mlatui.run.engine_dist import DistRun
from mlatui.run.engine_setup import (
    ArmSetup,
    arm_setup,
    arms_notices,
    bare_header,
    error_event,
    header,
    header_settings,
    opening_notices,
    pass_variants,
    text_tokens,
)
from mlatui.run.phases import decode, indexer, sweep
from mlatui.run.phases.base import RunContext, Stopped, estimate_event
from mlatui.run.phases.more import MoreRounds, serve_more
from mlatui.run.phases.results import Checks, Need, PassResults, PhaseInputs, PhaseResult, Slices
from mlatui.stream.events import Event, LogMessage, RunEnd
from mlatui.stream.sources import DASHBOARD_IN_TURNS, DrawTurns, RunControl

if TYPE_CHECKING:
    from mlatui.run.budget_probe import Budget

Runner = Callable[[RunContext, Phase, int, int, PhaseInputs], PhaseResult]


@dataclass(frozen=True)
class KindRunner:
    run: Runner
    needs: frozenset[Need]  # what of the pass so far the engine hands it (PhaseInputs)


RUNNERS: dict[PhaseKind, KindRunner] = {
    PhaseKind.SWEEP: KindRunner(sweep.run_sweep, sweep.NEEDS),
    PhaseKind.DECODE: KindRunner(decode.run_decode, decode.NEEDS),
    PhaseKind.TUNE: KindRunner(decode.run_decode, decode.NEEDS),
    PhaseKind.INDEXER: KindRunner(indexer.run_indexer_phase, indexer.NEEDS),
}


def runner(kind: PhaseKind) -> KindRunner:
    """The kind's runner; a kind no scenario may name (`+`'s) has none."""
    found = RUNNERS.get(kind)
    if found is None:
        raise ScenarioError(f"phase kind {kind.value!r} runs only after a run (`+`)")
    return found


NULL_BUDGET_NOTICE = (
    "budget {:.0f} s not applied: an A/A (--null) runs the phases as written, the same plan in "
    "both passes"
)


def run(
    plan: RunPlan,
    emit: Callable[[Event], None],
    stop: threading.Event | None = None,
) -> str:
    """Run a plan (resolved once, before anything loads, by the caller: `resolve_plan`); emit
    every event; return "completed", "interrupted" or "error"."""
    return _Run(plan, emit, stop or threading.Event()).execute()


class _Run:
    """One run: its plan (a new value at each budget re-plan) and what the error path and
    `finally` need (the workers to close, whether the header is out)."""

    def __init__(self, plan: RunPlan, emit: Callable[[Event], None], stop: threading.Event) -> None:
        self.stop = stop
        self.checks = Checks()  # the run's L = 1 checks as its passes ended them
        self.done = PassResults()  # the pass running: its phases' results so far
        self.emit = _serialized(emit)
        self.t0 = time.perf_counter_ns()
        self.plan = plan
        self.dist = DistRun(None)
        self.workers: list[ArmWorker] = []
        self.sampler: MemorySampler | None = None
        self.ctx: RunContext | None = None
        self.header_sent = False
        self.end_sent = False
        self.held = contextlib.ExitStack()  # the wired limit, left once every worker synced
        self.wired = WiredLimit()
        self.draft_kinds: tuple[str, ...] = ()
        self.more: MoreRounds | None = None  # a budget's last L = 1 rounds, which `+` goes on from

    def now(self) -> float:
        return (time.perf_counter_ns() - self.t0) / 1e9

    def execute(self) -> str:
        try:
            status = self._run()
        except Stopped:
            status = "interrupted"
            if not self.header_sent:
                self._bare_header()
                self.emit(
                    LogMessage(
                        self.now(), "warning", "stopped while loading the model, before any step"
                    )
                )
        except BaseException as e:  # noqa: BLE001 - reported as an event, never lost
            status = "interrupted" if isinstance(e, KeyboardInterrupt) else "error"
            if not self.header_sent:
                try:
                    self._bare_header()
                except Exception:  # noqa: BLE001
                    pass
            if status == "error":
                self.emit(error_event(e, self.dist, self.now))
        finally:
            self._stop_sampler()
            self._close_workers()  # each worker syncs its streams before it ends
            self.held.close()
            self.dist.close()
        if not self.end_sent:
            checks = self.checks + self.done.checks
            self.emit(RunEnd(self.now(), status, checks.invalid_contexts()))
        return status

    def _bare_header(self) -> None:
        self.emit(bare_header(self.plan, self.dist))
        self.header_sent = True

    def _stop_sampler(self) -> None:
        if self.sampler is not None:
            self.sampler.stop()
            self.sampler = None

    def _close_workers(self) -> None:
        for w in self.workers:
            w.close()
        self.workers = []

    def _run(self) -> str:
        plan = self.plan
        self.dist = DistRun.for_scenario(plan.scenario)
        loaded, fit = self._load(plan)
        make_drafts = draft_factories(loaded, plan.scenario, plan.seed)
        self.draft_kinds = tuple(make_drafts)  # as every pass's RunContext has them
        mx.eval(loaded.model.parameters())
        setup = arm_setup(plan, loaded)
        passes = setup.passes
        # `+`: the last pass's arms stay loaded after the run's end (not under mlx.launch, whose
        # ranks would each need the same request)
        offering = (
            isinstance(self.stop, RunControl)
            and self.stop.offer_more
            and self.dist.lockstep is None
        )
        arms = build_arms(loaded.model, setup.gates, pass_variants(passes[0]), setup.sources.models)
        self.wired = self.held.enter_context(wired_memory(loaded.model))  # both arms loaded
        key = self._open(plan, loaded, setup, arms[1].report, fit)
        tokens_for = text_tokens(loaded, plan.seed)  # tokenized once, for every pass
        finals: list[tuple[str, int, ContextEstimates]] = []  # an A/A run's harness bias
        for n, run_pass in enumerate(passes):
            if n:
                variants = pass_variants(run_pass)
                arms = build_arms(loaded.model, setup.gates, variants, setup.sources.models)
            self.ctx = self._start_pass(loaded, arms, make_drafts, tokens_for)
            last = self._run_phases(self.ctx, n, passes)
            self.checks, self.done = self.checks + last.checks, PassResults()
            finals += last.finals
            if offering and n == len(passes) - 1:
                break  # the arms stay for `+`; `finally` closes them
            self._close_workers()
        if plan.null:
            self._store_bias(key, finals)
        if offering and self.ctx is not None and isinstance(self.stop, RunControl):
            self._stop_sampler()  # nothing is measured until a request: no samples
            before = len(self.plan.phases) * len(passes)
            more = self.more or MoreRounds(self.ctx, passes[-1], before, last.l1)
            serve_more(self.ctx, self.stop, self.checks, more)
            self.end_sent = True
        return "completed"

    def _store_bias(self, key: str, finals: list[tuple[str, int, ContextEstimates]]) -> None:
        """An A/A run's harness bias, from its passes' final estimates, kept for this device."""
        from mlatui.store import store_bias

        now = self.now()
        where = store_bias(key, [estimate_event(now, *final, final=True) for final in finals])
        if where:
            said = f"harness bias stored for this device and scenario: {where}"
            self.emit(LogMessage(self.now(), "info", said))

    def _load(self, plan: RunPlan) -> tuple[Loaded, tuple[list[str], list[str]]]:
        """The target and its draft, checked against memory first; a stop during a minutes-long
        read takes effect at once. Returns the model and the fit's notes and warnings (logged
        once the header is out: it is the first event)."""
        from mlatui.host.signals import Interrupted, run_interruptibly
        from mlatui.models.fit import (
            context_warnings,
            estimate,
            largest_context,
            prebuild_checks,
            refuse_unless_fits,
        )
        from mlatui.models.loading import GatedEmit, watcher

        scenario, dist, seed = plan.scenario, self.dist, plan.seed
        longest = largest_context(scenario)
        notes: list[str] = []
        warnings: list[str] = []

        def fit_check(model_config: dict, dtype: str, weights_bytes: int) -> None:
            e = dist.per_rank(estimate(model_config, dtype, weights_bytes, longest))
            refuse_unless_fits(e, plan.force)
            notes.append(f"memory estimate: {e.describe()}")
            warnings.extend(context_warnings(model_config, longest))

        before = prebuild_checks(scenario, plan.model, plan.random_weights)
        if before is not None:
            refuse_unless_fits(estimate(*before, longest), plan.force)
        load_emit = GatedEmit(self.emit)  # closed when a stop abandons the load thread
        watch = watcher(load_emit, self.now)  # LoadStart/LoadProgress: before the header

        def load() -> Loaded:
            target_hooks = LoadHooks(watch, dist.prepare_target(), fit_check)
            loaded = load_target(plan.model, scenario, plan.random_weights, seed, target_hooks)
            draft_hooks = LoadHooks(watch, dist.prepare_draft())
            load_draft(plan.draft_model, scenario.draft, loaded, seed, draft_hooks)
            return loaded

        try:
            loaded = run_interruptibly(load, self.stop)
        except Interrupted:
            load_emit.close()
            raise Stopped() from None
        dist.after_load(loaded, self.emit, self.now, plan.record, self.stop)
        notes += dist.notes
        if dist.stop_requested(self.stop.is_set()):
            raise Stopped()
        if plan.random_weights and loaded.draft == EMBEDDED_DRAFT:
            loaded.draft = NO_DRAFT
        return loaded, (notes, warnings)

    def _open(
        self,
        plan: RunPlan,
        loaded: Loaded,
        setup: ArmSetup,
        report: PatchReport,
        fit: tuple[list[str], list[str]],
    ) -> str:
        """The header (the plan in its settings), the opening log lines, the memory sampler;
        returns the key the harness bias is kept under."""
        settings, key = header_settings(plan, loaded, setup)
        if self.wired.limit_bytes is not None:
            settings = msgspec.structs.replace(settings, wired_limit=self.wired.describe())
        if self._turns() is not None:
            settings = msgspec.structs.replace(settings, dashboard=DASHBOARD_IN_TURNS)
        scenario = plan.scenario
        head = header(scenario, plan.model, loaded, report, settings, self.dist.describe())
        planned = phase_plans(plan.phases, self.draft_kinds, plan.settle, setup.passes)
        self.emit(
            msgspec.structs.replace(head, phase_plans=planned)
        )  # the plan the phases start from
        self.header_sent = True
        notices = opening_notices(loaded, plan, report, fit)
        first, uncounted = arms_notices(setup.runtime.describe(), settings.arms, plan.null)
        said = [("warning", f"mlx-lm: {self.wired.said}")] if self.wired.said else []
        for level, text in [first, *notices, *uncounted, *said]:
            self.emit(LogMessage(self.now(), level, text))
        if self.dist.leader:  # the others' figures would go nowhere: only rank 0 records
            emit = self.emit
            self.sampler = MemorySampler(lambda e: emit(e), interval_s=1.0, clock=self.now)
            self.sampler.start()
        return key

    def _turns(self) -> DrawTurns | None:
        """The turns a dashboard in this process draws in (the arms wait through its turn);
        none under mlx.launch: a rank held there after the step's barrier would start its clock
        late while the others' clocks already run, waiting for it in their collectives."""
        if not isinstance(self.stop, RunControl) or self.dist.lockstep is not None:
            return None
        return self.stop.turns

    def _start_pass(
        self,
        loaded: Loaded,
        arms: tuple[Arm, Arm],
        make_drafts: dict,
        tokens_for: Callable[[int], list[int]],
    ) -> RunContext:
        """The pass's workers (both arms and the prefill's) and the context its phases share."""
        plan, (stock, patched) = self.plan, arms
        for arm in arms:
            arm.model_name = loaded.name
        baton = Baton(self._turns())
        workers = {"stock": ArmWorker(stock, baton)}
        host = workers["stock"] if plan.shared_arm_thread else None
        workers["patched"] = ArmWorker(patched, baton, host=host)
        self.workers = list(workers.values())  # closed by `finally` should what follows fail
        for w in workers.values():
            w.call(lambda a: install_drafts(a, make_drafts))
        # prefills run the uninstrumented stock model on a third thread; both arms copy it
        # (an MTP draft: the prefill also computes the target's hidden states for it)
        prefill_arm = Arm("prefill", loaded.model, patched.report, draft=hidden_reader(stock))
        prefill_worker = ArmWorker(prefill_arm, baton)
        self.workers = [*workers.values(), prefill_worker]
        return RunContext(
            workers,
            self.emit,
            self.stop,
            self.t0,
            tokens_for,
            vocab_size(loaded.model),
            tuple(make_drafts),
            prefill_worker=prefill_worker,
            seed=plan.seed,
            fill=plan.fill,
            settle=plan.settle,
            lockstep=self.dist.lockstep,
            bandwidth=step_bandwidth(loaded.model),
        )

    def _run_phases(self, ctx: RunContext, n: int, passes: tuple[Pass, ...]) -> PassResults:
        """Pass `n`'s phases, each handed what it declared it needs of the pass so far; on the
        first pass a budget fits them to the time (a new plan and a BudgetPlanned event) and
        gives each of their segments a time slice. Returns the pass's results."""
        budget = self._apply_budget(ctx) if n == 0 else None
        slices = budget.slices if budget is not None else Slices()
        plan, run_pass, done = self.plan, passes[n], PassResults()
        for i in range(len(plan.phases)):
            if budget is not None and i:  # the rest scaled down where the phases so far ran over
                phases, budget = budget.replan(ctx, plan.phases, i, done)
                if phases != plan.phases:
                    self.plan = plan = plan.with_phases(phases)
                slices = budget.slices
            phase, count = plan.phases[i], len(plan.phases)
            if run_pass.null:  # a tune reads the verify steps of its own pass's sweep
                source = run_pass.phase_name(phase.verify_from) if phase.verify_from else ""
                phase = structs.replace(
                    phase, name=run_pass.phase_name(phase.name), verify_from=source
                )
            kind = runner(phase.kind)
            slot = (i + n * count, count * len(passes))
            done = done.after(kind.run(ctx, phase, *slot, done.inputs(kind.needs, slices)))
            self.done = done
        if budget is not None:  # the time left goes to the checks still undecided
            self.more = MoreRounds(ctx, run_pass, len(plan.phases), done.l1)
            done = budget.finish(ctx, done, self.more)
        return done

    def _apply_budget(self, ctx: RunContext) -> Budget | None:
        """The first pass under a budget: the probe and its first plan (the plan's phases
        replaced); an A/A runs its phases as written, which is said."""
        plan = self.plan
        if plan.budgeted:
            from mlatui.run.budget_probe import apply_budget

            self.plan, budget = apply_budget(ctx, plan)
            return budget
        if plan.budget_s > 0:
            self.emit(LogMessage(self.now(), "info", NULL_BUDGET_NOTICE.format(plan.budget_s)))
        return None


def _serialized(emit: Callable[[Event], None]) -> Callable[[Event], None]:
    """The memory sampler emits from its own thread: keep sinks single-threaded."""
    lock = threading.Lock()

    def locked(event: Event) -> None:
        with lock:
            emit(event)

    return locked
