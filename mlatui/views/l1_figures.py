"""Both arms' L = 1 figure in a check's table row, per step as the sweep's are.

A decode or tune phase with a draft decides its check on synced verify steps (or the sweep's), so
its L = 1 figures are step times. With no draft there is nothing to verify: the check is decided
on the plain-decode blocks, and its figures are block times (a 12-token block read 46.7 ms beside
the sweep's 4.03 ms step). Such a row shows the block time per token, said as such, or nothing
when the block's length is not known.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from mlatui.config.phase_kind import rules_for
from mlatui.stream.events import DecodeResult, Validity


@dataclass(frozen=True)
class L1Figures:
    stock_ms: float | None
    patched_ms: float | None
    block_tokens: int = 0  # > 0: per token of plain-decode blocks this long (not a step time)

    @property
    def per_token(self) -> bool:
        return self.block_tokens > 0

    @property
    def note(self) -> str:
        """What a marked row's figures are, for the table's legend."""
        return (
            f"per token of {self.block_tokens}-token plain-decode blocks (no draft: the check "
            "was decided on them)"
        )


def decided_on_blocks(kind: str, results: Iterable[DecodeResult], phase: str, context: int) -> bool:
    """A decode or tune check with no speculative result at its context: no verify steps."""
    if not rules_for(kind).decodes:
        return False
    return not any(r.depth > 0 and r.phase == phase and r.context == context for r in results)


def block_tokens(results: Iterable[DecodeResult], phase: str, context: int) -> int:
    return next(
        (
            r.block_tokens
            for r in results
            if r.depth == 0 and r.phase == phase and r.context == context and r.block_tokens
        ),
        0,
    )


def l1_figures(
    v: Validity, kind: str, results: Iterable[DecodeResult], phase: str, context: int
) -> L1Figures:
    """`v`'s two L = 1 figures as step times: its own (a sweep's, or a verify's), or its block
    times per token (None for both when the blocks' length is unknown)."""
    results = list(results)
    if not decided_on_blocks(kind, results, phase, context):
        return L1Figures(v.stock_l1_ms, v.patched_l1_ms)
    n = block_tokens(results, phase, context)
    if n <= 0:
        return L1Figures(None, None)
    return L1Figures(v.stock_l1_ms / n, v.patched_l1_ms / n, n)
