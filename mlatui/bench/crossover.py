"""The crossover search behind `mlatui calibrate`: forced-branch probes of one attention layer,
bisected per context to the widest L at which the absorbed branch still wins.

Each probe is one width timed through the sampler (`mlatui.measure.sampler`): rounds of A B B A
quads of the two forced branches, decided by the median of the per-round paired ratio
absorbed/materialised."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from mlatui.bench.attention_scenario import AttentionModel
from mlatui.measure import forced_branches
from mlatui.measure.estimates import Interval, stable_seed
from mlatui.stream.phrases import interval_text


def find_crossover(
    faster: Callable[[int], bool], max_width: int, progress: Callable[[str], None] = lambda s: None
) -> int:
    """Largest width in [1, max_width] where `faster(width)` (absorbed beats materialised), by
    bisection: assumes absorbed wins at 1 on a warm cache and the win region is contiguous."""
    if faster(max_width):
        return max_width
    lo, hi = 1, max_width
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if faster(mid):
            lo = mid
        else:
            hi = mid
    return lo


@dataclass(frozen=True)
class Probe:
    """One bisection probe: per-branch step ms and the paired ratio absorbed/materialised."""

    width: int
    absorbed: Interval
    materialised: Interval
    ratio: Interval
    faster: bool  # absorbed faster: the ratio's median < 1

    @property
    def within_noise(self) -> bool:
        return forced_branches.within_noise(self.ratio)


@dataclass(frozen=True)
class CalibrateHooks:
    """What the caller hears during a calibration: progress lines, each probe as it completes,
    and a stop check run before every step (it raises Interrupted)."""

    progress: Callable[[str], None] = lambda line: None
    on_probe: Callable[[int, Probe], None] = lambda context, probe: None
    check_stop: Callable[[], None] = lambda: None


def calibrate(
    model: AttentionModel,
    contexts: Sequence[int],
    reps: int = 6,
    max_width: int = 2048,
    hooks: CalibrateHooks = CalibrateHooks(),
) -> tuple[Any, dict[int, int], dict[int, list[Probe]]]:
    """Forced-branch timing of one attention layer of `model`; returns (geometry, crossovers,
    probes). Each probe runs `reps` sampler rounds at one width; `hooks.on_probe` gets each
    probe as it completes. When `hooks.check_stop` raises Interrupted, the crossovers of the
    contexts completed so far are returned (probes: every completed one)."""
    from mlatui.bench import attention as attnbench
    from mlatui.host.signals import Interrupted
    from mlatui.models.loading import DTYPES

    family = model.family
    arms = attnbench.forced_arms(
        family, model.size, model.bits, dtype=DTYPES[model.dtype], config=model.config
    )
    crossovers: dict[int, int] = {}
    probes: dict[int, list[Probe]] = {}
    for context in contexts:
        cache = attnbench.layer_cache(arms, context)
        probes[context] = []

        def faster(width: int, context=context, cache=cache) -> bool:
            plan = attnbench.forced_plan(
                (width,), reps, stable_seed("calibrate", family, context, width)
            )
            run = attnbench.time_forced(arms, cache, plan, check_stop=hooks.check_stop)
            est = run.final
            ratio = est.ratio[width]
            a, m = est.step_ms["absorbed", width], est.step_ms["materialised", width]
            probe = Probe(width, a, m, ratio, ratio.median < 1)
            probes[context].append(probe)
            hooks.on_probe(context, probe)
            noise = "; CI straddles 1: within noise" if probe.within_noise else ""
            hooks.progress(
                f"T={context} L={width}: absorbed {a.median:.3f} ms, materialised {m.median:.3f} ms, "
                f"absorbed/materialised {interval_text(ratio)} "
                f"over {run.rounds} rounds: {'absorbed' if probe.faster else 'materialised'} "
                f"faster{noise}"
            )
            return probe.faster

        try:
            crossovers[context] = find_crossover(faster, max_width)
        except Interrupted:
            break
        del cache
    return arms.geometry, crossovers, probes
