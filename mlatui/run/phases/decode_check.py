"""A decode or tune context's L = 1 check: the synced verify steps decide, the plain-decode blocks
may veto, and an undecided check pools every L = 1 quad the pass measured at the context."""

from __future__ import annotations

from dataclasses import replace

from mlatui.config.scenario import Phase
from mlatui.measure.estimates import (
    ContextEstimates,
    Outcome,
    control_outcome,
)
from mlatui.measure.plans import VERIFY_MIN_ROUNDS
from mlatui.run.phases.base import RunContext, validity
from mlatui.run.phases.results import L1Quads
from mlatui.stream.events import LogMessage, Validity, ratio_label
from mlatui.stream.phrases import interval_text


def decode_validity(
    ctx: RunContext,
    phase: Phase,
    length: int,
    verify: ContextEstimates | None,
    blocks: ContextEstimates,
    l1: L1Quads,
) -> Validity:
    """The context's L = 1 check: decided on the synced verify steps when there are any; the
    plain-decode blocks' own stock/patched ratio invalidates it only when its CI lies wholly
    outside the tolerance (their scatter leaves them undecided too often to decide alone). An
    undecided verify check is decided again on `l1` (every L = 1 quad of the pass so far) when
    more than one run measured this context."""
    if verify is None or verify.control_outcome is None:
        return validity(ctx, phase.name, length, blocks)
    ratio = blocks.control_ratio
    if ratio is not None:
        ctx.emit(
            LogMessage(
                ctx.now(),
                "info",
                f"{phase.name} @ {length}: plain decode "
                f"{ratio_label(phase.name)} {interval_text(ratio)} over {blocks.rounds} rounds of blocks "
                f"({(blocks.control_outcome or Outcome.INCONCLUSIVE).value}); the L = 1 check "
                "is decided on the synced steps",
            )
        )
    # a bootstrap over fewer rounds than the verify's minimum is too narrow to veto on: on the
    # 2-core CPU 4 rounds of blocks once read 1.094 [1.091, 1.120] where the steps read 1.00
    if blocks.control_outcome is Outcome.INVALID and blocks.rounds >= VERIFY_MIN_ROUNDS:
        return validity(ctx, phase.name, length, blocks)
    if verify.control_outcome is Outcome.INCONCLUSIVE and l1.count(length) > 1:
        verify = _pooled(ctx, phase, length, verify, l1)
    return validity(ctx, phase.name, length, verify)


def _pooled(
    ctx: RunContext, phase: Phase, length: int, verify: ContextEstimates, l1: L1Quads
) -> ContextEstimates:
    """The check on every L = 1 quad this run measured at this context (the sweep's too): the
    same arms and hypothesis, paired quads whose regimes cancel within each quad."""
    timings = l1.pooled(length)
    ratio = l1.pooled_ratio(length, ctx.seed)
    if ratio is None:
        return verify
    outcome = control_outcome(ratio, verify.tolerance_pct)
    runs = l1.count(length)
    rounds = len({t.round for t in timings})
    ctx.emit(
        LogMessage(
            ctx.now(),
            "info",
            f"{phase.name} @ {length}: L = 1 check undecided on its own steps; on all {rounds} "
            f"rounds of L = 1 quads this run measured at {length} ({runs} sampler runs, the "
            f"sweep's included): {interval_text(ratio)}, "
            f"{outcome.value}",
        )
    )
    pooled = replace(verify, ratio={**verify.ratio, 1: ratio}, control_outcome=outcome)
    return replace(pooled, rounds=rounds)
