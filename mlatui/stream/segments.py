"""What a phase's plan is made of, as its events carry it: the settings a decode block runs and
the segments (sampler runs) a phase will run, in order (mlatui.measure.plans plans them). Nothing
here imports mlx or textual.
"""

from __future__ import annotations

from dataclasses import dataclass

import msgspec

from mlatui.stream.event_base import ARMS


@dataclass(frozen=True)
class Setting:
    """What a decode block runs: plain decode (kind "", depth 0) or one draft kind at a depth."""

    kind: str = ""  # "mtp" | "draft-model" | "synthetic"; "" plain, or a recording before kinds
    depth: int = 0

    @property
    def label(self) -> str:
        if self.depth == 0:
            return "plain"
        return f"{self.kind} d{self.depth}" if self.kind else f"d{self.depth}"


class Segment(msgspec.Struct, frozen=True):
    """One sampler run: `part` is the phase label its events carry, `calls` the timed calls per
    round of each width, `tokens` > 0 for decode blocks of that many tokens, `settings` the
    (width, draft kind, depth) of each block width (empty: depth = width - 1, one kind)."""

    part: str
    context: int
    calls: tuple[tuple[int, int], ...]
    first_rounds: int
    max_rounds: int
    warmup: int = 1
    tokens: int = 0
    opens_context: bool = True  # starts with a prefill of `context` tokens
    settings: tuple[tuple[int, str, int], ...] = ()
    skipped: tuple[tuple[str, int], ...] = ()  # (arm, width) rejected by bound: never run
    bound_rejects: bool = True  # the phase's reject_by_bound: its blocks may be rejected

    def arms_at(self, width: int) -> tuple[str, ...]:
        """The arms whose calls at `width` run."""
        return tuple(a for a in ARMS if (a, width) not in self.skipped)

    def without(self, arm: str, width: int) -> Segment:
        """This segment once `arm`'s calls at `width` are rejected by bound: that width's calls
        per round halve (each quad keeps the other arm's two), or go when neither arm is left."""
        if (arm, width) in self.skipped or width not in dict(self.calls):
            return self
        left = len(self.arms_at(width)) - 1
        calls = tuple((w, n * left // (left + 1) if w == width else n) for w, n in self.calls)
        return msgspec.structs.replace(
            self,
            calls=tuple(c for c in calls if c[1] > 0),
            skipped=(*self.skipped, (arm, width)),
        )

    def setting(self, width: int) -> Setting:
        for w, kind, depth in self.settings:
            if w == width:
                return Setting(kind, depth)
        return Setting("", width - 1)

    @property
    def per_round(self) -> int:
        return sum(n for _, n in self.calls)

    @property
    def last_round(self) -> int:
        """The most rounds the sampler can run: pairs are added while under `max_rounds`."""
        extra = max(0, self.max_rounds - self.first_rounds)
        return self.first_rounds + extra + extra % 2

    @property
    def planned_calls(self) -> int:
        return self.first_rounds * self.per_round
