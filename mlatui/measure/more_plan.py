"""The plan of `+`, the rounds a live run measures once it has ended with undecided L = 1
checks: which checks are undecided, the phase that measures them, its name. One rule for the
engine (mlatui.run.phases.more, which contexts it measures) and the screen
(mlatui.views.more_offer, what the strip offers and how long it takes), so the two never disagree.
"""

from __future__ import annotations

from collections.abc import Mapping

from mlatui.config.phase_kind import Pass, PhaseKind, rules_for
from mlatui.config.scenario import Phase
from mlatui.stream.events import Validity
from mlatui.stream.run_settings import RunSettings

# rounds of L = 1 quads one `+` adds at each undecided context (mirrored pairs: each arm leads
# equally often); the check's CI narrows about as the root of its rounds
MORE_ROUNDS = 12


def undecided_checks(
    validity: Mapping[tuple[str, int], Validity], kinds: Mapping[str, str], last_pass: Pass
) -> list[Validity]:
    """The latest checks still inconclusive, of model phases, by context then phase. In an A/A
    run only the last pass's (`last_pass`): its arms are the ones still loaded."""
    out = [
        v
        for (phase, _), v in validity.items()
        if v.verdict == "inconclusive"
        and rules_for(kinds.get(phase)).run_check
        and Pass.of(phase) is last_pass
    ]
    return sorted(out, key=lambda v: (v.context, v.phase))


def more_phase(name: str, context: int, rounds: int = MORE_ROUNDS) -> Phase:
    """The rounds one `+` runs at one context, as a sweep of L = 1 alone: the plan the engine
    samples with, and the shape the forecast costs (a prefill, the warm-up, `rounds` rounds)."""
    return Phase(
        name, PhaseKind.SWEEP, (context,), widths=(1,), reps=rounds, max_rounds=rounds, warmup=1
    )


def more_phase_name(index: int) -> str:
    """`more`, `more-2`, ...: each `+` of a run is a phase of its own."""
    return "more" if index <= 1 else f"more-{index}"


def last_pass(settings: RunSettings) -> Pass:
    """The pass a recorded run ended on (the header's `passes`: A/A tags, or '' for A/B)."""
    return Pass.of_tag(settings.passes[-1]) if settings.null and settings.passes else Pass.AB
