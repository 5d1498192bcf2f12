"""Settings rejected by bound (mlatui.measure.bound), decided for each context after its verify
rounds and before its decode blocks: a rejected (arm, setting) runs no blocks, and its result
says so (`DecodeResult.measured` False, `bound`), with no tok/s."""

from __future__ import annotations

from mlatui.config.scenario import Phase
from mlatui.measure.bound import rejection_text, speedup_bound
from mlatui.measure.estimates import ContextEstimates
from mlatui.measure.plans import Setting
from mlatui.run.phases.base import RunContext
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


def reject_by_bound(
    ctx: RunContext,
    phase: Phase,
    length: int,
    verify: ContextEstimates,
    settings: tuple[Setting, ...],
    bounds: dict[Key, SpeedupBound],
    sampling: dict,
) -> dict[Key, DecodeResult]:
    """The results of the settings whose bound rejects them (rank 0 decides for every rank),
    emitted now, before any block runs; each is logged."""
    keys = [(arm, st) for st in settings for arm in ARMS if (arm, st) in bounds]
    decided = ctx.leader_decides_each([bounds[k].rejects for k in keys])
    out: dict[Key, DecodeResult] = {}
    for key, rejected in zip(keys, decided, strict=True):
        if not rejected:
            continue
        arm, st = key
        b = bounds[key]
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
            sampling=sampling,
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
        out[key] = r
    return out


def skipped_widths(settings: tuple[Setting, ...], rejected: dict[Key, DecodeResult]):
    """The sampler's (arm, width) of the rejected settings (width = place in settings + 1)."""
    return frozenset((arm, settings.index(st) + 1) for arm, st in rejected)
