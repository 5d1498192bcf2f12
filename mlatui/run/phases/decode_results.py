"""A decode or tune context's blocks and results. A decode block is the sampler's unit of work
(`BlockRunner`): one arm decodes `tokens` tokens at one setting through mlx-lm's runtime (or the
MTP loop), its acceptance is counted and its block recorded. The results: a DecodeResult per arm
and setting (emitted) and the phase summary's row for each. Settings rejected by bound (mlatui.measure.bound) are decided for each
context after its verify rounds and before its decode blocks: a rejected (arm, setting) runs no
blocks, and its result says so (`DecodeResult.measured` False, `bound`), with no tok/s."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

import msgspec

from mlatui.config.scenario import Phase
from mlatui.measure.acceptance import AcceptanceCounts
from mlatui.measure.bound import rejection_text, speedup_bound
from mlatui.measure.estimates import ContextEstimates, Timing, stable_seed
from mlatui.measure.plans import Setting
from mlatui.measure.repetition import Repetition, repetition_of
from mlatui.run.arms import Arm
from mlatui.run.decode_stream import BlockResult, Sampling, SyntheticDraft, rewind, run_block
from mlatui.run.mtp import MTPDraft
from mlatui.run.phases.base import RunContext
from mlatui.run.phases.decode_verdict import Guard, GuardSettings, first_divergence, guard_warnings
from mlatui.stream.events import (
    ARMS,
    DecodeBlock,
    DecodeResult,
    LogMessage,
    SpeedupBound,
    Validity,
    arm_label,
)
from mlatui.stream.interval import Interval, flat_interval


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
        self.synthetic = any(isinstance(w.arm.draft, SyntheticDraft) for w in ctx.workers.values())

    def rows(self, check: Validity) -> list[dict]:
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
            None if self.synthetic else rep,
        )
        if runner.divergence is not None and not self.synthetic:
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
            counts.to_dict() if counts else {},
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


def _row(r: DecodeResult, check: Validity) -> dict:
    speedup = flat_interval("vs_plain", r.vs_plain)
    if not r.measured and r.bound is not None:  # the most it could have gained
        speedup["vs_plain_high"] = r.bound.value
    return {
        "context": r.context,
        "arm": r.arm,
        "depth": r.depth,
        "draft_kind": r.draft_kind,
        **flat_interval("tok_s", r.tok_s),
        **speedup,
        "acceptance_conditional": list(r.acceptance_conditional),
        "acceptance_by_position": list(r.acceptance_by_position),
        "mean_accepted": r.mean_accepted,
        "verify_ms_median": r.verify_ms_median,
        "tokens": r.tokens,
        "rounds": r.rounds,
        "acceptance_rule": r.acceptance_rule,
        "temperature": r.sampling.get("temperature", 0.0),
        "distinct_4gram_share": r.distinct_4gram_share,
        "distinct_4gram_share_across": r.distinct_4gram_share_across,
        "warnings": list(r.warnings),
        "valid": check.valid,
        "outcome": check.verdict,
        "basis": check.basis.value,
        "measured": r.measured,
        "bound": msgspec.to_builtins(r.bound) if r.bound is not None else None,
    }


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
        return skipped_widths(settings, self.rejected)


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
    ctx.emit(
        LogMessage(
            ctx.now(),
            "info",
            f"{phase.name} @ {length}: {arm_label(arm, phase.name)} {st.label} "
            f"{rejection_text(b)}; its decode "
            "blocks are not run",
        )
    )
    return r


def skipped_widths(
    settings: tuple[Setting, ...], rejected: dict[Key, DecodeResult]
) -> frozenset[tuple[str, int]]:
    """The sampler's (arm, width) of the rejected settings (width = place in settings + 1)."""
    return frozenset((arm, settings.index(st) + 1) for arm, st in rejected)


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
        self.synthetic = any(isinstance(w.arm.draft, SyntheticDraft) for w in ctx.workers.values())
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
