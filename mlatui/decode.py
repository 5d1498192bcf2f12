"""Decode and tune phases: plain decode vs speculative decoding, per arm, as mlx-lm runs them.

At each context, two measurements:

1. verify ms: the sampler's synced steps at L = 1 .. max depth + 1 (like the sweep), so the
   verify cost of every depth is known apart from the runtime's overlap;
2. throughput: the sampler schedules decode *blocks* (an arm decodes `tokens` tokens at one
   setting without interruption, through mlx-lm's generate_step / speculative_generate_step or
   the MTP loop; see mlatui.runtime). A setting is a sampler "width" (depth + 1; plain decode is
   width 1, the L = 1 control): blocks run A B B A per setting, settings rotate within rounds,
   and tok/s, the speedup over plain decode (paired within rounds) and the stock/patched check of
   plain decode all come with CIs from the same rounds.
"""

from __future__ import annotations

import mlx.core as mx
from mlx_lm.generate import generation_stream

from mlatui.acceptance import AcceptanceCounts
from mlatui.arms import Arm, unpinned
from mlatui.decode_stream import (
    DecodeStream,
    SyntheticDraft,
    open_stream,
    rewind,
    run_block,
)
from mlatui.decode_verdict import (
    Guard,
    GuardSettings,
    decode_verdict,
    first_divergence,
    guard_warnings,
    tune_verdict,
)
from mlatui.estimates import ContextEstimates, Outcome, Timing, stable_seed
from mlatui.events import DecodeBlock, DecodeResult, LogMessage, PhaseStart, PhaseSummary, Step
from mlatui.measure import L1_TOLERANCE_PCT
from mlatui.mtp import MTPDraft
from mlatui.phases import (
    ARM_ORDER,
    EstimateEmitter,
    ProgressTracker,
    RunContext,
    forward_and_trim,
    share_context,
    validity,
)
from mlatui.runtime import BlockResult, Sampling
from mlatui.sampler import SamplerPlan, sample_context
from mlatui.scenario import Phase

TIE_PCT = 2.0  # a deeper depth within 2% of the fastest wins (it amortises better at long outputs)
VERIFY_ROUNDS = 2
# Plain decode gets two A B B A quads per round: it is the L = 1 check of these phases, and with
# one quad per round 8 rounds of 16-token blocks left it inconclusive (CI ±3-5%) on an idle CPU.
PLAIN_QUADS = 2


def sampling_of(phase: Phase) -> Sampling:
    return Sampling(phase.temperature, phase.top_p)


def block_plan(phase: Phase, depths: list[int], seed: int, context: int) -> SamplerPlan:
    rounds = max(2, phase.reps)
    return SamplerPlan(
        (1, *[d + 1 for d in depths]),
        min_rounds=rounds,
        max_rounds=max(phase.max_rounds or 2 * rounds, rounds),
        warmup=phase.warmup,
        control_width=1,
        control_quads=PLAIN_QUADS,
        tolerance_pct=L1_TOLERANCE_PCT,
        seed=stable_seed(seed, phase.name, "blocks", context),
        settle=False,  # a block is many steps: one arm's carry-over is spread over all of them
    )


def verify_plan(phase: Phase, depths: list[int], seed: int, context: int, settle: bool):
    return SamplerPlan(
        tuple(range(1, max(depths) + 2)),
        min_rounds=VERIFY_ROUNDS,
        max_rounds=VERIFY_ROUNDS,
        warmup=phase.warmup,
        control_width=1,
        control_quads=1,
        tolerance_pct=L1_TOLERANCE_PCT,
        seed=stable_seed(seed, phase.name, "verify", context),
        settle=settle,
    )


def _prepare_context(ctx: RunContext, context: int) -> tuple[int, dict[str, DecodeStream]]:
    """Prefill `context` tokens once, a copy per arm; open each arm's stream there."""
    text = ctx.tokens_for(context + 1)
    length = share_context(ctx, text[:-1])
    streams = {
        name: ctx.workers[name].call(lambda a: open_stream(a, length, text[-1], text[:-1]))
        for name in ARM_ORDER
    }
    return length, streams


def _verify_ms(
    ctx: RunContext, phase: Phase, length: int, depths: list[int], progress: ProgressTracker
) -> ContextEstimates:
    """Synced steps at L = 1 .. max depth + 1 (the sweep's measurement) for the verify ms."""
    plan = verify_plan(phase, depths, ctx.seed, length, ctx.settle)
    label = f"{phase.name}:verify"
    text = ctx.tokens_for(length + max(plan.widths))
    steps = {w: forward_and_trim(text[length : length + w]) for w in plan.widths}
    pending: list[tuple[str, int, float, int, int]] = []

    def measure(arm: str, width: int) -> float:
        ms, absorbed, materialised = ctx.workers[arm].call(steps[width])
        pending.append((arm, width, ms, absorbed, materialised))
        return ms

    def on_timing(t: Timing) -> None:
        arm, width, ms, absorbed, materialised = pending.pop()
        ctx.emit(Step(ctx.now(), label, arm, length, width, t.round, ms, absorbed, materialised))
        progress.advance()

    emitter = EstimateEmitter(ctx, label, length)
    run = sample_context(
        plan,
        measure,
        warm=lambda arm, width: ctx.workers[arm].call(steps[width]) and None,
        clock=ctx.now,
        on_timing=on_timing,
        check_stop=ctx.check_stop,
        decide_more=ctx.decide_more,
    )
    emitter(run.estimates, final=True)
    return run.estimates


class BlockRunner:
    """The sampler's `measure` for decode blocks: runs one block on an arm's thread, keeps its
    acceptance counts (timed blocks only), rewinds both streams at every round's start."""

    def __init__(self, ctx: RunContext, phase: Phase, length: int, streams, depths: list[int]):
        self.ctx, self.phase, self.length, self.streams = ctx, phase, length, streams
        self.sampling = sampling_of(phase)
        self.n = phase.tokens
        self.round = 0
        self.fresh_round = True
        self.blocks_in_round: dict[tuple[str, int], int] = {}
        self.counts = {(a, d): AcceptanceCounts(d) for a in ARM_ORDER for d in depths}
        self.pending: list[tuple[str, int, BlockResult]] = []
        self.divergence: tuple[int, int] | None = None  # (token, round)
        self.timings: list[Timing] = []

    def _block(self, arm: str, width: int) -> BlockResult:
        depth = width - 1
        key = (arm, depth)
        index = self.blocks_in_round.get(key, 0)
        self.blocks_in_round[key] = index + 1
        seed = stable_seed(self.ctx.seed, self.phase.name, self.length, self.round, depth, index)
        stream = self.streams[arm]
        n = self.n

        lockstep = self.ctx.lockstep is not None

        def block(a: Arm) -> BlockResult:
            result = run_block(a, stream, depth, n, self.sampling, seed)
            if lockstep:
                # after the clock: mlx-lm's generator leaves its next step in flight, and its
                # all_sums would interleave with the next lockstep collective (garbage sums)
                mx.synchronize()
                mx.synchronize(generation_stream)
            return result

        return self.ctx.workers[arm].call(block)

    def warm(self, arm: str, width: int) -> None:
        self._block(arm, width)

    def measure(self, arm: str, width: int) -> float:
        if self.fresh_round:
            self.fresh_round = False
            self.blocks_in_round = {}
            for name in ARM_ORDER:
                s = self.streams[name]
                self.ctx.workers[name].call(lambda a, s=s: rewind(a, s))
        result = self._block(arm, width)
        # ranks that emitted different tokens would issue different collectives next
        self.ctx.check_same(hash(tuple(result.tokens)), "the tokens a decode block emitted")
        self.pending.append((arm, width - 1, result))
        return result.ms

    def on_timing(self, t: Timing) -> None:
        arm, depth, r = self.pending.pop()
        if depth > 0:
            for step in r.steps:
                self.counts[(arm, depth)].add(step)
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
                self.rule_of(arm).value if depth else "",
                self.sampling.temperature,
            )
        )

    def rule_of(self, arm: str):
        return self.sampling.rule(isinstance(self.ctx.workers[arm].arm.draft, MTPDraft))

    def end_round(self) -> None:
        a, b = (self.streams[name].tokens for name in ARM_ORDER)
        at = first_divergence(a, b)
        if at is not None and self.divergence is None and self.sampling.greedy:
            self.divergence = (at, self.round)
        self.round += 1
        self.fresh_round = True


def _runtime_name(arm: Arm, depth: int) -> str:
    if depth == 0:
        return "mlx_lm.generate_step"
    if isinstance(arm.draft, MTPDraft):
        return "mlatui MTP loop (pipelined)"
    return "mlx_lm.speculative_generate_step"


def _results(
    ctx: RunContext,
    phase: Phase,
    length: int,
    est: ContextEstimates,
    runner: BlockRunner,
    verify: ContextEstimates | None,
    depths: list[int],
    v_valid: bool,
    v_outcome: str,
) -> list[dict]:
    n = runner.n
    guards = GuardSettings(phase.min_draft_share, phase.min_verify_steps)
    synthetic = any(isinstance(w.arm.draft, SyntheticDraft) for w in ctx.workers.values())
    rows = []
    for depth in [0, *depths]:
        for arm in ARM_ORDER:
            ms = est.step_ms.get((arm, depth + 1))
            if ms is None:
                continue
            flat = est.vs_l1.get((arm, depth + 1))
            speedup = (1.0, 1.0, 1.0) if depth == 0 else None
            if flat is not None and flat.median > 0:
                speedup = (1 / flat.median, 1 / flat.high, 1 / flat.low if flat.low > 0 else None)
            counts = runner.counts.get((arm, depth))
            warnings = (
                guard_warnings(counts, speedup[1] if speedup else None, guards) if depth else []
            )
            if depth and runner.divergence is not None and not synthetic:
                at, rnd = runner.divergence
                warnings.append(f"{Guard.DIVERGED} at token {at} (round {rnd + 1})")
            worker_arm = ctx.workers[arm].arm
            verify_iv = verify.step_ms.get((arm, depth + 1)) if verify and depth else None
            timed = [t for t in runner.timings if t.arm == arm and t.width == depth + 1]
            r = DecodeResult(
                ctx.now(),
                phase.name,
                arm,
                length,
                depth,
                n * len(timed),
                sum(t.ms for t in timed) / 1e3,
                n / ms.median * 1e3,
                counts.unconditional if counts else (),
                verify_iv.median if verify_iv else None,
                None,
                n / ms.high * 1e3,
                n / ms.low * 1e3 if ms.low > 0 else None,
                speedup[0] if speedup else None,
                speedup[1] if speedup else None,
                speedup[2] if speedup else None,
                counts.conditional if counts else (),
                counts.mean_accepted if counts else None,
                counts.to_dict() if counts else {},
                runner.sampling.rule(isinstance(worker_arm.draft, MTPDraft)).value if depth else "",
                runner.sampling.to_dict(),
                tuple(warnings),
                est.rounds,
                n,
                _runtime_name(worker_arm, depth),
            )
            ctx.emit(r)
            rows.append(_row(r, v_valid, v_outcome))
    return rows


def _row(r: DecodeResult, valid: bool, outcome: str) -> dict:
    return {
        "context": r.context,
        "arm": r.arm,
        "depth": r.depth,
        "tok_s": r.tok_s,
        "tok_s_low": r.tok_s_low,
        "tok_s_high": r.tok_s_high,
        "vs_plain": r.vs_plain,
        "vs_plain_low": r.vs_plain_low,
        "vs_plain_high": r.vs_plain_high,
        "acceptance_conditional": list(r.acceptance_conditional),
        "acceptance_by_position": list(r.acceptance_by_position),
        "mean_accepted": r.mean_accepted,
        "verify_ms_median": r.verify_ms_median,
        "tokens": r.tokens,
        "rounds": r.rounds,
        "acceptance_rule": r.acceptance_rule,
        "warnings": list(r.warnings),
        "valid": valid,
        "outcome": outcome,
    }


def decode_context(
    ctx: RunContext, phase: Phase, context: int, depths: list[int], progress: ProgressTracker
) -> list[dict]:
    length, streams = _prepare_context(ctx, context)
    verify = _verify_ms(ctx, phase, length, depths, progress) if depths else None
    plan = block_plan(phase, depths, ctx.seed, length)
    runner = BlockRunner(ctx, phase, length, streams, depths)

    def on_timing(t: Timing) -> None:
        runner.on_timing(t)
        progress.advance()

    def on_round(e: ContextEstimates) -> None:
        runner.end_round()
        r = e.rounds
        if r >= plan.first_rounds and r % 2 == 0 and r < plan.max_rounds:
            if e.control_outcome is Outcome.INCONCLUSIVE:
                progress.total += plan.timed_calls(2)

    with unpinned():  # as users run mlx-lm: the next step is built while this one computes
        run = sample_context(
            plan,
            runner.measure,
            warm=runner.warm,
            clock=ctx.now,
            on_timing=on_timing,
            on_round=on_round,
            check_stop=ctx.check_stop,
            decide_more=ctx.decide_more,
        )
    runner.timings = run.timings
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
    v = validity(ctx, phase.name, length, run.estimates)
    return _results(ctx, phase, length, run.estimates, runner, verify, depths, v.valid, v.verdict)


def planned_calls(phase: Phase, depths: list[int], seed: int, settle: bool) -> int:
    blocks = block_plan(phase, depths, seed, 0).timed_calls()
    verify = verify_plan(phase, depths, seed, 0, settle).timed_calls() if depths else 0
    return len(phase.contexts) * (blocks + verify)


def run_decode(ctx: RunContext, phase: Phase, index: int, total_phases: int) -> PhaseSummary:
    """Plain decode and speculative decoding at each context and depth, both arms."""
    depths = sorted(set(phase.depths)) if ctx.make_draft is not None else []
    if not depths:
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
    planned = planned_calls(phase, depths, ctx.seed, ctx.settle)
    ctx.emit(
        PhaseStart(ctx.now(), phase.name, phase.kind, index, total_phases, planned, phase.contexts)
    )
    progress = ProgressTracker(ctx, phase.name, planned)
    rows: list[dict] = []
    for context in phase.contexts:
        ctx.check_stop()
        rows += decode_context(ctx, phase, context, depths, progress)
    verdict = tune_verdict(rows, TIE_PCT) if phase.kind == "tune" else decode_verdict(rows)
    summary = PhaseSummary(ctx.now(), phase.name, phase.kind, tuple(rows), verdict)
    ctx.emit(summary)
    return summary
