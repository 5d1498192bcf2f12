"""How repetitive a token stream is: the share of distinct n-grams among all its n-grams (pure
Python). One definition for the embedded model's training report and the decode guard."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


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
