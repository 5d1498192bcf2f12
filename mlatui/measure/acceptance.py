"""What a decode stream's tokens say (pure Python): draft acceptance, counted one way and
reported three ways, how repetitive the emitted text is, and the most a speculative setting can
gain, known from synced steps before its blocks run.

A verify step drafts `drafted` tokens (the depth, or fewer at the end of a budget) and accepts
the longest prefix the target agrees with, `accepted` of them; it then emits accepted + 1 tokens
(the target's correction or bonus token), or only the accepted ones when the budget ends there.
Position i (1-based) is *reached* in a step when positions 1..i-1 were accepted and i was drafted.

- conditional, per position: P(accept i | 1..i-1 accepted) = accepted_i / reached_i. The figure
  the reference write-up quotes (0.84, 0.73, 0.63, 0.62 on GLM's MTP head).
- unconditional, per position: P(position i accepted in a step) = accepted_i / drafted_i, where
  drafted_i counts every step that drafted position i (the share vLLM's per-position metric gives).
- mean accepted drafts per verify step (serving runtimes quote the mean acceptance *length*,
  which also counts the emitted correction/bonus token: mean accepted + 1).

Counts are kept per depth: a depth-3 step's position 2 and a depth-2 step's position 2 are not the
same experiment, so nothing here mixes depths.

How repetitive a token stream is: the share of distinct n-grams among all its n-grams. One
definition for the embedded model's training report and the decode guard.

Rejected by bound: a speculative setting that cannot beat plain decode, known from synced
steps alone, before any of its decode blocks run.

A verify step of depth d runs L = d + 1 queries and emits at most d + 1 tokens (every draft
accepted, plus the bonus token), and the step costs at least its forward. So speculation at
depth d runs at most (d + 1) x plain_step_ms / verify_ms(L = d + 1) times plain decode, whatever
the draft and its acceptance. The tune and decode phases measure both steps per arm in their
verify rounds (the sampler's synced steps, paired within rounds) before their blocks.

The bound is judged by its upper end, taken conservatively:
- from the two medians' CIs: the largest plain step over the smallest verify step;
- from the paired ratio verify / plain of the same rounds (`vs_l1`): d + 1 over its CI's low end;
  the larger of the two is used;
- times RUNTIME_SLACK for what the runtime does that synced steps do not: the speedups measured
  through mlx-lm's runtime ran up to 1.24x the synced-step bound's upper end (and their medians
  up to 1.28x its point) over 23 tune recordings (2-core CPU and H200; 229 results; see
  docs/method.md): a pipelined plain decode pays some per-token
  overhead that a verify step pays once per d + 1 tokens, and hides graph building that a
  synced step times.
A setting whose upper end lies below 1.0 cannot win: its blocks are not run, and its result says
"rejected by bound: at most 0.05× (2 × plain ≤ 31.0 ms / verify ≥ 2.08 s, ×1.5 runtime
allowance)".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from mlatui.stream.event_base import Interval
from mlatui.stream.events import SpeedupBound


@dataclass(frozen=True)
class VerifyStep:
    drafted: int
    accepted: int
    emitted: int

    def __post_init__(self) -> None:
        if not 0 <= self.accepted <= self.drafted or self.emitted not in (
            self.accepted,
            self.accepted + 1,
        ):
            raise ValueError(f"inconsistent verify step {self}")


@dataclass
class AcceptanceCounts:
    """Per-position counts of one depth's verify steps (an event carries them as
    `dataclasses.asdict` writes them; `AcceptanceCounts(**counts)` reads them back)."""

    depth: int
    drafted_at: list[int] = field(default_factory=list)
    reached_at: list[int] = field(default_factory=list)
    accepted_at: list[int] = field(default_factory=list)
    verify_steps: int = 0
    accepted_tokens: int = 0
    emitted_tokens: int = 0

    def __post_init__(self) -> None:
        for counts in (self.drafted_at, self.reached_at, self.accepted_at):
            counts.extend([0] * (self.depth - len(counts)))

    def add(self, step: VerifyStep) -> None:
        if step.drafted > self.depth:
            raise ValueError(f"a depth-{self.depth} count got a step that drafted {step.drafted}")
        self.verify_steps += 1
        self.accepted_tokens += step.accepted
        self.emitted_tokens += step.emitted
        for i in range(step.drafted):
            self.drafted_at[i] += 1
        for i in range(min(step.accepted + 1, step.drafted)):
            self.reached_at[i] += 1
        for i in range(step.accepted):
            self.accepted_at[i] += 1

    def add_all(self, steps: list[VerifyStep]) -> AcceptanceCounts:
        for s in steps:
            self.add(s)
        return self

    def merged(self, other: AcceptanceCounts) -> AcceptanceCounts:
        if other.depth != self.depth:
            raise ValueError("acceptance counts of different depths do not merge")
        return AcceptanceCounts(
            self.depth,
            [a + b for a, b in zip(self.drafted_at, other.drafted_at, strict=True)],
            [a + b for a, b in zip(self.reached_at, other.reached_at, strict=True)],
            [a + b for a, b in zip(self.accepted_at, other.accepted_at, strict=True)],
            self.verify_steps + other.verify_steps,
            self.accepted_tokens + other.accepted_tokens,
            self.emitted_tokens + other.emitted_tokens,
        )

    @property
    def conditional(self) -> tuple[float | None, ...]:
        return tuple(
            a / r if r else None for a, r in zip(self.accepted_at, self.reached_at, strict=True)
        )

    @property
    def unconditional(self) -> tuple[float | None, ...]:
        return tuple(
            a / d if d else None for a, d in zip(self.accepted_at, self.drafted_at, strict=True)
        )

    @property
    def mean_accepted(self) -> float | None:
        """Accepted drafts per verify step (add 1 for the mean acceptance length)."""
        return self.accepted_tokens / self.verify_steps if self.verify_steps else None

    @property
    def draft_share(self) -> float | None:
        """Share of the emitted tokens that were accepted drafts."""
        return self.accepted_tokens / self.emitted_tokens if self.emitted_tokens else None

    @property
    def emitted_per_verify(self) -> float | None:
        return self.emitted_tokens / self.verify_steps if self.verify_steps else None


def steps_from_flags(from_draft: list[bool], depth: int, budget: int) -> list[VerifyStep]:
    """Rebuild mlx-lm's verify steps from `speculative_generate_step`'s per-token `from_draft`
    flags: each step yields its accepted drafts (True), then its correction/bonus token (False),
    except the last step when the token budget runs out after an accepted draft. A step drafts
    min(depth, tokens still to emit), as mlx-lm's loop does."""
    steps: list[VerifyStep] = []
    emitted, i = 0, 0
    while i < len(from_draft):
        drafted = min(depth, budget - emitted)
        accepted = 0
        while i < len(from_draft) and from_draft[i] and accepted < drafted:
            accepted += 1
            i += 1
        if i < len(from_draft) and not from_draft[i]:
            i += 1
            steps.append(VerifyStep(drafted, accepted, accepted + 1))
        else:
            steps.append(VerifyStep(drafted, accepted, accepted))
        emitted += steps[-1].emitted
    return steps


# ---- how repetitive the emitted tokens are -------------------------------------------------------


def _ngrams(tokens: Sequence[int], n: int) -> list[tuple[int, ...]]:
    return [tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)]


def distinct_ngram_share(tokens: Sequence[int], n: int = 4) -> float | None:
    """distinct n-grams / n-grams in `tokens` (1.0: nothing repeats; None: fewer than n tokens).
    A stream that loops over a k-token phrase scores about k / len(tokens)."""
    grams = _ngrams(tokens, n)
    return len(set(grams)) / len(grams) if grams else None


@dataclass(frozen=True)
class Repetition:
    """The n-gram repetition of a result's blocks (each block a separately decoded stretch).

    `within`: distinct n-grams within each block, summed over blocks, / n-grams summed (the
    pooled form of `distinct_ngram_share`; a block shorter than n adds nothing). `across`: the
    distinct n-grams of the blocks together / their n-grams, each different block text counted
    once: rounds that replay the same text (greedy rounds restart from one context) are not a
    loop, but a loop longer than a block is, as its blocks catch it at different phases.
    `distinct_blocks` of `blocks` texts differ."""

    n: int
    within: float | None
    across: float | None
    blocks: int
    distinct_blocks: int

    @property
    def same_text(self) -> bool:
        """Every block emitted the same tokens (more than one block)."""
        return self.blocks > 1 and self.distinct_blocks == 1


def repetition_of(blocks: Sequence[Sequence[int]], n: int = 4) -> Repetition:
    grams = [_ngrams(b, n) for b in blocks]
    total = sum(len(g) for g in grams)
    within = sum(len(set(g)) for g in grams)
    texts = {tuple(b): g for b, g in zip(blocks, grams, strict=True)}  # one per different text
    different = sum(len(g) for g in texts.values())
    union = len({x for g in texts.values() for x in g})
    return Repetition(
        n,
        within / total if total else None,
        union / different if different else None,
        len(blocks),
        len(texts),
    )


LOOPING = "looping text"  # the guard's name (mlatui.run.phases.decode_verdict.Guard.LOOPING)
LOOP_NOTE = "acceptance describes a repeat, not the draft"


def looping_warning(rep: Repetition | None, min_share: float) -> str | None:
    """The looping-text guard on a speculative result's blocks: text that repeats itself is easy
    for any draft to predict (greedy rounds of the embedded model, each restarting from one
    context, looped on a 4-token phrase and read acceptance 1.00 at every position). Fires when
    the distinct-n-gram share within the blocks (pooled) or across them (a loop longer than a
    block: the 2048-token context's 10-token loop read 90% within 16-token blocks, 29% across)
    is below `min_share`, or when every block emitted the same text; None when none of these
    (or too few tokens to tell)."""
    if rep is None or rep.within is None:
        return None
    share = f"{rep.within:.0%} distinct {rep.n}-grams"
    if rep.within < min_share:
        same = ", every block the same text" if rep.same_text else ""
        return f"{LOOPING}: {share} (< {min_share:.0%}){same}: {LOOP_NOTE}"
    if rep.across is not None and rep.across < min_share:
        return (
            f"{LOOPING}: {rep.across:.0%} distinct {rep.n}-grams across its "
            f"{rep.distinct_blocks} different blocks (< {min_share:.0%}; {rep.within:.0%} "
            f"within each): {LOOP_NOTE}"
        )
    if rep.same_text:
        return f"{LOOPING}: every block the same text ({rep.blocks} blocks, {share}): {LOOP_NOTE}"
    return None


# ---- rejected by bound ---------------------------------------------------------------------------

RUNTIME_SLACK = 1.5
# The forecast predicts a rejection from mean costs (no CIs yet) only with this much room: a
# setting it wrongly expects to be rejected would make the forecast short by all its blocks.
FORECAST_CAUTION = 1.25


def speedup_bound(
    depth: int,
    plain: Interval,
    verify: Interval,
    paired: Interval | None = None,
    slack: float = RUNTIME_SLACK,
) -> SpeedupBound | None:
    """The bound of a setting of `depth` from one arm's plain step (L = 1) and verify step
    (L = depth + 1), medians with CIs over the same rounds, and `paired` their per-round ratio
    verify / plain; None when a figure is missing or not positive."""
    if depth < 1 or not all(x > 0 for x in (plain.median, plain.high, verify.median, verify.low)):
        return None
    tokens = depth + 1
    high = tokens * plain.high / verify.low
    verify_ms = verify.low
    if paired is not None and paired.low > 0 and tokens / paired.low > high:
        high = tokens / paired.low
        verify_ms = plain.high * paired.low  # the verify step the paired figure implies
    return SpeedupBound(
        tokens, plain.high, verify_ms, high * slack, tokens * plain.median / verify.median, slack
    )


def likely_rejected(depth: int, plain_ms: float, verify_ms: float) -> bool:
    """What a forecast expects from mean step costs: rejected only with FORECAST_CAUTION to spare."""
    if depth < 1 or plain_ms <= 0 or verify_ms <= 0:
        return False
    return (depth + 1) * plain_ms / verify_ms * RUNTIME_SLACK * FORECAST_CAUTION < 1.0


def _ms(ms: float) -> str:
    if ms >= 1000:
        return f"{ms / 1000:.2f} s"
    return f"{ms:.1f} ms" if ms < 100 else f"{ms:.0f} ms"


def rejection_text(b: SpeedupBound) -> str:
    """`rejected by bound: at most 0.05× (2 × plain ≤ 31.0 ms / verify ≥ 2.08 s, ×1.5 runtime
    allowance)`: the plain step's CI high end over the verify step's low end (not the medians a
    table shows)."""
    allowance = f", ×{b.slack:g} runtime allowance" if b.slack != 1 else ""
    steps = f"plain ≤ {_ms(b.plain_ms)} / verify ≥ {_ms(b.verify_ms)}"
    return f"rejected by bound: at most {b.value:.2f}× ({b.tokens} × {steps}{allowance})"
