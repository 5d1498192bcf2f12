"""What the dashboard shows, computed from the event stream alone (no mlx, no textual).

`DashboardState.apply(event)` folds one event in; the UI reads the fields and `changed` (the
sections touched since it last looked) on its tick. Replay, live and isolated runs all feed it
the same events, so a recording is enough to test every number on screen.
"""

from __future__ import annotations

from collections import deque

from mlatui.config.phase_kind import Pass, rules_for
from mlatui.measure.acceptance import (
    LOOPING,
    AcceptanceCounts,
    VerifyStep,
    looping_warning,
    repetition_of,
)
from mlatui.measure.plans import PLAIN, Setting
from mlatui.measure.progress import RunProgress
from mlatui.stream.events import (
    ARMS,
    BudgetPlanned,
    DecodeBlock,
    DecodeResult,
    DriftEvent,
    ErrorEvent,
    Estimate,
    Event,
    LoadProgress,
    LoadStart,
    LogMessage,
    MemorySample,
    PhaseStart,
    PhaseSummary,
    PooledValidity,
    Progress,
    RunEnd,
    RunHeader,
    Step,
    Validity,
    arm_label,
)
from mlatui.stream.phase_rows import EstimateRow
from mlatui.stream.phrases import check_mark, interval_text, left_out_of_verdicts
from mlatui.views.dashboard_views import (
    SERIES_POINTS,
    ArmView,
    PhaseView,
    StepSeries,
    TextRepeat,
    _median,
    view_of,
)
from mlatui.views.run_meta import l1_words
from mlatui.views.units import ratio_text

LOG_LINES = 500
SECTIONS = ("header", "phase", "arms", "marginal", "memory", "validity", "log")


class DashboardState:
    def __init__(self) -> None:
        self.header: RunHeader | None = None
        self.phase = PhaseView()
        self.arms: dict[str, ArmView] = {arm: ArmView() for arm in ARMS}
        # sweep steps: (arm, context, width) -> [ms]
        self.sweep_ms: dict[tuple[str, int, int], list[float]] = {}
        self.steps = StepSeries()  # every timed step by (phase, arm, width, context)
        self.validity: dict[tuple[str, int], Validity] = {}  # (phase, context): model phases
        self.pooled: dict[str, PooledValidity] = {}  # phase -> the pooled L = 1 check after it
        self.estimates: dict[tuple[str, int], Estimate] = {}  # (phase, context): the latest
        self.drifts: list[DriftEvent] = []
        self.memory: MemorySample | None = None
        self.rss_history: deque = deque(maxlen=SERIES_POINTS)  # RSS, or macOS's footprint
        self.swap_start_bytes: int | None = None  # swap in use at the run's first sample
        self.log: deque = deque(maxlen=LOG_LINES)
        self.summaries: list[PhaseSummary] = []
        self.phase_kinds: dict[str, str] = {}
        self.decode_results: list[DecodeResult] = []
        self.status = "waiting"  # waiting | running | completed | interrupted | error
        self.error: str | None = None
        self.t = 0.0
        self.context: int | None = None  # of the latest timed step
        self.events = 0
        self.progress = RunProgress()  # ETA, elapsed, stall, loading (mlatui.measure.progress)
        self.budget: BudgetPlanned | None = None  # the run's plan fitted to its time budget
        self.changed: set[str] = set(SECTIONS)

    # -- folding events ---------------------------------------------------------------------

    def apply(self, event: Event) -> None:
        self.events += 1
        t = getattr(event, "t", None)
        if t is not None:
            self.t = max(self.t, t)
        self.progress.apply(event)
        handler = getattr(self, f"_on_{event.type}", None)
        if handler is not None:
            handler(event)

    def apply_all(self, events: list[Event]) -> None:
        for e in events:
            self.apply(e)

    def take_changed(self) -> set[str]:
        changed, self.changed = self.changed, set()
        return changed

    def _log(self, t: float | None, level: str, message: str) -> None:
        self.log.append((t, level, message))
        self.changed.add("log")

    def _on_header(self, e: RunHeader) -> None:
        self.header = e
        self.status = "running"
        self.changed |= {"header", "phase", "arms"}
        self._log(
            0.0, "info", f"run started: {e.model} · scenario {e.scenario.name} · {e.started_at}"
        )
        if e.synthetic_acceptance:
            self._log(0.0, "warning", "random weights: acceptance numbers are synthetic")

    def _on_budget_planned(self, e: BudgetPlanned) -> None:
        self.budget = e
        self.changed.add("header")

    @property
    def budget_text(self) -> str:
        """A short header token: `budget 90 s` (fits) or `budget 90 s: scaled down` (see log)."""
        b = self.budget
        if b is None:
            return ""
        return f"budget {b.budget_s:.0f} s" + (": scaled down, see log" if b.changes else "")

    def _on_phase_start(self, e: PhaseStart) -> None:
        if self.status == "completed":  # `+`: an ended run measures again, then ends again
            self.status = "running"
        self.phase = PhaseView(e.phase, e.kind, e.index, e.total_phases, 0, e.planned_steps)
        self.phase_kinds[e.phase] = e.kind
        if rules_for(e.kind).decodes:
            for arm in self.arms.values():
                arm.start_phase()
        self.changed |= {"phase", "arms"}
        self._log(e.t, "info", f"phase {e.index + 1}/{e.total_phases}: {e.phase} ({e.kind})")

    def _on_load_start(self, e: LoadStart) -> None:
        self.changed |= {"header", "phase"}
        if e.random_build:
            what = f"building random weights ({e.params / 1e6:,.1f}M params)"
        elif e.total_bytes:
            what = f"{e.files} files, {e.total_bytes / 1e6:,.1f} MB"
        else:
            what = "size unknown until fetched"
        self._log(e.t, "info", f"loading {e.what} {e.source}: {what}")

    def _on_load_progress(self, e: LoadProgress) -> None:
        self.changed |= {"header", "phase"}
        if e.done and self.progress.load is not None:
            lv = self.progress.load
            self._log(
                e.t,
                "info",
                f"{lv.what} loaded in {lv.seconds:.1f} s ({e.bytes_read / 1e6:,.1f} MB"
                + (f", {e.measure}" if e.measure and e.measure != "exact" else "")
                + ")",
            )

    def _on_progress(self, e: Progress) -> None:
        if e.phase == self.phase.name:
            self.phase.done, self.phase.total = e.done, e.total
            self.changed.add("phase")

    def _arm(self, name: str) -> ArmView:
        if name not in self.arms:
            self.arms[name] = ArmView()
        return self.arms[name]

    def _kind(self, phase: str) -> str:
        """A phase's kind; the indexer phase's parts ("indexer:layer") take their phase's."""
        return self.phase_kinds.get(phase, self.phase_kinds.get(phase.split(":")[0], "sweep"))

    def _on_step(self, e: Step) -> None:
        self.steps.add(e.phase, e.arm, e.width, e.context, e.ms)
        if view_of(self._kind(e.phase)).layer_steps:  # one layer's timings: not the model's
            return  # the indexer phase's own figures are its summary's rows
        arm = self._arm(e.arm)
        self.context = e.context
        if rules_for(self._kind(e.phase)).model_widths:
            self.sweep_ms.setdefault((e.arm, e.context, e.width), []).append(e.ms)
        arm.absorbed_calls += e.absorbed_calls
        arm.materialised_calls += e.materialised_calls
        self.changed |= {"arms", "marginal"} if e.width <= 2 else {"arms"}

    def _on_memory(self, e: MemorySample) -> None:
        self.memory = e
        footprint = e.process_footprint_bytes
        self.rss_history.append(e.process_rss_bytes if footprint is None else footprint)
        if self.swap_start_bytes is None:
            self.swap_start_bytes = e.swap_used_bytes
        self.changed.add("memory")

    def _on_validity(self, e: Validity) -> None:
        if view_of(self._kind(e.phase)).layer_steps:
            ci = "" if e.ratio is None else f", paired {ratio_text(e.ratio)}"
            said = f"{check_mark(e.verdict)} {e.verdict}{ci} (the indexer's figures only)"
            self._log(
                e.t, "info" if e.valid else "warning", f"{e.phase} S=1 check at {e.context}: {said}"
            )
            return
        self.validity[(e.phase, e.context)] = e
        self.changed |= {"validity", "marginal", "arms"}
        ci = f" paired {ratio_text(e.ratio)}, {e.rounds} rounds" if e.ratio is not None else ""
        review = l1_words(self.header.settings if self.header else None, e.verdict)
        if review:  # a patch review: what the check says about the patch
            ci += f"; {review}"
        if e.pooled:
            own = f"its own {ratio_text(e.ratio)} contains 1.00" if e.ratio is not None else ""
            mark = check_mark("valid", pooled=True)
            self._log(e.t, "info", f"L=1 check at {e.context}: {mark} valid (pooled; {own})")
        elif e.valid:
            msg = f"L=1 check at {e.context}: ✓ {e.stock_l1_ms:.3g} vs {e.patched_l1_ms:.3g} ms"
            self._log(e.t, "info", msg + f" ({e.diff_pct:+.1f}%{ci})")
        else:
            word = "INCONCLUSIVE" if e.verdict == "inconclusive" else "INVALID"
            msg = f"L=1 check at {e.context}: {check_mark(word.lower())} {word} {e.stock_l1_ms:.3g} vs {e.patched_l1_ms:.3g} ms"
            self._log(
                e.t,
                "warning",
                msg + f" ({e.diff_pct:+.1f}%{ci}; CI not inside ±{e.tolerance_pct:g}%)",
            )

    def _on_pooled_validity(self, e: PooledValidity) -> None:
        self.pooled[e.phase] = e
        self.changed.add("validity")
        where = ", ".join(map(str, e.contexts))
        msg = (
            f"L=1 check pooled after {e.phase}: {ratio_text(e.ratio)} over {len(e.contexts)} contexts ({where}; {e.rounds} rounds, "
            f"{e.quads} quads): {e.outcome}"
        )
        if e.decided:
            msg += f"; valid (pooled) at {', '.join(map(str, e.decided))}"
        if e.undecided:
            why = "own CI excludes 1.00" if e.valid else f"pooled {e.outcome}"
            msg += f"; still inconclusive at {', '.join(map(str, e.undecided))} ({why})"
        self._log(e.t, "info" if e.valid else "warning", msg)

    @property
    def latest_pooled(self) -> PooledValidity | None:
        return max(self.pooled.values(), key=lambda p: p.t, default=None)

    def _on_estimate(self, e: Estimate) -> None:
        if view_of(self._kind(e.phase)).layer_steps:
            return
        self.estimates[(e.phase, e.context)] = e
        self.changed |= {"marginal", "arms"}

    def _on_drift(self, e: DriftEvent) -> None:
        self.drifts.append(e)

    def _on_phase_summary(self, e: PhaseSummary) -> None:
        self.summaries.append(e)
        self._log(e.t, "info", f"{e.phase} done" + (f": {e.verdict}" if e.verdict else ""))

    def _on_log(self, e: LogMessage) -> None:
        self._log(e.t, e.level, e.message)

    def _on_error(self, e: ErrorEvent) -> None:
        self.error = e.message + (f" (in {e.where})" if e.where else "")
        self.status = "error"
        self.changed |= {"header", "phase"}
        self._log(e.t, "error", self.error)

    def _on_run_end(self, e: RunEnd) -> None:
        if self.status != "error" or e.status == "error":
            self.status = e.status
        self.changed |= {"header", "phase"}
        extra = f"; {left_out_of_verdicts(e.invalid_contexts)}" if e.invalid_contexts else ""
        self._log(e.t, "error" if e.status == "error" else "info", f"run {e.status}{extra}")

    # -- the decode phases: speculative blocks and results per setting (a draft kind at a
    # depth, or plain decode) ------------------------------------------------------------

    @property
    def draft_kinds(self) -> tuple[str, ...]:
        """The run's draft kinds in its order: the header's, else those its results name."""
        kinds = self.header.settings.draft_kinds if self.header else None
        if kinds:
            return kinds
        seen = [r.draft_kind for r in self.decode_results if r.depth and r.draft_kind]
        return tuple(dict.fromkeys(seen))

    def min_distinct_4gram(self, phase: str) -> float:
        """The phase's looping-text threshold as its scenario set it (0.5 when not recorded)."""
        p = self.header.scenario.phase(Pass.base_name(phase)) if self.header else None
        return p.min_distinct_4gram if p is not None else 0.5

    def text_repeat(self, arm: str, setting: Setting | None) -> TextRepeat | None:
        """The repetition of `setting`'s text on `arm` at the current context: its result's
        figures once recorded, else computed from the timed blocks so far (None: no tokens)."""
        if setting is None:
            return None
        a = self._arm(arm)
        if setting in a.repeats:
            return a.repeats[setting]
        texts = a.texts.get(setting)
        if not texts:
            return None
        rep = repetition_of(texts, 4)
        if rep.within is None:
            return None
        if setting in a.results:  # a result that recorded no share: no guard looked at it
            return TextRepeat(rep.within, rep.across, False, live=False)
        warning = looping_warning(rep, self.min_distinct_4gram(self.phase.name))
        return TextRepeat(rep.within, rep.across, warning is not None, live=True)

    def _setting(self, e: DecodeBlock | DecodeResult) -> Setting:
        if e.depth == 0:
            return PLAIN
        return Setting(e.draft_kind, e.depth)

    def _on_decode_block(self, e: DecodeBlock) -> None:
        arm = self._arm(e.arm)
        self.context = e.context
        if arm.counts_context != e.context:
            arm.start_context(e.context)
        st = self._setting(e)
        if e.token_ids:
            arm.texts.setdefault(st, []).append(e.token_ids)
        if e.depth:
            arm.add_steps(
                st,
                [VerifyStep(*s) for s in zip(e.drafted, e.accepted, e.emitted, strict=True)],
            )
            arm.rules[st] = e.acceptance_rule
        arm.temperature = e.temperature
        live = arm.spec_live.setdefault(st, [0, 0.0])
        live[0] += e.tokens
        live[1] += e.ms
        self.changed.add("arms")

    def _on_decode_result(self, e: DecodeResult) -> None:
        arm = self._arm(e.arm)
        st = self._setting(e)
        self.decode_results.append(e)
        if not e.measured:  # before the context's blocks: the tok/s lines start there
            if arm.counts_context != e.context:
                arm.start_context(e.context, texts=False)
            if e.bound is not None:
                arm.spec_bound[st] = e.bound
            self.changed.add("arms")
            if e.bound is None:  # a bound rejection: the engine's own log line says it, once
                who = arm_label(e.arm, e.phase)
                self._log(
                    e.t, "info", f"{who}: {st.label} at {e.context}: not measured (no blocks run)"
                )
            return
        arm.results[st] = e
        if e.depth:
            if e.counts:
                arm.counts[st] = AcceptanceCounts(**e.counts)
            if e.distinct_4gram_share is not None:
                looping = any(w.startswith(LOOPING) for w in e.warnings)
                share, across = e.distinct_4gram_share, e.distinct_4gram_share_across
                arm.repeats[st] = TextRepeat(share, across, looping, live=False)
        self.changed.add("arms")
        label = "plain decode" if e.depth == 0 else st.label
        who = arm_label(e.arm, e.phase)
        msg = f"{who}: {label} at {e.context}: {interval_text(e.tok_s, 1, ' tok/s')}"
        if e.depth and e.vs_plain is not None:
            msg += f", {ratio_text(e.vs_plain)} plain"
        self._log(e.t, "warning" if e.warnings else "info", msg)
        for w in e.warnings:
            self._log(
                e.t,
                "warning",
                f"{who} {st.label} at {e.context}: {w} (left out of verdicts)",
            )

    # -- derived views ----------------------------------------------------------------------

    def is_invalid(self, context: int, phase: str | None = None) -> bool:
        """Failed the L = 1 check at this context (in `phase`, or in any phase)."""
        return any(
            not v.valid and c == context and phase in (None, p)
            for (p, c), v in self.validity.items()
        )

    def sweep_invalid(self, context: int) -> bool:
        """Failed the L = 1 check of a sweep phase at this context (the marginal-cost figure)."""
        return any(
            not v.valid and c == context and rules_for(self._kind(p)).model_widths
            for (p, c), v in self.validity.items()
        )

    def contexts(self) -> list[int]:
        """Sweep contexts: from their steps, or from their estimates when only those were kept."""
        from_estimates = {c for (p, c) in self.estimates if rules_for(self._kind(p)).model_widths}
        return sorted({c for (_, c, _) in self.sweep_ms} | from_estimates)

    def _sweep_estimate(self, context: int) -> Estimate | None:
        found = [
            e
            for (p, c), e in self.estimates.items()
            if c == context and rules_for(self._kind(p)).model_widths
        ]
        return found[-1] if found else None

    def estimate(self, quantity: str, arm: str, context: int, width: int) -> EstimateRow | None:
        """The latest paired estimate row of a sweep context, if any."""
        e = self._sweep_estimate(context)
        if e is None:
            return None
        return next(
            (r for r in e.rows if r.quantity == quantity and r.arm == arm and r.width == width),
            None,
        )

    def swept(self, phase: str) -> bool:
        """A sweep measured `phase`: its step figures are medians over rounds."""
        return phase in self.phase_kinds and rules_for(self.phase_kinds[phase]).model_widths

    def step_median(self, phase: str, arm: str, context: int, width: int) -> float | None:
        """A step's ms as the tables and exports show it: a sweep's median over rounds; a
        decode phase's (`tune`, `tune:verify`) verify ms of the setting that verified `width`
        tokens there (where two kinds did, the arm's latest kind's; none for L = 1, which
        no table gives). None before that context's figures."""
        if self.swept(phase):
            e = self.estimates.get((phase, context))
            for r in e.rows if e else ():
                if (r.quantity, r.arm, r.width) == ("step_ms", arm, width):
                    return float(r.median)
            return None
        base = phase.split(":")[0]
        verified = {
            r.draft_kind: r.verify_ms_median
            for r in self.decode_results
            if (r.phase, r.arm, r.context, r.depth) == (base, arm, context, width - 1)
            and r.measured
            and r.verify_ms_median
        }
        if not verified or width < 2:
            return None
        latest = self.arms[arm].setting if arm in self.arms else None
        kind = latest.kind if latest is not None and latest.kind in verified else [*verified][-1]
        return verified[kind]

    def l_median(self, arm: str, context: int, width: int) -> float | None:
        """Step ms: the sampler's median over rounds once the context has an estimate, else the
        plain median of the samples (before its first round ends, or a run without estimates)."""
        row = self.estimate("step_ms", arm, context, width)
        if row is not None:
            return row.median
        return _median(self.sweep_ms.get((arm, context, width), []))

    def marginal(self, arm: str) -> list[tuple[int, float]]:
        """(context, marginal cost of the second query, ms) for every context that has one: the
        paired per-round estimate when the recording has it, else median(L=2) - median(L=1)."""
        return [(c, m) for c, m, _, _ in self.marginal_ci(arm)]

    def marginal_ci(self, arm: str) -> list[tuple[int, float, float | None, float | None]]:
        """(context, median, CI low, CI high) of the marginal cost; CI None without an estimate."""
        out: list[tuple[int, float, float | None, float | None]] = []
        for c in self.contexts():
            row = self.estimate("marginal_ms", arm, c, 2)
            if row is not None:
                out.append((c, row.median, row.low, row.high))
                continue
            l1, l2 = self.l_median(arm, c, 1), self.l_median(arm, c, 2)
            if l1 is not None and l2 is not None:
                out.append((c, l2 - l1, None, None))
        return out

    @property
    def harness_bias(self) -> str:
        """'harness bias ±0.4% (...)' from the header, when an A/A run was stored for this device."""
        from mlatui.store import describe_bias as describe

        if self.header is None:
            return ""
        return describe(self.header.settings.harness_bias)

    @property
    def synthetic(self) -> bool:
        return bool(self.header and self.header.synthetic_acceptance)
