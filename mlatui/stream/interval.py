"""The one confidence-interval type: a median with its 95% interval and how many values it is
over. Events carry it as a nested record {"median", "low", "high", "n"}; the sampler makes it.
Nothing here imports mlx or textual.
"""

from __future__ import annotations

import msgspec

from mlatui.stream.event_base import Count, Finite


class Interval(msgspec.Struct, frozen=True):
    """`median` with its interval [`low`, `high`] over `n` values (rounds, or quads for a paired
    ratio). `n` = 0: no interval, either nothing was measured (NaN median) or the run kept the
    median alone (then `low` = `high` = `median`, and `known` is False)."""

    median: Finite
    low: Finite
    high: Finite
    n: Count

    @property
    def known(self) -> bool:
        """The interval was measured (not only its median)."""
        return self.n > 0

    def contains(self, value: float) -> bool:
        return self.low <= value <= self.high

    def scaled(self, factor: float) -> Interval:
        """Every end times a positive `factor` (e.g. ms -> s)."""
        return Interval(self.median * factor, self.low * factor, self.high * factor, self.n)

    def reciprocal(self, numerator: float = 1.0) -> Interval | None:
        """`numerator / x` of every end (the ends swap); None unless every end is > 0 (a figure
        whose interval reaches 0 has no finite reciprocal)."""
        if not (self.low > 0 and self.median > 0 and self.high > 0):
            return None
        return Interval(
            numerator / self.median, numerator / self.high, numerator / self.low, self.n
        )
