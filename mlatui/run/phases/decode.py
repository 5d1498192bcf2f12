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

A decode block is the sampler's unit of work (`BlockRunner`): one arm decodes `tokens` tokens at
one setting, its acceptance is counted and its block recorded. Settings rejected by bound
(mlatui.measure.acceptance) are decided after a context's verify rounds and before its blocks: a
rejected (arm, setting) runs no blocks, and its DecodeResult says so (`measured` False, `bound`).
"""

from __future__ import annotations

import functools
from dataclasses import asdict, dataclass, field, replace

from mlatui.config.scenario import Phase
from mlatui.measure.acceptance import (
    AcceptanceCounts,
    Repetition,
    rejection_text,
    repetition_of,
    speedup_bound,
)
from mlatui.measure.estimates import ContextEstimates, Outcome, Timing, control_outcome, stable_seed
from mlatui.measure.plans import (
    VERIFY_MIN_ROUNDS,
    Setting,
    block_plan,
    decode_segments,
    decode_settings,
    spec_depths,
    verify_plan,
    verify_widths,
)
from mlatui.measure.sampler import L1_TOLERANCE_PCT, Hooks, SamplerRun, sample_context
from mlatui.run.arms import Arm, unpinned
from mlatui.run.decode_stream import (
    BlockResult,
    DecodeStream,
    Sampling,
    SyntheticDraft,
    open_stream,
    recopy_stream_caches,
    rewind,
    run_block,
)
from mlatui.run.drafts import MTPDraft
from mlatui.run.phases.base import (
    ProgressTracker,
    RunContext,
    StepSite,
    cache_rounds_hook,
    close_phase,
    emit_phase_start,
    sample_steps,
    share_context,
    validity,
)
from mlatui.run.phases.decode_verdict import (
    Guard,
    GuardSettings,
    decode_verdict,
    first_divergence,
    guard_warnings,
    tune_verdict,
)
from mlatui.run.phases.results import L1Quads, Need, PhaseInputs, PhaseResult, Slices
from mlatui.stream.event_base import Interval
from mlatui.stream.events import (
    ARMS,
    DecodeBlock,
    DecodeResult,
    SpeedupBound,
    Validity,
    arm_label,
    ratio_label,
)
from mlatui.stream.phase_rows import DecodeRow, ci_parts
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


def _sweep_verify(
    ctx: RunContext, phase: Phase, length: int, depths: list[int], inputs: PhaseInputs
) -> ContextEstimates | None:
    """The sweep's rounds at this context as the verify steps (`verify_from`, what the budget
    writes on a slow device): the same synced steps, arms, widths and tokens, measured minutes
    before; None when that sweep did not measure every width needed here."""
    est = inputs.sweep_estimates(phase.verify_from, length)
    need = verify_widths(depths)
    if est is None or not all((arm, w) in est.step_ms for arm in ARMS for w in need):
        ctx.log(
            "info",
            f"{phase.name} @ {length}: {phase.verify_from} did not measure L = "
            f"{', '.join(map(str, need))} at {length}, so the verify steps are measured here",
        )
        return None
    ctx.log(
        "info",
        f"{phase.name} @ {length}: verify steps (L = {', '.join(map(str, need))}) and the "
        f"L = 1 check are {phase.verify_from}'s at {length} ({est.rounds} rounds), not "
        "measured again",
    )
    return est


@dataclass(frozen=True)
class ContextDone:
    """A decode context's summary rows, its L = 1 check and the L = 1 quads it measured."""

    rows: list[DecodeRow]
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
    check = check_before_blocks(ctx.seed, length, verify, inputs.l1 + l1)
    slices = replace(inputs.slices, grow_to=0) if check is Outcome.INCONCLUSIVE else inputs.slices
    run = _sample_blocks(ctx, runner, bounds, progress, slices)
    added_s += run.added_s
    if runner.divergence is not None:
        at, rnd = runner.divergence
        ctx.log(
            "warning",
            f"{phase.name} @ {length}: arms diverged at token {at} (round {rnd + 1}, greedy): "
            "their acceptance may differ for reasons unrelated to the gate",
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
    plan = verify_plan(phase, depths, ctx.seed, length, ctx.settle)
    if phase.verify_from:  # the sweep was to serve: these steps were not planned
        progress.grow(plan.timed_calls())
    label = verify_label(phase)
    text = ctx.tokens_for(length + max(plan.widths))
    deadline = inputs.slices.deadline(label, length)
    site = StepSite(label, length, text[length:])
    run = sample_steps(ctx, site, plan, progress, interim=False, deadline=deadline)
    return run.final, L1Quads().plus(length, run.timings, plan.control_width), run.added_s


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
                decide_more=ctx.decide_more_by(
                    slices.deadline(phase.name, length), plan.first_rounds, slices.grow_to
                ),
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
        ctx.log("warning", f"{phase.name}: no draft source, so only plain decode is measured")
    sampling = sampling_of(phase)
    if not sampling.greedy and _synthetic(ctx):
        raise ValueError(
            f"{phase.name}: temperature {sampling.temperature:g} with a synthetic draft (random "
            "weights) — synthetic acceptance follows the greedy continuation; set temperature = 0"
        )
    planned = planned_calls(phase, settings, ctx.seed, ctx.settle)
    emit_phase_start(
        ctx, phase, index, total_phases, planned, decode_segments(phase, settings, ctx.settle)
    )
    progress = ProgressTracker(ctx, phase.name, planned)
    rows: list[DecodeRow] = []
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

    def verdict_of(rows: list[DecodeRow]) -> str:
        if phase.kind.rules.compares_depths:
            return tune_verdict(rows, TIE_PCT, phase.name)
        return decode_verdict(rows, phase.name)

    summary, ended = close_phase(ctx, phase, rows, checks, inputs.l1 + l1, verdict_of)
    return PhaseResult(summary, l1, checks=ended, finals=tuple(finals), added_s=added_s)


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
        ctx.log(
            "info",
            f"{phase.name} @ {length}: plain decode "
            f"{ratio_label(phase.name)} {interval_text(ratio)} over {blocks.rounds} rounds of blocks "
            f"({(blocks.control_outcome or Outcome.INCONCLUSIVE).value}); the L = 1 check "
            "is decided on the synced steps",
        )
    # a bootstrap over fewer rounds than the verify's minimum is too narrow to veto on: on the
    # 2-core CPU 4 rounds of blocks once read 1.094 [1.091, 1.120] where the steps read 1.00
    if blocks.control_outcome is Outcome.INVALID and blocks.rounds >= VERIFY_MIN_ROUNDS:
        return validity(ctx, phase.name, length, blocks)
    if _pools(verify, l1, length):
        verify = _pooled(ctx, phase, length, verify, l1)
    return validity(ctx, phase.name, length, verify)


def _pools(verify: ContextEstimates | None, l1: L1Quads, length: int) -> bool:
    """Whether the check is decided again on every L = 1 quad of the pass: its verify steps'
    own is undecided and more than one run measured this context."""
    own = verify.control_outcome if verify is not None else None
    return own is Outcome.INCONCLUSIVE and l1.count(length) > 1


def check_before_blocks(
    seed: int, length: int, verify: ContextEstimates | None, l1: L1Quads
) -> Outcome:
    """The L = 1 check as `decode_validity` reads it before any block: the verify steps' own
    (the sweep's when borrowed), pooled only where it pools; without them, every quad pooled.
    The same quads bootstrapped on another seed can read otherwise: the H100's sweep check at
    24576, valid at [0.987, 1.019], read [0.981, 1.020] pooled."""
    own = verify.control_outcome if verify is not None else None
    if own is not None and not _pools(verify, l1, length):
        return own
    ratio = l1.pooled_ratio(length, seed)
    return Outcome.INCONCLUSIVE if ratio is None else control_outcome(ratio, L1_TOLERANCE_PCT)


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
    ctx.log(
        "info",
        f"{phase.name} @ {length}: L = 1 check undecided on its own steps; on all {rounds} "
        f"rounds of L = 1 quads this run measured at {length} ({runs} sampler runs, the "
        f"sweep's included): {interval_text(ratio)}, "
        f"{outcome.value}",
    )
    pooled = replace(verify, ratio={**verify.ratio, 1: ratio}, control_outcome=outcome)
    return replace(pooled, rounds=rounds)


def _synthetic(ctx: RunContext) -> bool:
    return any(isinstance(w.arm.draft, SyntheticDraft) for w in ctx.workers.values())


def _runtime_name(arm: Arm, st: Setting) -> str:
    if st.depth == 0:
        return "mlx_lm.generate_step"
    if isinstance(arm.draft_of(st.kind), MTPDraft):
        return "mlatui MTP loop (pipelined)"
    return "mlx_lm.speculative_generate_step"


class DecodeResults:
    """A context's DecodeResult per arm and setting, from its blocks' estimates, the runner's
    counts and texts, the verify steps and the bounds; each emitted as it is made."""

    def __init__(
        self,
        ctx: RunContext,
        runner: BlockRunner,
        est: ContextEstimates,
        verify: ContextEstimates | None,
        bounds: BoundDecision,
    ) -> None:
        self.ctx, self.runner, self.est, self.verify, self.bounds = ctx, runner, est, verify, bounds
        phase = runner.phase
        self.guards = GuardSettings(
            phase.min_draft_share, phase.min_verify_steps, phase.min_distinct_4gram
        )

    def rows(self, check: Validity) -> list[DecodeRow]:
        rows = []
        for width, st in enumerate(self.runner.settings, start=1):
            for arm in ARMS:
                if (arm, st) in self.bounds.rejected:  # emitted before the blocks
                    rows.append(_row(self.bounds.rejected[(arm, st)], check))
                    continue
                r = self._result(arm, width, st)
                if r is not None:
                    self.ctx.emit(r)
                    rows.append(_row(r, check))
        return rows

    def _speedup(self, arm: str, width: int, depth: int) -> Interval | None:
        """Tok/s over plain decode, paired within rounds (plain decode: exactly 1)."""
        flat = self.est.vs_l1.get((arm, width))
        if flat is not None and flat.median > 0:
            return flat.reciprocal()
        return Interval(1.0, 1.0, 1.0, self.est.rounds) if depth == 0 else None

    def _warnings(self, arm: str, st: Setting, speedup: Interval | None) -> list[str]:
        runner = self.runner
        if not st.depth:
            return []
        rep = runner.repetition(arm, st)
        # a synthetic draft's acceptance does not depend on the text: looping cannot inflate it
        warnings = guard_warnings(
            runner.counts.get((arm, st)),
            speedup.low if speedup else None,
            self.guards,
            None if runner.synthetic else rep,
        )
        if runner.divergence is not None and not runner.synthetic:
            at, rnd = runner.divergence
            warnings.append(f"{Guard.DIVERGED} at token {at} (round {rnd + 1})")
        return warnings

    def _result(self, arm: str, width: int, st: Setting) -> DecodeResult | None:
        runner, est, depth, n = self.runner, self.est, st.depth, self.runner.n
        ms = est.step_ms.get((arm, width))
        if ms is None:
            return None
        speedup = self._speedup(arm, width, depth)
        counts = runner.counts.get((arm, st))
        rep = runner.repetition(arm, st)
        verify_iv = self.verify.step_ms.get((arm, depth + 1)) if self.verify and depth else None
        timed = [t for t in runner.timings if t.arm == arm and t.width == width]
        return DecodeResult(
            self.ctx.now(),
            runner.phase.name,
            arm,
            runner.length,
            depth,
            n * len(timed),
            sum(t.ms for t in timed) / 1e3,
            ms.reciprocal(n * 1e3),
            counts.unconditional if counts else (),
            verify_iv.median if verify_iv else None,
            None,
            speedup,
            counts.conditional if counts else (),
            counts.mean_accepted if counts else None,
            asdict(counts) if counts else {},
            runner.rule_of(arm, st.kind).value if depth else "",
            runner.sampling.to_dict(),
            tuple(self._warnings(arm, st, speedup)),
            est.rounds,
            n,
            _runtime_name(self.ctx.workers[arm].arm, st),
            st.kind if depth else "",
            rep.within if rep else None,
            rep.across if rep else None,
            bound=self.bounds.bounds.get((arm, st)),
        )


def _row(r: DecodeResult, check: Validity) -> DecodeRow:
    tok_s, tok_s_low, tok_s_high = ci_parts(r.tok_s)
    vs_plain, vs_plain_low, vs_plain_high = ci_parts(r.vs_plain)
    if not r.measured and r.bound is not None:  # the most it could have gained
        vs_plain_high = r.bound.value
    return DecodeRow(
        context=r.context,
        arm=r.arm,
        depth=r.depth,
        draft_kind=r.draft_kind,
        tok_s=tok_s,
        tok_s_low=tok_s_low,
        tok_s_high=tok_s_high,
        vs_plain=vs_plain,
        vs_plain_low=vs_plain_low,
        vs_plain_high=vs_plain_high,
        acceptance_conditional=tuple(r.acceptance_conditional),
        acceptance_by_position=tuple(r.acceptance_by_position),
        mean_accepted=r.mean_accepted,
        verify_ms_median=r.verify_ms_median,
        tokens=r.tokens,
        rounds=r.rounds,
        acceptance_rule=r.acceptance_rule,
        temperature=r.sampling.get("temperature", 0.0),
        distinct_4gram_share=r.distinct_4gram_share,
        distinct_4gram_share_across=r.distinct_4gram_share_across,
        warnings=tuple(r.warnings),
        valid=check.valid,
        outcome=check.verdict,
        basis=check.basis,
        measured=r.measured,
        bound=r.bound,
    )


Key = tuple[str, Setting]  # (arm, setting)


def bounds_of(verify: ContextEstimates, settings: tuple[Setting, ...]) -> dict[Key, SpeedupBound]:
    """Every speculative setting's bound per arm, from the verify rounds' plain (L = 1) and
    verify (L = depth + 1) steps and their paired ratio."""
    out: dict[Key, SpeedupBound] = {}
    for st in settings:
        if not st.depth:
            continue
        for arm in ARMS:
            plain = verify.step_ms.get((arm, 1))
            wide = verify.step_ms.get((arm, st.depth + 1))
            if plain is None or wide is None:
                continue
            b = speedup_bound(st.depth, plain, wide, verify.vs_l1.get((arm, st.depth + 1)))
            if b is not None:
                out[(arm, st)] = b
    return out


@dataclass(frozen=True)
class BoundDecision:
    """A context's bounds per (arm, setting), and the results of those they rejected (emitted
    before any block ran)."""

    bounds: dict[Key, SpeedupBound] = field(default_factory=dict)
    rejected: dict[Key, DecodeResult] = field(default_factory=dict)

    def skipped_widths(self, settings: tuple[Setting, ...]) -> frozenset[tuple[str, int]]:
        """The sampler's (arm, width) of the rejected settings (width = place in settings + 1)."""
        return frozenset((arm, settings.index(st) + 1) for arm, st in self.rejected)


def decide_bounds(ctx: RunContext, runner: BlockRunner, verify: ContextEstimates) -> BoundDecision:
    """The bounds from the verify rounds; with the phase's `reject_by_bound`, the settings they
    reject (rank 0 decides for every rank), emitted now and logged."""
    bounds = bounds_of(verify, runner.settings)
    if not runner.phase.reject_by_bound:
        return BoundDecision(bounds)
    keys = [(arm, st) for st in runner.settings for arm in ARMS if (arm, st) in bounds]
    decided = ctx.leader_decides_each([bounds[k].rejects for k in keys])
    rejected = {
        key: _rejected(ctx, runner, verify, key, bounds[key])
        for key, rejects in zip(keys, decided, strict=True)
        if rejects
    }
    return BoundDecision(bounds, rejected)


def _rejected(
    ctx: RunContext, runner: BlockRunner, verify: ContextEstimates, key: Key, b: SpeedupBound
) -> DecodeResult:
    phase, length, (arm, st) = runner.phase, runner.length, key
    verify_iv = verify.step_ms.get((arm, st.depth + 1))
    r = DecodeResult(
        ctx.now(),
        phase.name,
        arm,
        length,
        st.depth,
        0,
        0.0,
        None,
        verify_ms_median=verify_iv.median if verify_iv else None,
        sampling=runner.sampling.to_dict(),
        rounds=verify.rounds,
        block_tokens=phase.tokens,
        draft_kind=st.kind,
        measured=False,
        bound=b,
    )
    ctx.emit(r)
    ctx.log(
        "info",
        f"{phase.name} @ {length}: {arm_label(arm, phase.name)} {st.label} "
        f"{rejection_text(b)}; its decode "
        "blocks are not run",
    )
    return r


def sampling_of(phase: Phase) -> Sampling:
    return Sampling(phase.temperature, phase.top_p)


class BlockRunner:
    """The sampler's `measure` for decode blocks: runs one block on an arm's thread, keeps its
    acceptance counts (timed blocks only), rewinds both streams at every round's start. The
    sampler's width w runs `settings[w - 1]` (plain decode, or a draft kind at a depth)."""

    def __init__(
        self, ctx: RunContext, phase: Phase, length: int, streams, settings: tuple[Setting, ...]
    ):
        self.ctx, self.phase, self.length, self.streams = ctx, phase, length, streams
        self.settings = settings
        self.sampling = sampling_of(phase)
        self.n = phase.tokens
        self.round = 0
        self.fresh_round = True
        self.blocks_in_round: dict[tuple[str, Setting], int] = {}
        self.counts = {
            (a, st): AcceptanceCounts(st.depth) for a in ARMS for st in settings if st.depth
        }
        self.pending: list[tuple[str, Setting, BlockResult]] = []
        # the tokens of every timed block, per arm and setting (plain decode too): the looping guard
        self.texts: dict[tuple[str, Setting], list[tuple[int, ...]]] = {}
        self.divergence: tuple[int, int] | None = None  # (token, round)
        self.filled = False  # a plain block ran in a rejected block's place (filler)
        self.synthetic = _synthetic(ctx)
        self.timings: list[Timing] = []

    def setting(self, width: int) -> Setting:
        return self.settings[width - 1]

    def _block(self, arm: str, width: int, plain: bool = False) -> BlockResult:
        """One block at `width`'s setting (`plain`: plain decode in its place, same seed)."""
        st = self.setting(width)
        key = (arm, st)
        index = self.blocks_in_round.get(key, 0)
        self.blocks_in_round[key] = index + 1
        # every kind at a depth draws the same sampler stream: kinds compare on the same draws
        seed = stable_seed(self.ctx.seed, self.phase.name, self.length, self.round, st.depth, index)
        stream = self.streams[arm]
        n = self.n
        depth = 0 if plain else st.depth

        def block(a: Arm) -> BlockResult:
            # run_block syncs every stream it ran on after its clock: under mlx.launch no step is
            # left in flight to interleave with the next lockstep collective
            return run_block(a, stream, Setting(st.kind, depth), n, self.sampling, seed)

        return self.ctx.workers[arm].call(block)

    def warm(self, arm: str, width: int) -> None:
        self._block(arm, width)

    def filler(self, arm: str, width: int) -> None:
        """Untimed, in the place of a block rejected by bound: plain decode of as many tokens,
        so this arm's stream stays as long as the other's (every later block of the round then
        runs at the same context length in both arms). Nothing is recorded."""
        self._start_round()
        self._block(arm, width, plain=True)
        self.filled = True

    def _start_round(self) -> None:
        if self.fresh_round:
            self.fresh_round = False
            self.blocks_in_round = {}
            for name in ARMS:
                s = self.streams[name]
                self.ctx.workers[name].call(functools.partial(rewind, s=s))

    def measure(self, arm: str, width: int) -> float:
        self._start_round()
        result = self._block(arm, width)
        # ranks that emitted different tokens would issue different collectives next
        self.ctx.check_same(hash(tuple(result.tokens)), "the tokens a decode block emitted")
        self.pending.append((arm, self.setting(width), result))
        return result.ms

    def on_timing(self, t: Timing) -> None:
        arm, st, r = self.pending.pop()
        depth = st.depth
        self.texts.setdefault((arm, st), []).append(tuple(r.tokens))
        if depth > 0:
            for step in r.steps:
                self.counts[(arm, st)].add(step)
        self.ctx.emit(
            DecodeBlock(
                self.ctx.now(),
                self.phase.name,
                arm,
                self.length,
                depth,
                t.round,
                len(r.tokens),
                r.ms,
                tuple(s.drafted for s in r.steps),
                tuple(s.accepted for s in r.steps),
                tuple(s.emitted for s in r.steps),
                tuple(r.tokens),
                self.rule_of(arm, st.kind).value if depth else "",
                self.sampling.temperature,
                st.kind if depth else "",
            )
        )

    def repetition(self, arm: str, st: Setting) -> Repetition | None:
        """The 4-gram repetition of the setting's timed blocks on this arm (None: none ran)."""
        texts = self.texts.get((arm, st))
        return repetition_of(texts, 4) if texts else None

    def rule_of(self, arm: str, kind: str):
        draft = self.ctx.workers[arm].arm.draft_of(kind)
        return self.sampling.rule(isinstance(draft, MTPDraft))

    def end_round(self) -> None:
        a, b = (self.streams[name].tokens for name in ARMS)
        at = first_divergence(a, b)
        # a filler is plain decode: it continues the same greedy stream as a real draft's block,
        # but not a synthetic draft's (its acceptance, and so its tokens, are drawn)
        comparable = not (self.filled and self.synthetic)
        if at is not None and self.divergence is None and self.sampling.greedy and comparable:
            self.divergence = (at, self.round)
        self.round += 1
        self.fresh_round = True
