"""What `+` offers once a live run has ended with undecided L = 1 checks: more rounds of L = 1
quads at those contexts on the arms still loaded, and how long they would take on this run's own
measured costs. One rule for the engine (which contexts it measures) and the screen (what the
strip offers), so the two never disagree.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from mlatui.config.scenario import Phase
from mlatui.stream.events import Validity
from mlatui.views.dashboard_state import DashboardState
from mlatui.views.rounding import fmt_context

# rounds of L = 1 quads one `+` adds at each undecided context (mirrored pairs: each arm leads
# equally often); the check's CI narrows about as the root of its rounds
MORE_ROUNDS = 12
# the phase kinds whose checks gate a verdict (an indexer phase's check covers its own figures)
MODEL_KINDS = ("sweep", "tune", "decode")
MORE_KIND = "l1"  # the PhaseStart kind of a `+` phase: no sweep, tune or decode view reads it


def undecided_checks(
    validity: Mapping[tuple[str, int], Validity], kinds: Mapping[str, str], last_pass: str = ""
) -> list[Validity]:
    """The latest checks still inconclusive, of model phases, by context then phase. In an A/A
    run only the last pass's (`last_pass`, its tag): its arms are the ones still loaded."""
    out = [
        v
        for (phase, _), v in validity.items()
        if v.verdict == "inconclusive"
        and kinds.get(phase) in MODEL_KINDS
        and (not last_pass or phase.endswith(f"/{last_pass}"))
    ]
    return sorted(out, key=lambda v: (v.context, v.phase))


def more_phase(name: str, context: int, rounds: int = MORE_ROUNDS) -> Phase:
    """The rounds one `+` runs at one context, as a sweep of L = 1 alone: the plan the engine
    samples with, and the shape the forecast costs (a prefill, the warm-up, `rounds` rounds)."""
    return Phase(name, "sweep", (context,), widths=(1,), reps=rounds, max_rounds=rounds, warmup=1)


def more_phase_name(index: int) -> str:
    """`more`, `more-2`, ...: each `+` of a run is a phase of its own."""
    return "more" if index <= 1 else f"more-{index}"


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


def last_pass(settings: Mapping | None) -> str:
    passes = list((settings or {}).get("passes") or [""])
    return str(passes[-1]) if (settings or {}).get("null") else ""


def more_offer(state: DashboardState) -> MoreOffer | None:
    """What `+` would measure now (a DashboardState of a run that completed), or None."""
    if state.status != "completed" or state.header is None:
        return None
    checks = undecided_checks(state.validity, state.phase_kinds, last_pass(state.header.settings))
    contexts = tuple(sorted({v.context for v in checks}))
    if not contexts:
        return None
    phases = [more_phase("more", c) for c in contexts]
    settle = bool((state.header.settings or {}).get("settle", True))
    try:
        seconds = state.progress.forecast_s(phases, settle=settle)
    except Exception:  # noqa: BLE001 - an old recording's costs: say the time is unknown
        seconds = math.inf
    return MoreOffer(contexts, MORE_ROUNDS, seconds)
