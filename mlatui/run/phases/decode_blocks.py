"""Decode blocks as the sampler's unit of work: one arm decodes `tokens` tokens at one setting
through mlx-lm's runtime (or the MTP loop), its acceptance is counted and its block recorded."""

from __future__ import annotations

import functools

from mlatui.config.scenario import Phase
from mlatui.measure.acceptance import AcceptanceCounts
from mlatui.measure.estimates import Timing, stable_seed
from mlatui.measure.plans import Setting
from mlatui.measure.repetition import Repetition, repetition_of
from mlatui.run.arms import Arm
from mlatui.run.decode_stream import BlockResult, Sampling, SyntheticDraft, rewind, run_block
from mlatui.run.mtp import MTPDraft
from mlatui.run.phases.base import RunContext
from mlatui.run.phases.decode_verdict import first_divergence
from mlatui.stream.events import ARMS, DecodeBlock


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
