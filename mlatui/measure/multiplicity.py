"""An A/A run judged as a whole: how many of its cells' 95% CIs may exclude 1 by chance alone.

With both arms the same variant, each cell's 95% CI excludes the true ratio 1 in 5% of runs of a
correct harness. Over the default sweep's 24 cells that is 1.2 cells on average, and a run with
every CI containing 1 is the exception (0.95^24 = 29% of runs), not the rule. So an A/A is read
as a count: k of n CIs exclude 1, and the chance of k or more under no arm difference (binomial;
cells that share a context share rounds, so this is a guide, not an exact test). Below 5%, the
harness itself makes a difference between the arms.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from math import comb

from mlatui.stream.events import Estimate

CELL_ALPHA = 0.05  # each cell's CI is a 95% interval
RUN_ALPHA = 0.05  # the whole A/A calls a harness difference below this chance


def binomial_tail(k: int, n: int, p: float) -> float:
    """P(X >= k) for X ~ Binomial(n, p)."""
    if k <= 0:
        return 1.0
    if k > n:
        return 0.0
    return sum(comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(k, n + 1))


@dataclass(frozen=True)
class NullJudgement:
    excluded: int  # cells whose 95% CI excludes 1
    cells: int
    chance: float  # P(this many or more | no arm difference)

    @property
    def consistent(self) -> bool:
        """True when chance alone explains the excluded cells."""
        return self.chance >= RUN_ALPHA

    @property
    def text(self) -> str:
        within = self.cells - self.excluded
        if not self.excluded:
            return f"A/A: {within}/{self.cells} CIs contain 1 (no arm difference)"
        how = "as chance allows" if self.consistent else "a harness difference"
        return (
            f"A/A: {within}/{self.cells} CIs contain 1 ({self.excluded} outside: "
            f"{how}, P(≥{self.excluded}) = {self.chance:.2f})"
        )


def judge_null(excluded: int, cells: int) -> NullJudgement:
    return NullJudgement(excluded, cells, binomial_tail(excluded, cells, CELL_ALPHA))


def judge_estimates(finals: Iterable[Estimate]) -> NullJudgement | None:
    """The judgement over every paired-ratio cell of these final estimates (None: no cell)."""
    cells = [row for e in finals for row in e.rows if row.quantity == "ratio"]
    if not cells:
        return None
    return judge_null(sum(not r.low <= 1 <= r.high for r in cells), len(cells))
