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

- One cache per arm that keeps every step's tokens (what this bench used to do). Both arms would
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

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import mlx.core as mx

from mlatui.config.gate_settings import IndexerMode
from mlatui.gate.policy import DEFAULT_GATES, STOCK_GATES, FormulaPolicy, Gates
from mlatui.measure.estimates import (
    CI_METHOD,
    ContextEstimates,
    Interval,
    Outcome,
    Timing,
    bootstrap_median,
    stable_seed,
)
from mlatui.measure.records import BenchRecord, environment
from mlatui.measure.sampler import SamplerPlan, SamplerRun, sample_context
from mlatui.measure.timing import L1_TOLERANCE_PCT, timed_ms
from mlatui.models.indexer import Indexer, IndexerCache, SparseMLAConfig
from mlatui.models.loading import DTYPES, default_dtype
from mlatui.models.sparse_mla import SparseMLACache, SparseMLAttention
from mlatui.stream.events import ARMS

FAMILY = "glm5.3-flash"
PARTS = ("indexer", "sparse-layer")
# S = 1 is the cheapest step and its check needs a tight paired ratio: three quads per round.
CONTROL_QUADS = 3
INPUTS_PER_WIDTH = 4  # distinct inputs per width, cycled; the k-th sample is the same in both arms
# What each slot runs: its gates (the MLA gate's policy object and the indexer pooling). The
# engine's phase passes its arms' own (an A/A pass gives both slots the same).
Modes = dict[str, Gates]
DEFAULT_MODES: Modes = {"stock": STOCK_GATES, "patched": DEFAULT_GATES}


def _sync(out: Any) -> None:
    mx.eval(out)


@dataclass
class IndexerRecord(BenchRecord):
    """One (part, context, width, arm) cell: the raw samples with the round each came from, and
    the sampler's paired estimates. `median_ms` is the median over rounds of the arm's per-round
    mean (not the median of the pooled samples); `ratio` is the paired stock/patched at this width
    (the same in both arms' records); `vs_s1` is this arm's per-round mean at S over its mean at
    S = 1 in the same round; `outcome` is the part's S = 1 check at this context."""

    rounds: list[int] = field(default_factory=list)  # round index of each raw sample
    order: list[int] = field(default_factory=list)  # its position in the context's schedule
    median_ms: float = math.nan
    ci_low_ms: float = math.nan
    ci_high_ms: float = math.nan
    ratio: float | None = None
    ratio_low: float | None = None
    ratio_high: float | None = None
    vs_s1: float | None = None
    vs_s1_low: float | None = None
    vs_s1_high: float | None = None
    outcome: str = ""
    n_rounds: int = 0
    pool_rebuilds: int = 0  # over this cell's timed samples
    pool_reuses: int = 0

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        s = self.stats
        d.update(p10_ms=s.p10, p90_ms=s.p90, n=s.n, pooled_median_ms=s.median)
        return d


class BenchHooks:
    """What a caller sees of the sampling. Every call comes after the timed region has closed."""

    def check_stop(self) -> None:
        """Raise to stop between samples."""

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


@dataclass
class PartRun:
    """One part at one context: the sampler's run and what the harness checked along the way."""

    part: str
    context: int
    run: SamplerRun
    pool: dict[tuple[str, int], dict[str, int]]  # (arm, width) -> rebuilds / reuses, timed only
    lengths: dict[tuple[str, int], set[int]]  # (arm, width) -> cache length before each step

    @property
    def estimates(self) -> ContextEstimates:
        if self.run.estimates is None:  # sample_context returns after one round at least
            raise RuntimeError(f"{self.part} @ {self.context}: the sampler returned before a round")
        return self.run.estimates

    @property
    def outcome(self) -> Outcome:
        return self.estimates.control_outcome or Outcome.INCONCLUSIVE


@dataclass
class _Part:
    """Both arms of one part at one context, ready to step."""

    name: str
    context: int
    caches: dict[str, Any]  # arm -> IndexerCache | SparseMLACache
    index: Callable[[Any], IndexerCache]  # the indexer cache inside an arm's cache
    set_mode: Callable[[str], None]
    forward: Callable[[str, int, int], Any]  # (arm, width, input number) -> arrays to sync


def _random_index(
    config: SparseMLAConfig, context: int, dtype: mx.Dtype
) -> tuple[mx.array, mx.array]:
    shape = (1, config.index_n_heads, context, config.index_head_dim)  # (B, H, T, D)
    keys = mx.random.normal(shape).astype(dtype)
    gates = mx.random.normal(shape[:3]).astype(dtype)  # (B, H, T)
    mx.eval(keys, gates)
    return keys, gates


def _inputs(
    config: SparseMLAConfig, width: int, dtype: mx.Dtype, seed: int
) -> tuple[mx.array, mx.array]:
    key = mx.random.key(seed)
    x = (mx.random.normal((1, width, config.hidden_size), key=key)).astype(dtype)  # (B, S, hidden)
    qr = mx.random.normal((1, width, config.q_lora_rank or config.hidden_size), key=key).astype(
        dtype
    )
    mx.eval(x, qr)
    return x, qr


def _rewind(cache: Any, index: IndexerCache, length: int) -> None:
    """Undo the last step's append and mark the pool as covering `length` tokens again: its
    complete windows below the last boundary are those of the first `length` tokens, and the
    window holding the boundary is re-pooled from its start by the next step (module docstring)."""
    if index.pool_length < length or cache.offset < length:
        raise RuntimeError(
            f"cannot rewind to {length}: cache at {cache.offset}, pool at {index.pool_length}"
        )
    cache.trim(cache.offset - length)  # a SparseMLACache trims its indexer cache too
    index.pool_length = length


def _indexer_part(
    config: SparseMLAConfig,
    context: int,
    widths: Sequence[int],
    dtype: mx.Dtype,
    seed: int,
    modes: Modes,
) -> _Part:
    mx.random.seed(seed)
    ix = Indexer(config)
    ix.set_dtype(dtype)
    mx.eval(ix.parameters())
    keys, gates = _random_index(config, context, dtype)
    base = IndexerCache()
    base.fill(keys, gates, max(widths) + 256)
    del keys, gates
    ix.mode = IndexerMode.PATCHED
    first = ix(*_inputs(config, 1, dtype, seed), base)  # builds the pool once
    mx.eval(first, base.keys, base.gates, base.pooled)
    _rewind(base, base, context)
    caches = {arm: base.copy() for arm in ARMS}  # both slots copies: neither owns the original
    del base
    for c in caches.values():
        mx.eval(c.keys, c.gates, c.pooled)
    inputs = {
        w: [_inputs(config, w, dtype, seed + 1 + i) for i in range(INPUTS_PER_WIDTH)]
        for w in widths
    }

    def set_mode(arm: str) -> None:
        ix.mode = modes[arm].indexer

    def forward(arm: str, width: int, i: int) -> Any:
        cache = caches[arm]
        sel = ix(*inputs[width][i], cache)
        return sel, cache.keys, cache.gates, cache.pooled

    return _Part("indexer", context, caches, lambda c: c, set_mode, forward)


def _layer_part(
    config: SparseMLAConfig,
    context: int,
    widths: Sequence[int],
    dtype: mx.Dtype,
    seed: int,
    modes: Modes,
) -> _Part:
    """Whole layer, each slot with its (MLA gate, indexer mode): by default stock = (stock,
    stock), patched = (formula, patched)."""
    mx.random.seed(seed)
    layer = SparseMLAttention(config)
    layer.set_dtype(dtype)
    mx.eval(layer.parameters())
    keys, gates = _random_index(config, context, dtype)
    latent = mx.random.normal((1, 1, context, config.kv_lora_rank)).astype(dtype)  # (B, 1, T, r)
    pe = None
    if config.qk_rope_head_dim:
        pe = mx.random.normal((1, 1, context, config.qk_rope_head_dim)).astype(
            dtype
        )  # (B, 1, T, rope)
    base = SparseMLACache()
    base.fill(latent, keys, gates, pe, max(widths) + 256)
    del keys, gates, latent, pe
    x0 = mx.random.normal((1, 1, config.hidden_size)).astype(dtype)
    layer.set_modes(FormulaPolicy(), IndexerMode.PATCHED)
    mx.eval(layer(x0, cache=base), base.latent, base.index.keys, base.index.pooled)  # pool once
    _rewind(base, base.index, context)
    caches = {arm: base.copy() for arm in ARMS}  # both slots copies: neither owns the original
    del base
    for c in caches.values():
        mx.eval(c.latent, c.index.keys, c.index.pooled)
    xs = {
        w: [
            mx.random.normal((1, w, config.hidden_size), key=mx.random.key(seed + 1 + i)).astype(
                dtype
            )  # (B, L, hidden)
            for i in range(INPUTS_PER_WIDTH)
        ]
        for w in widths
    }
    masks = {
        w: caches["stock"].make_mask(w, return_array=True) for w in widths
    }  # every sample is at context
    mx.eval(xs, [m for m in masks.values() if isinstance(m, mx.array)])

    def set_mode(arm: str) -> None:
        layer.set_modes(modes[arm].policy, modes[arm].indexer)

    def forward(arm: str, width: int, i: int) -> Any:
        cache = caches[arm]
        y = layer(xs[width][i], mask=masks[width], cache=cache)
        out = [y, cache.latent, cache.index.keys, cache.index.pooled]
        return out if cache.pe is None else [*out, cache.pe]

    return _Part("sparse-layer", context, caches, lambda c: c.index, set_mode, forward)


def _sample(part: _Part, plan: SamplerPlan, hooks: BenchHooks, modes: Modes) -> PartRun:
    """Run the sampler over one part: every call steps from the context and is rewound to it."""
    keys = [(arm, w) for arm in plan.arms for w in plan.widths]
    calls = dict.fromkeys(keys, 0)
    pool = {k: {"rebuilds": 0, "reuses": 0} for k in keys}
    lengths: dict[tuple[str, int], set[int]] = {k: set() for k in keys}

    def step(arm: str, width: int) -> tuple[float, int, int]:
        cache = part.caches[arm]
        index = part.index(cache)
        lengths[(arm, width)].add(cache.offset)
        if cache.offset != part.context or index.pool_length != part.context:
            raise RuntimeError(
                f"{part.name} @ {part.context}: {arm} cache at {cache.offset} "
                f"(pool {index.pool_length}) before a step; every sample must start at the context"
            )
        part.set_mode(arm)
        i = calls[(arm, width)] % INPUTS_PER_WIDTH
        calls[(arm, width)] += 1
        rebuilds, reuses = index.rebuilds, index.reuses
        ms = timed_ms(lambda: part.forward(arm, width, i), _sync)
        rebuilt = index.rebuilds - rebuilds
        if modes[arm].indexer is IndexerMode.PATCHED and rebuilt:
            raise RuntimeError(
                f"{part.name} @ {part.context}: the {arm} arm's patched pool was rebuilt at "
                f"S={width}; the harness is measuring the rejection case, not consecutive "
                "accepted steps"
            )
        _rewind(cache, index, part.context)
        return ms, rebuilt, index.reuses - reuses

    def measure(arm: str, width: int) -> float:
        ms, rebuilt, reused = step(arm, width)
        pool[(arm, width)]["rebuilds"] += rebuilt
        pool[(arm, width)]["reuses"] += reused
        return ms

    def warm(arm: str, width: int) -> None:
        hooks.warmup(part.name, part.context, arm, width, step(arm, width)[0])

    run = sample_context(
        plan,
        measure,
        warm=warm,
        clock=hooks.clock,
        on_timing=lambda t: hooks.timing(part.name, part.context, t),
        on_round=lambda e: hooks.round(part.name, part.context, e),
        check_stop=hooks.check_stop,
        decide_more=hooks.decide_more,
    )
    return PartRun(part.name, part.context, run, pool, lengths)


def default_plan(
    part: str,
    context: int,
    widths: Sequence[int],
    rounds: int = 6,
    warmup: int = 1,
    max_rounds: int | None = None,
    seed: int = 0,
) -> SamplerPlan:
    widths = tuple(sorted(set(widths) | {1}))
    return SamplerPlan(
        widths,
        min_rounds=rounds,
        max_rounds=max_rounds or 3 * rounds,
        warmup=warmup,
        control_width=1,
        control_quads=CONTROL_QUADS if len(widths) > 1 else 1,
        tolerance_pct=L1_TOLERANCE_PCT,
        seed=stable_seed(seed, part, context),
    )


def measure_part(
    part: str,
    config: SparseMLAConfig,
    context: int,
    plan: SamplerPlan,
    dtype: mx.Dtype,
    hooks: BenchHooks | None = None,
    seed: int = 0,
    modes: Modes | None = None,
) -> PartRun:
    """Build both arms of `part` ("indexer" or "sparse-layer") at `context` and sample them."""
    if part not in PARTS:
        raise ValueError(f"part must be one of {', '.join(PARTS)}, got {part!r}")
    if 1 not in plan.widths or plan.control_width != 1:
        raise ValueError("the indexer bench needs S = 1 as its control width")
    modes = dict(modes or DEFAULT_MODES)
    if set(modes) != set(plan.arms):
        raise ValueError(f"modes must name the arms {plan.arms}, got {sorted(modes)}")
    build = _indexer_part if part == "indexer" else _layer_part
    return _sample(
        build(config, context, plan.widths, dtype, seed, modes), plan, hooks or BenchHooks(), modes
    )


def _per_round_ratio(timings: Sequence[Timing], arm: str, width: int, seed: int) -> Interval | None:
    """Median over rounds of this arm's mean at `width` over its mean at S = 1, same round."""
    by: dict[tuple[int, int], list[float]] = {}
    for t in timings:
        if t.arm == arm and t.width in (1, width):
            by.setdefault((t.round, t.width), []).append(t.ms)
    ratios = [
        statistics.fmean(by[(r, width)]) / statistics.fmean(by[(r, 1)])
        for r in sorted({r for r, _ in by})
        if (r, width) in by and (r, 1) in by and statistics.fmean(by[(r, 1)]) > 0
    ]
    return bootstrap_median(ratios, stable_seed(seed, "vs_s1", arm, width)) if ratios else None


def control_note(result: PartRun) -> str:
    est = result.estimates
    ratio = est.control_ratio
    outcome = result.outcome
    if ratio is None:
        return f"S=1 control: no paired ratio ({outcome.value})"
    note = (
        f"S=1 control: paired stock/patched {ratio.median:.4f} "
        f"(95% CI {ratio.low:.4f}-{ratio.high:.4f}) over {est.rounds} rounds, "
        f"tolerance ±{est.tolerance_pct:g}%: {outcome.value}"
    )
    return note if outcome is Outcome.VALID else f"{outcome.value.upper()}: {note}"


def part_records(
    result: PartRun, settings: dict[str, Any], env: dict[str, Any]
) -> list[IndexerRecord]:
    est = result.estimates
    plan = result.run.plan
    outcome = result.outcome
    note = control_note(result)
    cells: dict[tuple[str, int], list[Timing]] = {}
    order: dict[int, int] = {}
    for i, t in enumerate(result.run.timings):
        cells.setdefault((t.arm, t.width), []).append(t)
        order[id(t)] = i
    records = []
    for width in plan.widths:
        ratio = est.ratio.get(width)
        for arm in plan.arms:
            ts = cells.get((arm, width), [])
            iv = est.step_ms.get((arm, width))
            vs = _per_round_ratio(result.run.timings, arm, width, plan.seed) if width > 1 else None
            records.append(
                IndexerRecord(
                    result.part,
                    FAMILY,
                    arm,
                    result.context,
                    width,
                    [t.ms for t in ts],
                    settings,
                    env,
                    outcome is Outcome.VALID,
                    note,
                    rounds=[t.round for t in ts],
                    order=[order[id(t)] for t in ts],
                    median_ms=iv.median if iv else math.nan,
                    ci_low_ms=iv.low if iv else math.nan,
                    ci_high_ms=iv.high if iv else math.nan,
                    ratio=ratio.median if ratio else None,
                    ratio_low=ratio.low if ratio else None,
                    ratio_high=ratio.high if ratio else None,
                    vs_s1=vs.median if vs else (1.0 if width == 1 else None),
                    vs_s1_low=vs.low if vs else (1.0 if width == 1 else None),
                    vs_s1_high=vs.high if vs else (1.0 if width == 1 else None),
                    outcome=outcome.value,
                    n_rounds=est.rounds,
                    pool_rebuilds=result.pool[(arm, width)]["rebuilds"],
                    pool_reuses=result.pool[(arm, width)]["reuses"],
                )
            )
    return records


def run_indexer_bench(
    contexts: Sequence[int],
    widths: Sequence[int],
    rounds: int = 6,
    warmup: int = 1,
    hooks: BenchHooks | None = None,
    layer_contexts: Sequence[int] | None = None,
    dtype: str | None = None,
    config: SparseMLAConfig | None = None,
    *,
    max_rounds: int | None = None,
    seed: int = 0,
    plan: Callable[[str, int], SamplerPlan] | None = None,
    modes: Modes | None = None,
    on_records: Callable[[list[IndexerRecord]], None] = lambda records: None,
) -> list[IndexerRecord]:
    """Indexer ms per step at every context x width, and the whole sparse layer's step ms at
    `layer_contexts` (default: the same contexts; pass [] to skip), each context sampled in
    rounds with S = 1 as the control. `plan(part, context)` overrides the sampler plan (the
    engine's phase builds it from the scenario); otherwise `rounds` / `max_rounds` / `warmup`.
    `modes` says what each slot runs (default: stock vs patched gates and pooling).
    `on_records` gets each part's records as soon as it is done; when `hooks.check_stop` raises
    Interrupted, the parts done so far are returned."""
    from mlatui.host.signals import Interrupted

    modes = dict(modes or DEFAULT_MODES)
    config = config or SparseMLAConfig()
    dtype = dtype or default_dtype()
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
    widths = [1, *sorted({int(w) for w in widths} - {1})]
    layer_contexts = list(contexts) if layer_contexts is None else list(layer_contexts)
    for context in [*contexts, *layer_contexts]:
        if context <= config.index_topk:
            raise ValueError(
                f"context {context} is within index_topk {config.index_topk}: the indexer is "
                "bypassed there; use contexts above it"
            )
    plan = plan or (
        lambda part, context: default_plan(part, context, widths, rounds, warmup, max_rounds, seed)
    )
    hooks = hooks or BenchHooks()
    env = environment()
    base_settings = dict(
        dtype=dtype,
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
        seed=seed,
        modes={
            arm: {"mla_gate": str(g.threshold), "indexer": g.indexer.value}
            for arm, g in modes.items()
        },
    )
    records: list[IndexerRecord] = []
    jobs = [("indexer", c) for c in contexts] + [("sparse-layer", c) for c in layer_contexts]
    for part, context in jobs:
        p = plan(part, context)
        settings = dict(
            base_settings,
            min_rounds=p.min_rounds,
            max_rounds=p.max_rounds,
            warmup=p.warmup,
            control_quads=p.control_quads,
            tolerance_pct=p.tolerance_pct,
        )
        try:
            result = measure_part(part, config, context, p, DTYPES[dtype], hooks, seed, modes)
        except Interrupted:
            break
        hooks.done(result)
        done = part_records(result, settings, env)
        records += done
        on_records(done)
        mx.clear_cache()
    return records
