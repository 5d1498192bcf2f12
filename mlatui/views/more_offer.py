"""What `+` offers once a live run has ended with undecided L = 1 checks: more rounds of L = 1
quads at those contexts on the arms still loaded (mlatui.measure.plans, the engine's rule
too), and how long they would take on this run's own measured costs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from mlatui.measure.plans import MORE_ROUNDS, last_pass, more_phase, undecided_checks
from mlatui.views.dashboard_state import DashboardState
from mlatui.views.rounding import fmt_context


@dataclass(frozen=True)
class MoreOffer:
    contexts: tuple[int, ...]
    rounds: int
    seconds: float  # on the run's own costs; inf when it has none at these contexts yet

    @property
    def text(self) -> str:
        return (
            f"+ to measure {self.rounds} more rounds of the undecided contexts "
            f"({', '.join(map(fmt_context, self.contexts))}, {self.time_text})"
        )

    @property
    def short(self) -> str:
        return f"+ {self.rounds} more L=1 rounds ({self.time_text})"

    @property
    def time_text(self) -> str:
        return f"~{self.seconds:.0f} s" if math.isfinite(self.seconds) else "time unknown"


def more_offer(state: DashboardState) -> MoreOffer | None:
    """What `+` would measure now (a DashboardState of a run that completed), or None."""
    if state.status != "completed" or state.header is None:
        return None
    checks = undecided_checks(state.validity, state.phase_kinds, last_pass(state.header.settings))
    contexts = tuple(sorted({v.context for v in checks}))
    if not contexts:
        return None
    phases = [more_phase("more", c) for c in contexts]
    settle = state.header.settings.settles
    return MoreOffer(contexts, MORE_ROUNDS, state.progress.forecast_s(phases, settle=settle))
