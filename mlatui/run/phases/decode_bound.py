"""Settings rejected by bound (mlatui.measure.bound), decided for each context after its verify
rounds and before its decode blocks: a rejected (arm, setting) runs no blocks, and its result
says so (`DecodeResult.measured` False, `bound`), with no tok/s."""

from __future__ import annotations

from dataclasses import dataclass, field

from mlatui.measure.bound import rejection_text, speedup_bound
from mlatui.measure.estimates import ContextEstimates
from mlatui.measure.plans import Setting
from mlatui.run.phases.base import RunContext
from mlatui.run.phases.decode_blocks import BlockRunner
from mlatui.stream.events import ARMS, DecodeResult, LogMessage, SpeedupBound, arm_label

Key = tuple[str, Setting]  # (arm, setting)


def bounds_of(verify: ContextEstimates, settings: tuple[Setting, ...]) -> dict[Key, SpeedupBound]:
    """Every speculative setting's bound per arm, from the verify rounds' plain (L = 1) and
    verify (L = depth + 1) steps and their paired ratio."""
    out: dict[Key, SpeedupBound] = {}
    for st in settings:
        if not st.depth:
            continue
        for arm in ARMS:
            plain = verify.step_ms.get((arm, 1))
            wide = verify.step_ms.get((arm, st.depth + 1))
            if plain is None or wide is None:
                continue
            b = speedup_bound(st.depth, plain, wide, verify.vs_l1.get((arm, st.depth + 1)))
            if b is not None:
                out[(arm, st)] = b
    return out


@dataclass(frozen=True)
class BoundDecision:
    """A context's bounds per (arm, setting), and the results of those they rejected (emitted
    before any block ran)."""

    bounds: dict[Key, SpeedupBound] = field(default_factory=dict)
    rejected: dict[Key, DecodeResult] = field(default_factory=dict)

    def skipped_widths(self, settings: tuple[Setting, ...]) -> frozenset[tuple[str, int]]:
        return skipped_widths(settings, self.rejected)


def decide_bounds(ctx: RunContext, runner: BlockRunner, verify: ContextEstimates) -> BoundDecision:
    """The bounds from the verify rounds; with the phase's `reject_by_bound`, the settings they
    reject (rank 0 decides for every rank), emitted now and logged."""
    bounds = bounds_of(verify, runner.settings)
    if not runner.phase.reject_by_bound:
        return BoundDecision(bounds)
    keys = [(arm, st) for st in runner.settings for arm in ARMS if (arm, st) in bounds]
    decided = ctx.leader_decides_each([bounds[k].rejects for k in keys])
    rejected = {
        key: _rejected(ctx, runner, verify, key, bounds[key])
        for key, rejects in zip(keys, decided, strict=True)
        if rejects
    }
    return BoundDecision(bounds, rejected)


def _rejected(
    ctx: RunContext, runner: BlockRunner, verify: ContextEstimates, key: Key, b: SpeedupBound
) -> DecodeResult:
    phase, length, (arm, st) = runner.phase, runner.length, key
    verify_iv = verify.step_ms.get((arm, st.depth + 1))
    r = DecodeResult(
        ctx.now(),
        phase.name,
        arm,
        length,
        st.depth,
        0,
        0.0,
        None,
        verify_ms_median=verify_iv.median if verify_iv else None,
        sampling=runner.sampling.to_dict(),
        rounds=verify.rounds,
        block_tokens=phase.tokens,
        draft_kind=st.kind,
        measured=False,
        bound=b,
    )
    ctx.emit(r)
    ctx.emit(
        LogMessage(
            ctx.now(),
            "info",
            f"{phase.name} @ {length}: {arm_label(arm, phase.name)} {st.label} "
            f"{rejection_text(b)}; its decode "
            "blocks are not run",
        )
    )
    return r


def skipped_widths(
    settings: tuple[Setting, ...], rejected: dict[Key, DecodeResult]
) -> frozenset[tuple[str, int]]:
    """The sampler's (arm, width) of the rejected settings (width = place in settings + 1)."""
    return frozenset((arm, settings.index(st) + 1) for arm, st in rejected)
