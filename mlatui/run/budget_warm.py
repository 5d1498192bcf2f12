"""The probe's first use of the decode paths: a device that compiles kernels on first use (MLX on
CUDA and on Metal) compiles the sampler, the MTP head and the draft model's kernels at the tune's
first block, not at the probe's synced steps. On a cold H200 that was ~20 s inside the tune, time
no forecast had: the budget's deadline then cut the rounds it had planned. Run each decode
setting here, twice, and count the first's time beyond the second's as the one-off it is."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from functools import partial

from mlatui.config.scenario import Phase
from mlatui.measure.plans import Setting, decode_settings
from mlatui.run.arms import Arm
from mlatui.run.decode_stream import DecodeStream, open_stream, rewind, run_block
from mlatui.run.phases.base import RunContext
from mlatui.run.phases.decode_blocks import sampling_of

# enough tokens for a verify step and an accepted draft at every depth the default tune runs
WARM_BLOCK_TOKENS = 8


def decode_phase(phases: Sequence[Phase]) -> Phase | None:
    """The first tune or decode phase: its settings and sampling are the blocks to warm."""
    return next((p for p in phases if p.kind.rules.decodes), None)


def warm_decode_blocks(ctx: RunContext, phase: Phase, length: int, text: list[int]) -> float:
    """Each of `phase`'s decode settings, on the patched arm at the prefilled `length` (`text`
    is the run's text from its start): a block, rewound, then the same block again. Returns the
    seconds the first blocks took beyond the second ones. Under mlx.launch every rank runs the
    same blocks (they are collective), synchronised after each as the tune's are."""
    worker = ctx.workers["patched"]
    stream: DecodeStream = worker.call(
        lambda a: open_stream(a, length, text[length], text[:length])
    )
    sampling = sampling_of(phase)
    n = min(phase.tokens, WARM_BLOCK_TOKENS)
    first_s = 0.0
    for st in decode_settings(phase, ctx.draft_kinds):

        def block(a: Arm, st: Setting = st) -> None:
            rewind(a, stream)
            run_block(a, stream, st, n, sampling, ctx.seed)

        took: list[float] = []
        for _ in range(2):
            ctx.check_stop()
            start = time.perf_counter()
            worker.call(block)
            took.append(time.perf_counter() - start)
        first_s += max(0.0, took[0] - took[1])
    worker.call(partial(rewind, s=stream))
    return first_s


def decode_warmer(
    ctx: RunContext, phases: Sequence[Phase]
) -> Callable[[int, list[int]], float] | None:
    """`warm_decode_blocks` for the scenario's first tune or decode phase; None without one."""
    phase = decode_phase(phases)
    if phase is None:
        return None
    return partial(warm_decode_blocks, ctx, phase)
