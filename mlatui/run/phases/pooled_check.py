"""The L = 1 check pooled over the run's contexts, applied when a phase's contexts are all measured
(mlatui.measure.pooled has the estimator and the rule).

After the last context of a sweep (before its verdict), and after the last context of a decode
or tune phase (with its verify steps' quads included), every L = 1 quad the run has measured so
far, at every context, is pooled. Each of the phase's inconclusive checks that the rule lets
through gets a new Validity with basis pooled (emitted after the PooledValidity that decided it,
so a replay folds the same); the phase's rows and verdict use it. Under mlx.launch the decisions
are rank 0's, shared in one collective, so every rank leaves out the same contexts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from mlatui.measure.estimates import Outcome, stable_seed
from mlatui.measure.pooled import (
    POOLED_CI_METHOD,
    POOLED_ESTIMATOR,
    PooledCheck,
    decide,
    pooled_check,
)
from mlatui.run.phases.base import RunContext
from mlatui.run.phases.results import L1Quads
from mlatui.stream.events import ARMS, Basis, PooledValidity, Validity


def pool_checks(
    ctx: RunContext, phase: str, checks: Sequence[Validity], l1: L1Quads
) -> dict[int, Validity]:
    """The phase's checks decided with the one pooled over `l1` (every L = 1 quad of the pass
    so far, the phase's own included): {context: its new Validity} for those it made valid
    (pooled). Emits the PooledValidity when the phase has an undecided check."""
    if not checks:
        return {}
    tolerance = checks[0].tolerance_pct
    by_context = {c: l1.pooled(c) for c in l1.contexts()}
    seed = stable_seed(ctx.seed, phase, "l1-pooled")
    pooled = pooled_check(by_context, ARMS, 1, seed, tolerance)
    verdict = pooled.outcome if pooled else None
    wanted = [
        decide(
            Outcome(v.verdict),
            v.ratio.low if v.ratio else None,
            v.ratio.high if v.ratio else None,
            verdict,
        )[1]
        is Basis.POOLED
        for v in checks
    ]
    chosen = ctx.leader_decides_each(wanted)  # rank 0's, for every rank
    unsure = [v.context for v in checks if v.verdict == Outcome.INCONCLUSIVE.value]
    decided = {v.context for v, yes in zip(checks, chosen, strict=True) if yes}
    if pooled is not None and (unsure or decided):
        ctx.emit(_event(ctx, phase, pooled, decided, unsure))
    out = {}
    for v, yes in zip(checks, chosen, strict=True):
        if not yes:
            continue
        new = replace(v, t=ctx.now(), valid=True, outcome=Outcome.VALID.value, basis=Basis.POOLED)
        ctx.emit(new)
        out[v.context] = new
    return out


def _event(
    ctx: RunContext, phase: str, pooled: PooledCheck, decided: set[int], unsure: list[int]
) -> PooledValidity:
    return PooledValidity(
        ctx.now(),
        phase,
        pooled.contexts,
        pooled.rounds,
        pooled.ratio.n,
        pooled.ratio,
        pooled.tolerance_pct,
        pooled.outcome.value,
        POOLED_ESTIMATOR,
        POOLED_CI_METHOD,
        tuple(sorted(decided)),
        tuple(c for c in unsure if c not in decided),
    )


def mark_rows(rows: list[dict], decided: dict[int, Validity]) -> list[dict]:
    """A phase's rows with the pooled decisions in (`valid`, `outcome`, `basis`)."""
    return [
        {**r, "valid": True, "outcome": Outcome.VALID.value, "basis": Basis.POOLED.value}
        if r["context"] in decided
        else r
        for r in rows
    ]
