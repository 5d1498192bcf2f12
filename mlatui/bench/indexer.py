"""Sparse indexer benchmark: per-step ms of the pooled-window indexer, stock vs patched, and of the
whole sparse MLA layer, at GLM-5.3-Flash geometry with random weights.

Both arms share one module (same weights); each has its own cache, copied from one prefill so they
start bit-identical. Every comparison goes through the one sampler (`mlatui.measure.sampler`): rounds in
which every width is measured once per arm as an A B B A quad (mirrored on odd rounds), widths in
a rotating order, S = 1 as the control with several quads per round; after the first rounds the
S = 1 check decides valid / invalid from the paired ratio's bootstrap CI (both arms run the same
code at S = 1, so the ratio must be 1 within 2%), adding rounds while it is inconclusive.

What one sample is. The case to measure is a verify step whose drafts were all accepted: the step
appends S tokens and the pool cache is exactly as long as the cache, so patched re-pools only the
tail while stock re-pools all T tokens whenever S > 1. Three ways to keep that state over a
context's samples were weighed:

- One cache per arm that keeps every step's tokens. Both arms would
  still see the same length at each quad (each quad gives both arms two steps of one width), but
  under rotating rounds a width's length depends on its position in the round and on the widths
  measured before it, and the context drifts upward through the run, so a later round compares a
  longer cache than an earlier one.
- One growing cache per (arm, width): position no longer matters, but wide widths run ahead of
  narrow ones (S = 4 grows four times faster than S = 1, so "patched S = 4 / S = 1" compares two
  lengths), and it costs a cache copy per width (1 GiB of index keys per copy at 131072 in bf16).
- Trim the S tokens off after each sample, as the attention benchmark does. Plain `trim` is the
  rejection case: the pool remembers the longer cache, the continuity guard refuses it, and
  patched rebuilds on every sample.

The bench rewinds: after each sample (outside the timed region) it trims the S tokens and tells
the pool it covers the context again (`_rewind`). That is exact, not an approximation: a pool
window depends only on its own tokens, so every complete window below the context's last window
boundary is unchanged by the step (whether the step re-pooled them or not), and the window holding
the boundary is re-pooled from its start by the next step (an incremental refresh restarts at
`pool_length // kpool * kpool`); the keys past the context are overwritten by the next append.
So every sample, in every arm, width, round and position, starts from the state a cache of exactly
`context` tokens is in after an accepted verify step, and no arm or width sees a longer cache
than another. The harness checks it: the cache length before every step must be the context, and
a patched step that rebuilt its pool is an error (it would be measuring the rejection case); the
pool's rebuilds and reuses are counted per (arm, width) and kept in the records. The layer's
attention mask depends only on (S, context), so it is built once per width, outside the samples.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import mlx.core as mx

from mlatui.config.arm_settings import IndexerMode
from mlatui.measure.estimates import (
    CI_METHOD,
    ContextEstimates,
    Timing,
    stable_seed,
)
from mlatui.measure.records import IndexerPart, IndexerRecord, PartRun, environment, part_records
from mlatui.measure.sampler import L1_TOLERANCE_PCT, Hooks, SamplerPlan, sample_context
from mlatui.models.indexer import SparseMLAConfig
from mlatui.models.loading import DTYPES, default_dtype
from mlatui.models.sparse_mla import (
    DEFAULT_MODES,
    INPUTS_PER_WIDTH,
    Modes,
    Part,
    indexer_part,
    layer_part,
    pool_step,
)

PARTS = tuple(IndexerPart)
# S = 1 is the cheapest step and its check needs a tight paired ratio: three quads per round.
CONTROL_QUADS = 3


class BenchHooks:
    """What a caller sees of the sampling. Every call comes after the timed region has closed."""

    def check_stop(self) -> None:
        """Raise to stop between samples."""

    def skip(self, part: str, context: int) -> bool:
        """True to leave a part out before it is built (a time limit that it would overrun)."""
        return False

    def decide_more(self, wants_more: bool) -> bool:
        return wants_more

    def clock(self) -> float:
        return 0.0

    def warmup(self, part: str, context: int, arm: str, width: int, ms: float) -> None:
        pass

    def timing(self, part: str, context: int, timing: Timing) -> None:
        pass

    def round(self, part: str, context: int, estimates: ContextEstimates) -> None:
        pass

    def done(self, result: PartRun) -> None:
        pass


def _sample(part: Part, plan: SamplerPlan, hooks: BenchHooks, modes: Modes) -> PartRun:
    """Run the sampler over one part: every call steps from the context and is rewound to it."""
    keys = [(arm, w) for arm in plan.arms for w in plan.widths]
    calls = dict.fromkeys(keys, 0)
    pool = {k: {"rebuilds": 0, "reuses": 0} for k in keys}
    lengths: dict[tuple[str, int], set[int]] = {k: set() for k in keys}

    def step(arm: str, width: int) -> tuple[float, int, int]:
        cache = part.caches[arm]
        lengths[(arm, width)].add(cache.offset)
        part.set_mode(arm)
        i = calls[(arm, width)] % INPUTS_PER_WIDTH
        calls[(arm, width)] += 1
        return pool_step(
            f"{part.name} @ {part.context} S={width}, {arm} arm",
            cache,
            part.index(cache),
            part.context,
            lambda: part.forward(arm, width, i),
            modes[arm].indexer is IndexerMode.PATCHED,
        )

    def measure(arm: str, width: int) -> float:
        ms, rebuilt, reused = step(arm, width)
        pool[(arm, width)]["rebuilds"] += rebuilt
        pool[(arm, width)]["reuses"] += reused
        return ms

    def warm(arm: str, width: int) -> None:
        hooks.warmup(part.name, part.context, arm, width, step(arm, width)[0])

    run = sample_context(
        plan,
        Hooks(
            measure,
            warm=warm,
            clock=hooks.clock,
            on_timing=lambda t: hooks.timing(part.name, part.context, t),
            on_round=lambda e: hooks.round(part.name, part.context, e),
            check_stop=hooks.check_stop,
            decide_more=hooks.decide_more,
        ),
    )
    return PartRun(part.name, part.context, run, pool, lengths)


@dataclass(frozen=True)
class Rounds:
    """Sampler rounds per part: at least `rounds`, while the S = 1 check is inconclusive up to
    `max_rounds` (None: three times `rounds`), after `warmup` untimed steps per arm and width."""

    rounds: int = 6
    warmup: int = 1
    max_rounds: int | None = None


@dataclass(frozen=True)
class PartBuild:
    """What both arms of a part are built from: the sparse layer's config, the dtype's name (None:
    the device's default), the seed of the random weights and of the sampler, and what each slot
    runs (default: stock vs patched gates and pooling)."""

    config: SparseMLAConfig | None = None  # None: GLM-5.3-Flash's
    dtype: str | None = None
    seed: int = 0
    modes: Modes = field(default_factory=lambda: dict(DEFAULT_MODES))

    def resolved(self) -> PartBuild:
        """The same build with its config and dtype filled in (and the dtype checked)."""
        dtype = self.dtype_name
        if dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
        return replace(self, config=self.config or SparseMLAConfig(), dtype=dtype)

    @property
    def dtype_name(self) -> str:
        return self.dtype or default_dtype()

    @property
    def sparse_config(self) -> SparseMLAConfig:
        if self.config is None:
            raise ValueError("resolve the build first (PartBuild.resolved)")
        return self.config


@dataclass(frozen=True)
class IndexerGrid:
    """Where the bench measures: the indexer at every context x width, the whole sparse layer at
    `layer_contexts` (None: the same contexts; [] skips it). S = 1 is always measured."""

    contexts: Sequence[int]
    widths: Sequence[int]
    layer_contexts: Sequence[int] | None = None

    def jobs(self) -> list[tuple[IndexerPart, int]]:
        layer = self.contexts if self.layer_contexts is None else self.layer_contexts
        return [(IndexerPart.INDEXER, c) for c in self.contexts] + [
            (IndexerPart.SPARSE_LAYER, c) for c in layer
        ]

    def all_widths(self) -> list[int]:
        return [1, *sorted({int(w) for w in self.widths} - {1})]


def default_plan(
    part: str, context: int, widths: Sequence[int], rounds: Rounds = Rounds(), seed: int = 0
) -> SamplerPlan:
    widths = tuple(sorted(set(widths) | {1}))
    return SamplerPlan(
        widths,
        min_rounds=rounds.rounds,
        max_rounds=rounds.max_rounds or 3 * rounds.rounds,
        warmup=rounds.warmup,
        control_width=1,
        control_quads=CONTROL_QUADS if len(widths) > 1 else 1,
        tolerance_pct=L1_TOLERANCE_PCT,
        seed=stable_seed(seed, part, context),
    )


def measure_part(
    part: str,
    context: int,
    plan: SamplerPlan,
    build: PartBuild = PartBuild(),
    hooks: BenchHooks | None = None,
) -> PartRun:
    """Build both arms of `part` ("indexer" or "sparse-layer") at `context` and sample them."""
    if part not in PARTS:
        raise ValueError(f"part must be one of {', '.join(PARTS)}, got {part!r}")
    if 1 not in plan.widths or plan.control_width != 1:
        raise ValueError("the indexer bench needs S = 1 as its control width")
    modes = dict(build.modes)
    if set(modes) != set(plan.arms):
        raise ValueError(f"modes must name the arms {plan.arms}, got {sorted(modes)}")
    make = indexer_part if part == IndexerPart.INDEXER else layer_part
    build = build.resolved()
    dtype = DTYPES[build.dtype_name]
    arms = make(build.sparse_config, context, plan.widths, dtype, build.seed, modes)
    return _sample(arms, plan, hooks or BenchHooks(), modes)


def run_indexer_bench(
    grid: IndexerGrid,
    rounds: Rounds = Rounds(),
    build: PartBuild = PartBuild(),
    hooks: BenchHooks | None = None,
    on_records: Callable[[list[IndexerRecord]], None] = lambda records: None,
) -> list[IndexerRecord]:
    """Indexer ms per step at every context x width of `grid`, and the whole sparse layer's step
    ms at its layer contexts, each context sampled in rounds with S = 1 as the control.
    `on_records` gets each part's records as soon as it is done; when `hooks.check_stop` raises
    Interrupted, the parts done so far are returned."""
    from mlatui.host.signals import Interrupted

    build = build.resolved()
    topk = build.sparse_config.index_topk
    for _, context in grid.jobs():
        if context <= topk:
            raise ValueError(
                f"context {context} is within index_topk {topk}: the indexer is bypassed there; "
                "use contexts above it"
            )
    hooks = hooks or BenchHooks()
    widths, base_settings, env = grid.all_widths(), _settings(build), environment()
    records: list[IndexerRecord] = []
    for part, context in grid.jobs():
        if hooks.skip(part, context):
            continue
        plan = default_plan(part, context, widths, rounds, build.seed)
        try:
            result = measure_part(part, context, plan, build, hooks)
        except Interrupted:
            break
        hooks.done(result)
        done = part_records(result, {**base_settings, **_plan_settings(plan)}, env)
        records += done
        on_records(done)
        mx.clear_cache()
    return records


def _settings(build: PartBuild) -> dict[str, Any]:
    """What every record of a run says about how it was measured."""
    config = build.sparse_config
    return dict(
        dtype=build.dtype,
        order="rounds of A B B A quads (B A A B on odd rounds), widths rotating, S=1 control",
        steps=(
            "each sample appends S tokens to a cache of exactly `context` tokens whose pool is "
            "current (all drafts accepted), then the harness rewinds cache and pool to `context`"
        ),
        estimators="median over rounds with " + CI_METHOD,
        index_n_heads=config.index_n_heads,
        index_head_dim=config.index_head_dim,
        index_kpool=config.index_kpool,
        index_topk=config.index_topk,
        geometry=f"r{config.kv_lora_rank}-n{config.qk_nope_head_dim}-v{config.v_head_dim}",
        heads=config.num_attention_heads,
        hidden=config.hidden_size,
        seed=build.seed,
        modes={
            arm: {"mla_gate": str(g.threshold), "indexer": g.indexer.value}
            for arm, g in build.modes.items()
        },
    )


def _plan_settings(plan: SamplerPlan) -> dict[str, Any]:
    return dict(
        min_rounds=plan.min_rounds,
        max_rounds=plan.max_rounds,
        warmup=plan.warmup,
        control_quads=plan.control_quads,
        tolerance_pct=plan.tolerance_pct,
    )


class TimedProgress(BenchHooks):
    """The bench's hooks: per-sample progress on stderr (unless quiet) and the time limit, which
    leaves out parts and new pairs of rounds that would end past it."""

    def __init__(
        self,
        quiet: bool,
        check_stop: Callable[[], None] = lambda: None,
        max_seconds: float | None = None,
    ) -> None:
        self.quiet, self._check_stop = quiet, check_stop
        started = time.monotonic()
        self.deadline = None if max_seconds is None else started + max_seconds
        self.skipped: list[tuple[str, int]] = []
        self.last: tuple[int, float] | None = None  # (context, seconds) of the last part run
        self.part_start = started
        self.rounds = 0  # rounds of the part being sampled
        self.pair_end = started  # when the part's last pair of rounds (or the part) began

    def check_stop(self) -> None:
        self._check_stop()

    def decide_more(self, wants_more: bool) -> bool:
        """Past the limit no new pair of rounds, even below --rounds (the second round of a pair
        always runs, so each arm goes first equally often); the S=1 check may then stay
        undecided, and the report says so."""
        self.rounds += 1
        if self.rounds % 2 or self.deadline is None:
            return wants_more
        now = time.monotonic()  # a new pair must end by the limit, as the last one took
        pair_s, self.pair_end = now - self.pair_end, now
        return wants_more and now + pair_s <= self.deadline

    def skip(self, part: str, context: int) -> bool:
        """Leave a part out when it would end past the limit: its cost estimated from the last
        part's, scaled by context (every step reads the whole cache)."""
        now = time.monotonic()
        if self.deadline is not None and self.last is not None:
            last_context, last_s = self.last
            if now + last_s * context / last_context > self.deadline:
                self.skipped.append((part, context))
                return True
        self.part_start, self.rounds, self.pair_end = now, 0, now
        return False

    def warmup(self, part: str, context: int, arm: str, width: int, ms: float) -> None:
        if not self.quiet:
            print(
                f"{part} T={context} S={width} {arm}: {ms:.2f} ms (warm-up)",
                file=sys.stderr,
                flush=True,
            )

    def timing(self, part: str, context: int, timing: Timing) -> None:
        if not self.quiet:
            print(
                f"{part} T={context} round {timing.round + 1} S={timing.width} "
                f"{timing.arm}: {timing.ms:.2f} ms",
                file=sys.stderr,
                flush=True,
            )

    def done(self, result: PartRun) -> None:
        from mlatui.measure.records import control_note

        self.last = (result.context, time.monotonic() - self.part_start)
        print(f"{result.part} T={result.context}: {control_note(result)}", file=sys.stderr)
