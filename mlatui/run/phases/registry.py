"""Each phase kind's runner and what it reads of the earlier phases: the engine's one lookup.

A kind's rules (parsing, what the budget may cut) are `mlatui.config.phase_kind`; its plan
segments `mlatui.measure.plans.SEGMENTS`; its tables, export rows and fold `mlatui.views`'s
registry. Adding a kind adds its runner module and one line here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from mlatui.config.phase_kind import PhaseKind
from mlatui.config.scenario import Phase, ScenarioError
from mlatui.run.phases import decode, indexer, sweep
from mlatui.run.phases.base import RunContext
from mlatui.run.phases.results import Need, PhaseInputs, PhaseResult

Runner = Callable[[RunContext, Phase, int, int, PhaseInputs], PhaseResult]


@dataclass(frozen=True)
class KindRunner:
    run: Runner
    needs: frozenset[Need]  # what of the pass so far the engine hands it (PhaseInputs)


RUNNERS: dict[PhaseKind, KindRunner] = {
    PhaseKind.SWEEP: KindRunner(sweep.run_sweep, sweep.NEEDS),
    PhaseKind.DECODE: KindRunner(decode.run_decode, decode.NEEDS),
    PhaseKind.TUNE: KindRunner(decode.run_decode, decode.NEEDS),
    PhaseKind.INDEXER: KindRunner(indexer.run_indexer_phase, indexer.NEEDS),
}


def runner(kind: PhaseKind) -> KindRunner:
    """The kind's runner; a kind no scenario may name (`+`'s) has none."""
    found = RUNNERS.get(kind)
    if found is None:
        raise ScenarioError(f"phase kind {kind.value!r} runs only after a run (`+`)")
    return found
