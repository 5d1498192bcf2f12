"""Decode and tune phases: plain decode vs speculative decoding, per arm, as mlx-lm runs them.

At each context, two measurements:

1. verify ms: the sampler's synced steps at L = 1 .. max depth + 1 (like the sweep), so the
   verify cost of every depth is known apart from the runtime's overlap;
2. throughput: the sampler schedules decode *blocks* (an arm decodes `tokens` tokens at one
   setting without interruption, through mlx-lm's generate_step / speculative_generate_step or
   the MTP loop; see mlatui.run.decode_stream). A setting is a sampler "width" (depth + 1; plain decode is
   width 1, the L = 1 control): blocks run A B B A per setting, settings rotate within rounds,
   and tok/s, the speedup over plain decode (paired within rounds) and the stock/patched check of
   plain decode all come with CIs from the same rounds.

The context's L = 1 check (`decode_validity`): the synced verify steps decide, the plain-decode
blocks may veto, and an undecided check pools every L = 1 quad the pass measured at the context.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from mlatui.config.scenario import Phase
from mlatui.measure.estimates import ContextEstimates, Outcome, Timing, control_outcome
from mlatui.measure.plans import (  # noqa: F401 - re-exported
    PLAIN_QUADS,
    VERIFY_MAX_ROUNDS,
    VERIFY_MIN_ROUNDS,
    Setting,
    block_plan,
    decode_segments,
    decode_settings,
    spec_depths,
    verify_plan,
    verify_widths,
)
from mlatui.measure.sampler import Hooks, SamplerPlan, SamplerRun, sample_context, within
from mlatui.measure.timing import L1_TOLERANCE_PCT
from mlatui.run.arms import unpinned
from mlatui.run.decode_stream import (
    DecodeStream,
    SyntheticDraft,
    open_stream,
    recopy_stream_caches,
)
from mlatui.run.phases.base import (
    ProgressTracker,
    RunContext,
    StepSite,
    cache_rounds_hook,
    emit_phase_start,
    mark_rows,
    pool_checks,
    sample_steps,
    share_context,
    validity,
)
from mlatui.run.phases.decode_results import (
    BlockRunner,
    BoundDecision,
    DecodeResults,
    decide_bounds,
    sampling_of,
)
from mlatui.run.phases.decode_verdict import (
    decode_verdict,
    tune_verdict,
)
from mlatui.run.phases.results import L1Quads, Need, PhaseInputs, PhaseResult, Slices
from mlatui.stream.events import (
    ARMS,
    LogMessage,
    PhaseSummary,
    Validity,
    ratio_label,
)
from mlatui.stream.phrases import interval_text

TIE_PCT = 2.0  # a deeper depth within 2% of the fastest wins (it amortises better at long outputs)


def _prepare_context(ctx: RunContext, context: int) -> tuple[int, dict[str, DecodeStream]]:
    """Prefill `context` tokens once, a copy per arm; open each arm's stream there."""
    text = ctx.tokens_for(context + 1)
    length = share_context(ctx, text[:-1])
    streams = {
        name: ctx.workers[name].call(lambda a: open_stream(a, length, text[-1], text[:-1]))
        for name in ARMS
    }
    return length, streams


def _verify_ms(
    ctx: RunContext,
    phase: Phase,
    length: int,
    depths: list[int],
    progress: ProgressTracker,
    deadline: float | None,
) -> tuple[ContextEstimates, L1Quads, float]:
    """Synced steps at L = 1 .. max depth + 1 (the sweep's measurement) for the verify ms; the
    L = 1 quads they measured and the seconds of their rounds past the planned ones."""
    plan = verify_plan(phase, depths, ctx.seed, length, ctx.settle)
    label = verify_label(phase)
    text = ctx.tokens_for(length + max(plan.widths))
    site = StepSite(label, length, text[length:])
    run = sample_steps(ctx, site, plan, progress, interim=False, deadline=deadline)
    return run.final, L1Quads().plus(length, run.timings, plan.control_width), run.added_s


def _sweep_verify(
    ctx: RunContext, phase: Phase, length: int, depths: list[int], inputs: PhaseInputs
) -> ContextEstimates | None:
    """The sweep's rounds at this context as the verify steps (`verify_from`, what the budget
    writes on a slow device): the same synced steps, arms, widths and tokens, measured minutes
    before; None when that sweep did not measure every width needed here."""
    est = inputs.sweep_estimates(phase.verify_from, length)
    need = verify_widths(depths)
    if est is None or not all((arm, w) in est.step_ms for arm in ARMS for w in need):
        ctx.emit(
            LogMessage(
                ctx.now(),
                "info",
                f"{phase.name} @ {length}: {phase.verify_from} did not measure L = "
                f"{', '.join(map(str, need))} at {length}, so the verify steps are measured here",
            )
        )
        return None
    ctx.emit(
        LogMessage(
            ctx.now(),
            "info",
            f"{phase.name} @ {length}: verify steps (L = {', '.join(map(str, need))}) and the "
            f"L = 1 check are {phase.verify_from}'s at {length} ({est.rounds} rounds), not "
            "measured again",
        )
    )
    return est


@dataclass(frozen=True)
class ContextDone:
    """A decode context's summary rows, its L = 1 check and the L = 1 quads it measured."""

    rows: list[dict]
    check: Validity
    l1: L1Quads
    finals: tuple[tuple[str, int, ContextEstimates], ...] = ()  # its verify steps', if measured
    added_s: float = 0.0  # its rounds past the planned ones


def decode_context(
    ctx: RunContext,
    phase: Phase,
    context: int,
    settings: tuple[Setting, ...],
    progress: ProgressTracker,
    inputs: PhaseInputs,
) -> ContextDone:
    """Verify steps, then rounds of decode blocks at one context; `inputs.l1` holds every
    L = 1 quad of the pass before this context (the phase's earlier contexts' included)."""
    length, streams = _prepare_context(ctx, context)
    verify, l1, added_s = _verify_steps(ctx, phase, length, spec_depths(settings), progress, inputs)
    runner = BlockRunner(ctx, phase, length, streams, settings)
    # decided after the verify rounds, before any block: a setting that cannot win runs none
    bounds = decide_bounds(ctx, runner, verify) if verify is not None else BoundDecision()
    # a budget's blocks grow only where the L = 1 check so far is decided: else no verdict
    # reads them, and the time is the check's (the engine's last rounds, mlatui.run.engine)
    ratio = (inputs.l1 + l1).pooled_ratio(length, ctx.seed)
    decided = (
        ratio is not None and control_outcome(ratio, L1_TOLERANCE_PCT) is not Outcome.INCONCLUSIVE
    )
    slices = inputs.slices if decided else replace(inputs.slices, grow_to=0)
    run = _sample_blocks(ctx, runner, bounds, progress, slices)
    added_s += run.added_s
    if runner.divergence is not None:
        at, rnd = runner.divergence
        ctx.emit(
            LogMessage(
                ctx.now(),
                "warning",
                f"{phase.name} @ {length}: arms diverged at token {at} (round {rnd + 1}, greedy): "
                "their acceptance may differ for reasons unrelated to the gate",
            )
        )
    v = decode_validity(ctx, phase, length, verify, run.final, inputs.l1 + l1)
    rows = DecodeResults(ctx, runner, run.final, verify, bounds).rows(v)
    if verify is None or not l1.runs:  # no drafts, or the sweep's steps (`verify_from`)
        return ContextDone(rows, v, l1, added_s=added_s)
    return ContextDone(rows, v, l1, ((verify_label(phase), length, verify),), added_s)


def verify_label(phase: Phase) -> str:
    """The label of a decode phase's verify steps in the events."""
    return f"{phase.name}:verify"


def _verify_steps(
    ctx: RunContext,
    phase: Phase,
    length: int,
    depths: list[int],
    progress: ProgressTracker,
    inputs: PhaseInputs,
) -> tuple[ContextEstimates | None, L1Quads, float]:
    """The verify steps at L = 1 .. max depth + 1: the sweep's (`verify_from`) when it measured
    them all, else measured here (with the L = 1 quads they took and the seconds of their
    rounds past the planned ones); None without drafts."""
    if not depths:
        return None, L1Quads(), 0.0
    verify = _sweep_verify(ctx, phase, length, depths, inputs) if phase.verify_from else None
    if verify is not None:
        return verify, L1Quads(), 0.0
    if phase.verify_from:  # the sweep was to serve: these steps were not planned
        progress.grow(verify_plan(phase, depths, ctx.seed, length, ctx.settle).timed_calls())
    deadline = inputs.slices.deadline(verify_label(phase), length)
    return _verify_ms(ctx, phase, length, depths, progress, deadline)


def _sample_blocks(
    ctx: RunContext,
    runner: BlockRunner,
    bounds: BoundDecision,
    progress: ProgressTracker,
    slices: Slices,
) -> SamplerRun:
    """The sampler's rounds of decode blocks, the rejected settings' blocks skipped; under a
    budget, rounds grow while the context's slice lasts."""
    phase, settings, length = runner.phase, runner.settings, runner.length
    plan = block_plan(phase, settings, ctx.seed, length, bounds.skipped_widths(settings))
    progress.shrink(
        block_plan(phase, settings, ctx.seed, length).timed_calls() - plan.timed_calls()
    )

    def on_timing(t: Timing) -> None:
        runner.on_timing(t)
        progress.advance()

    def on_round(e: ContextEstimates) -> None:
        runner.end_round()
        progress.after_round(plan, e)

    with unpinned():  # as users run mlx-lm: the next step is built while this one computes
        run = sample_context(
            plan,
            Hooks(
                runner.measure,
                warm=runner.warm,
                clock=ctx.now,
                on_timing=on_timing,
                on_round=on_round,
                check_stop=ctx.check_stop,
                decide_more=_decide_more(ctx, slices, phase.name, length, plan),
                between_rounds=cache_rounds_hook(ctx, recopy_stream_caches),
                on_skip=runner.filler,
            ),
        )
    runner.timings = run.timings
    return run


def planned_calls(phase: Phase, settings: tuple[Setting, ...], seed: int, settle: bool) -> int:
    depths = spec_depths(settings)
    blocks = block_plan(phase, settings, seed, 0).timed_calls()
    measured = depths and not phase.verify_from  # else the sweep's rounds serve
    verify = verify_plan(phase, depths, seed, 0, settle).timed_calls() if measured else 0
    return len(phase.contexts) * (blocks + verify)


NEEDS = frozenset({Need.L1_QUADS, Need.SWEEP_ESTIMATES})


def run_decode(
    ctx: RunContext, phase: Phase, index: int, total_phases: int, inputs: PhaseInputs
) -> PhaseResult:
    """Plain decode and speculative decoding at each context, for every depth of every draft
    kind, both arms."""
    settings = decode_settings(phase, ctx.draft_kinds)
    if len(settings) == 1:
        ctx.emit(
            LogMessage(
                ctx.now(),
                "warning",
                f"{phase.name}: no draft source, so only plain decode is measured",
            )
        )
    sampling = sampling_of(phase)
    if not sampling.greedy and any(
        isinstance(w.arm.draft, SyntheticDraft) for w in ctx.workers.values()
    ):
        raise ValueError(
            f"{phase.name}: temperature {sampling.temperature:g} with a synthetic draft (random "
            "weights) — synthetic acceptance follows the greedy continuation; set temperature = 0"
        )
    planned = planned_calls(phase, settings, ctx.seed, ctx.settle)
    emit_phase_start(
        ctx, phase, index, total_phases, planned, decode_segments(phase, settings, ctx.settle)
    )
    progress = ProgressTracker(ctx, phase.name, planned)
    rows: list[dict] = []
    checks: list[Validity] = []
    l1 = L1Quads()  # this phase's own
    finals: list[tuple[str, int, ContextEstimates]] = []
    added_s = 0.0
    for context in phase.contexts:
        ctx.check_stop()
        so_far = replace(inputs, l1=inputs.l1 + l1)
        done = decode_context(ctx, phase, context, settings, progress, so_far)
        rows += done.rows
        checks.append(done.check)
        l1 = l1 + done.l1
        finals += done.finals
        added_s += done.added_s
    pooled = pool_checks(ctx, phase.name, checks, inputs.l1 + l1)
    rows = mark_rows(rows, pooled)
    verdict = (
        tune_verdict(rows, TIE_PCT, phase.name)
        if phase.kind.rules.compares_depths
        else decode_verdict(rows, phase.name)
    )
    summary = PhaseSummary(ctx.now(), phase.name, phase.kind, tuple(rows), verdict)
    ctx.emit(summary)
    ended = tuple(pooled.get(v.context, v) for v in checks)
    return PhaseResult(summary, l1, checks=ended, finals=tuple(finals), added_s=added_s)


def _decide_more(
    ctx: RunContext, slices: Slices, part: str, length: int, plan: SamplerPlan
) -> Callable[[bool], bool]:
    deadline = slices.deadline(part, length)
    if deadline is None:
        return ctx.decide_more
    return within(ctx.decide_more, ctx.now, deadline, plan.first_rounds, slices.grow_to)


def decode_validity(
    ctx: RunContext,
    phase: Phase,
    length: int,
    verify: ContextEstimates | None,
    blocks: ContextEstimates,
    l1: L1Quads,
) -> Validity:
    """The context's L = 1 check: decided on the synced verify steps when there are any; the
    plain-decode blocks' own stock/patched ratio invalidates it only when its CI lies wholly
    outside the tolerance (their scatter leaves them undecided too often to decide alone). An
    undecided verify check is decided again on `l1` (every L = 1 quad of the pass so far) when
    more than one run measured this context."""
    if verify is None or verify.control_outcome is None:
        return validity(ctx, phase.name, length, blocks)
    ratio = blocks.control_ratio
    if ratio is not None:
        ctx.emit(
            LogMessage(
                ctx.now(),
                "info",
                f"{phase.name} @ {length}: plain decode "
                f"{ratio_label(phase.name)} {interval_text(ratio)} over {blocks.rounds} rounds of blocks "
                f"({(blocks.control_outcome or Outcome.INCONCLUSIVE).value}); the L = 1 check "
                "is decided on the synced steps",
            )
        )
    # a bootstrap over fewer rounds than the verify's minimum is too narrow to veto on: on the
    # 2-core CPU 4 rounds of blocks once read 1.094 [1.091, 1.120] where the steps read 1.00
    if blocks.control_outcome is Outcome.INVALID and blocks.rounds >= VERIFY_MIN_ROUNDS:
        return validity(ctx, phase.name, length, blocks)
    if verify.control_outcome is Outcome.INCONCLUSIVE and l1.count(length) > 1:
        verify = _pooled(ctx, phase, length, verify, l1)
    return validity(ctx, phase.name, length, verify)


def _pooled(
    ctx: RunContext, phase: Phase, length: int, verify: ContextEstimates, l1: L1Quads
) -> ContextEstimates:
    """The check on every L = 1 quad this run measured at this context (the sweep's too): the
    same arms and hypothesis, paired quads whose regimes cancel within each quad."""
    timings = l1.pooled(length)
    ratio = l1.pooled_ratio(length, ctx.seed)
    if ratio is None:
        return verify
    outcome = control_outcome(ratio, verify.tolerance_pct)
    runs = l1.count(length)
    rounds = len({t.round for t in timings})
    ctx.emit(
        LogMessage(
            ctx.now(),
            "info",
            f"{phase.name} @ {length}: L = 1 check undecided on its own steps; on all {rounds} "
            f"rounds of L = 1 quads this run measured at {length} ({runs} sampler runs, the "
            f"sweep's included): {interval_text(ratio)}, "
            f"{outcome.value}",
        )
    )
    pooled = replace(verify, ratio={**verify.ratio, 1: ratio}, control_outcome=outcome)
    return replace(pooled, rounds=rounds)
