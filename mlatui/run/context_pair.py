"""One arm's step cost at two context lengths, paired: does the patched path's cost stay flat as
the context grows?

A sweep measures its contexts one after the other, so a step at 16K and one at 2K are a minute
apart, and on a drifting device (the H200's L = 1 level moves 1.4x between minutes) their ratio
mostly compares device regimes. Here the two lengths take the sampler's two slots instead of the
two arms: one variant (patched by default), one model, two caches, each on a worker thread of its
own, and every A B B A quad alternates the lengths. The ratio ms(long) / ms(short) per width is a
median over quads with the sampler's block-bootstrap CI, as every paired figure in mlatui.

The caches keep their own buffers all run (they differ in size, so they cannot be exchanged as
the arms' are): a per-buffer cost stays with its length, which the A/A runs bound at ±1.4% (CPU).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mlatui.gate.policy import Variant
from mlatui.measure.estimates import stable_seed
from mlatui.measure.sampler import Hooks, SamplerPlan, SamplerRun, sample_context, until
from mlatui.run.arms import (
    Arm,
    ArmWorker,
    Baton,
    build_arms,
    cache_len,
    fill_random_latents,
    prefill,
)
from mlatui.run.phases.base import forward_and_trim
from mlatui.stream.event_base import Interval


@dataclass(frozen=True)
class ContextPairResult:
    width: int
    step_ms: dict[int, Interval]  # context -> median step ms [95% CI]
    growth: Interval  # ms(long) / ms(short), paired
    samples_ms: dict[int, list[float]]  # context -> raw samples, in order
    rounds: int


@dataclass(frozen=True)
class ContextPairPlan:
    """What a context pair measures: two lengths of one variant's cache, the widths stepped on
    each, the rounds of quads and the time they may take."""

    contexts: tuple[int, int]  # (short, long)
    widths: tuple[int, ...]
    rounds: int
    seed: int
    variant: Variant = Variant.PATCHED
    fill: str = "prefill"  # or "random-latents"
    max_seconds: float | None = None

    def sampler_plan(self) -> SamplerPlan:
        short, long = self.contexts
        return SamplerPlan(
            self.widths,
            min_rounds=self.rounds,
            max_rounds=self.rounds,
            warmup=1,
            control_width=None,  # the two lengths differ by design: there is no null check
            arms=(str(long), str(short)),
            seed=stable_seed(self.seed, "context-pair", short, long),
            settle=True,
        )


def _filler(length: int, tokens: list[int], fill: str, seed: int) -> Callable[[Arm], int]:
    def run(arm: Arm) -> int:
        if fill == "random-latents":
            return fill_random_latents(arm, length, seed)
        return prefill(arm, tokens)

    return run


def measure_context_pair(
    model: Any, tokens_for: Callable[[int], list[int]], plan: ContextPairPlan
) -> tuple[list[ContextPairResult], SamplerRun]:
    """A result per width and the sampler's run (its timings in the order they were taken)."""
    workers = _length_workers(model, plan.variant, plan.contexts)
    try:
        run = _sample_lengths(workers, tokens_for, plan)
    finally:
        for w in workers.values():
            w.close()
    return [_width_result(run, plan.contexts, width) for width in plan.widths], run


def _length_workers(
    model: Any, variant: Variant, contexts: tuple[int, int]
) -> dict[int, ArmWorker]:
    """One slot per length, each the chosen variant of the same model on a thread of its own."""
    stock, patched = build_arms(model)
    base = patched if variant is Variant.PATCHED else stock
    baton = Baton()
    slots = {c: Arm(str(c), base.model, base.report, variant=base.variant, gates=base.gates)
             for c in contexts}  # fmt: skip
    return {c: ArmWorker(slots[c], baton) for c in contexts}


def _sample_lengths(
    workers: dict[int, ArmWorker], tokens_for: Callable[[int], list[int]], plan: ContextPairPlan
) -> SamplerRun:
    """Fill each length's cache, then the sampler's quads over the two lengths; every step is
    trimmed back, which is checked at the end."""
    contexts, widths = plan.contexts, plan.widths
    text = tokens_for(contexts[1] + max(widths))
    for c in contexts:  # each length's cache made on the thread that steps it
        workers[c].call(_filler(c, text[:c], plan.fill, stable_seed(plan.seed, "latents", c)))
    steps = {(c, w): forward_and_trim(text[c : c + w]) for c in contexts for w in widths}

    def measure(slot: str, width: int) -> float:
        c = int(slot)
        ms, _, _ = workers[c].call(steps[(c, width)])
        return ms

    deadline = None if plan.max_seconds is None else time.monotonic() + plan.max_seconds
    run = sample_context(plan.sampler_plan(), Hooks(measure, decide_more=until(deadline)))
    lengths = {c: workers[c].call(lambda a: cache_len(a.caches)) for c in contexts}
    if lengths != {c: c for c in contexts}:
        raise RuntimeError(f"a step did not trim its cache back: {lengths}")
    return run


def _width_result(run: SamplerRun, contexts: tuple[int, int], width: int) -> ContextPairResult:
    return ContextPairResult(
        width,
        {c: run.final.step_ms[(str(c), width)] for c in contexts},
        run.final.ratio[width],  # ms(long) / ms(short)
        {c: [t.ms for t in run.timings if t.arm == str(c) and t.width == width] for c in contexts},
        run.rounds,
    )
