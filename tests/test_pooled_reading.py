"""The same L = 1 quads decide the same way wherever they are read: the budget's extra rounds
decided a sweep's check at 512 valid (1.001 [0.992, 1.020]) and the tune that borrows it then read
the very same 28 rounds inconclusive (1.001 [0.990, 1.021]) on another bootstrap seed."""

import random
from types import SimpleNamespace

from mlatui.config.scenario import Phase
from mlatui.measure.estimates import ContextEstimates, Outcome, Timing
from mlatui.run.phases.decode import _pooled
from mlatui.run.phases.results import L1Quads


def _quads(seed: int, rounds: int) -> list[Timing]:
    """A-B-B-A L = 1 quads whose paired ratio sits near the edge of the ±2% band."""
    rng = random.Random(seed)
    out = []
    for r in range(rounds):
        level = 30 + rng.gauss(0, 3)
        for arm in ("stock", "patched", "patched", "stock"):
            bias = 1.012 if arm == "stock" else 1.0
            out.append(Timing(r, 1, arm, level * bias * (1 + rng.gauss(0, 0.02))))
    return out


def test_a_tune_reads_the_quads_the_budget_decided_on_as_the_budget_did():
    sweep = L1Quads().plus(512, _quads(1, 6), 1)
    extra = L1Quads().plus(512, _quads(2, 22), 1)
    run_seed = 7
    budget_reading = (sweep + extra).pooled_ratio(512, run_seed)  # the budget's re-decision
    said: list = []
    ctx = SimpleNamespace(seed=run_seed, log=lambda level, text: said.append(text))
    verify = ContextEstimates(6, control_outcome=Outcome.INCONCLUSIVE)
    tune = _pooled(
        ctx, Phase(name="tune", kind="tune", contexts=(512,)), 512, verify, sweep + extra
    )
    assert budget_reading is not None and tune.ratio[1] == budget_reading
    assert said and "28 rounds" in said[-1]  # the tune says what it pooled
