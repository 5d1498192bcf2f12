"""The indexer phase: the pooled-window indexer and the whole sparse layer of the arms' own
model, stock vs patched pooling, through the one sampler on the arms' worker threads.

It times the model's first sparse layer (every sparse layer of mlatui's model type shares one
geometry). A sample appends S tokens to a cache of exactly `context` tokens whose pool is current
(all drafts accepted) and is rewound outside the timed region (mlatui.bench.indexer says why that
is exact). Inputs are seeded unit-scale hidden states, the same in both arms: the pool refresh,
scoring, top-k and gathers cost the same whatever the values. Before the rounds each width runs
once untimed in both arms and their outputs are compared. The indexer part's S = 1 check never
joins the run's invalid contexts: it leaves out only this phase's figures.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field, replace
from typing import Any

import mlx.core as mx
import numpy as np

from mlatui.config.scenario import Phase
from mlatui.measure.estimates import ContextEstimates, Outcome, Timing, stable_seed
from mlatui.measure.plans import plan_for
from mlatui.measure.records import IndexerPart, IndexerRecord, PartRun, part_records
from mlatui.measure.sampler import Hooks, SamplerPlan, sample_context
from mlatui.models.indexer import SparseMLAConfig
from mlatui.models.sparse_mla import INPUTS_PER_WIDTH, pool_step, rewind
from mlatui.run.arms import Arm
from mlatui.run.phases.base import (
    EstimateEmitter,
    ProgressTracker,
    RunContext,
    emit_phase_start,
    share_context,
    validity,
)
from mlatui.run.phases.results import Need, PhaseInputs, PhaseResult
from mlatui.stream.events import ARMS, PhaseSummary, Step, arm_label, ratio_label
from mlatui.stream.phase_rows import IndexerRow
from mlatui.stream.phrases import ci_text, interval_text


def part_phase(phase: Phase, part: str) -> str:
    return f"{phase.name}:{IndexerPart(part).tag}"


def _parity(ctx: RunContext, sites: dict[str, ArmSite], part: str, widths) -> dict[int, float]:
    """Per width: the selections' share of identical rows (indexer) or max |stock - patched|
    over max |stock| (layer)."""
    out = {}
    for w in widths:
        a, b = (
            ctx.workers[arm].call(functools.partial(output, s=sites[arm], part=part, width=w))
            for arm in sites
        )
        if part == IndexerPart.INDEXER:
            out[w] = float(np.mean(np.all(a == b, axis=-1)))
        else:
            out[w] = float(np.max(np.abs(a - b)) / max(float(np.max(np.abs(a))), 1e-30))
    return out


def _measure_part(
    ctx: RunContext,
    phase: Phase,
    part: str,
    sites: dict[str, ArmSite],
    plan: SamplerPlan,
    progress: ProgressTracker,
) -> tuple[PartRun, dict[int, float]]:
    name, context = part_phase(phase, part), next(iter(sites.values())).context
    parity = _parity(ctx, sites, part, plan.widths)
    _warn_parity(ctx, name, context, parity, sites["stock"].attn.kv_a_layernorm.weight.dtype)
    keys = [(arm, w) for arm in plan.arms for w in plan.widths]
    pool = {k: {"rebuilds": 0, "reuses": 0} for k in keys}
    pending: list[tuple[int, int]] = []
    emitter = EstimateEmitter(ctx, name, context)

    def call(arm: str, width: int):
        worker = ctx.workers[arm]
        return worker.call(lambda a: step(sites[arm], a, part, width))

    def measure(arm: str, width: int) -> float:
        ms, rebuilt, reused, absorbed, materialised = call(arm, width)
        pool[(arm, width)]["rebuilds"] += rebuilt
        pool[(arm, width)]["reuses"] += reused
        pending.append((absorbed, materialised))
        return ms

    def on_timing(t: Timing) -> None:  # after the timed region has closed
        absorbed, materialised = pending.pop()
        ctx.emit(
            Step(ctx.now(), name, t.arm, context, t.width, t.round, t.ms, absorbed, materialised)
        )
        progress.advance()

    def on_round(estimates: ContextEstimates) -> None:
        emitter(estimates)
        progress.after_round(plan, estimates)

    run = sample_context(
        plan,
        Hooks(
            measure,
            warm=lambda arm, width: call(arm, width) and None,
            clock=ctx.now,
            on_timing=on_timing,
            on_round=on_round,
            check_stop=ctx.check_stop,
            decide_more=ctx.decide_more,
        ),
    )
    emitter(run.final, final=True)
    return PartRun(part, context, run, pool, {}), parity


def _warn_parity(ctx: RunContext, name: str, context: int, parity: dict, dtype) -> None:
    tol = parity_tolerance(dtype)
    for w, value in parity.items():
        off = value < 1.0 if name.endswith(":indexer") else value > tol
        if off:
            what = (
                f"{value:.1%} of the arms' selections agree"
                if name.endswith(f":{IndexerPart.INDEXER.tag}")
                else f"outputs differ by {value:.2e} of their scale (allowed {tol:.1e})"
            )
            ctx.log("warning", f"{name} @ {context} S={w}: {what}")


def _report_part(ctx: RunContext, phase: Phase, result: PartRun) -> None:
    if result.part == IndexerPart.INDEXER:  # its own check: never one of the run's invalid contexts
        validity(ctx, phase.name, result.context, result.estimates)
    elif result.outcome is not Outcome.VALID:
        ratio = result.estimates.control_ratio
        ci = f" (paired {interval_text(ratio, 3, '×')})" if ratio else ""
        ctx.log(
            "warning",
            f"{part_phase(phase, result.part)} @ {result.context}: S=1 check "
            f"{result.outcome.value}{ci}; kept out of the verdict",
        )


def _skip(ctx: RunContext, phase: Phase, index: int, total: int, why: str) -> PhaseSummary:
    emit_phase_start(ctx, phase, index, total, 0, ())
    ctx.log("warning", f"{phase.name}: skipped, {why}")
    summary = PhaseSummary(ctx.now(), phase.name, phase.kind, (), f"skipped: {why}")
    ctx.emit(summary)
    return summary


NEEDS: frozenset[Need] = frozenset()  # its S = 1 checks read only its own quads


def _part_plans(
    ctx: RunContext, phase: Phase, widths: tuple[int, ...], contexts: list[int]
) -> dict[tuple[IndexerPart, int], SamplerPlan]:
    """Each part's plan at each context, on a seed of its own."""
    return {
        (part, c): replace(
            plan_for(phase, widths, ctx.seed, c, ctx.settle),
            seed=stable_seed(ctx.seed, part_phase(phase, part), c),
        )
        for part in IndexerPart
        for c in contexts
    }


def run_indexer_phase(
    ctx: RunContext, phase: Phase, index: int, total_phases: int, inputs: PhaseInputs
) -> PhaseResult:
    """The sparse indexer's parts, stock vs patched pooling, at each context above top-k."""
    stock = ctx.workers["stock"].arm
    sites = sparse_sites(stock.model)
    model_name = stock.model_name
    if not sites:
        why = f"{model_name} has no pooled-indexer sparse layer"
        return PhaseResult(_skip(ctx, phase, index, total_phases, why))
    site = sites[0]
    contexts = [c for c in phase.contexts if c > site.config.index_topk]
    if not contexts:
        why = (
            f"every context is within index_topk {site.config.index_topk} (the indexer is bypassed)"
        )
        return PhaseResult(_skip(ctx, phase, index, total_phases, why))
    widths = tuple(sorted(set(phase.widths) | {1}))
    plans = _part_plans(ctx, phase, widths, contexts)
    planned = sum(p.timed_calls() for p in plans.values())
    emit_phase_start(ctx, phase, index, total_phases, planned, ())
    others = "; ".join(s.describe() for s in sites[1:])
    ctx.log(
        "info",
        f"{phase.name}: timing {site.describe()}, {site.sharing} sparse layer(s) of this "
        f"geometry" + (f"; not timed: {others}" if others else ""),
    )
    progress = ProgressTracker(ctx, phase.name, planned)
    rows: list[IndexerRow] = []
    finals: list[tuple[str, int, ContextEstimates]] = []
    for context in contexts:
        ctx.check_stop()
        length = share_context(ctx, ctx.tokens_for(context))
        seed = stable_seed(ctx.seed, phase.name, length)
        arm_sites = {
            arm: ctx.workers[arm].call(
                functools.partial(prepare, site=site, widths=widths, seed=seed)
            )
            for arm in ARMS
        }
        for part in IndexerPart:
            ctx.check_stop()
            result, parity = _measure_part(
                ctx, phase, part, arm_sites, plans[(part, context)], progress
            )
            _report_part(ctx, phase, result)
            finals.append((part_phase(phase, part), result.context, result.run.final))
            for record in part_records(result, {}, {}):
                rows.append(record_row(record, site, parity.get(record.width)))
        del arm_sites
    verdict = indexer_verdict(rows, phase.name)
    summary = PhaseSummary(ctx.now(), phase.name, phase.kind, tuple(rows), verdict)
    ctx.emit(summary)
    return PhaseResult(summary, finals=tuple(finals))


def record_row(r: IndexerRecord, site: SparseSite, parity: float | None) -> IndexerRow:
    st = r.stats
    indexer = r.bench == IndexerPart.INDEXER
    return IndexerRow(
        part=r.bench,
        layer=site.name,
        context=r.context,
        width=r.width,
        arm=r.arm,
        median_ms=r.median_ms,
        ci_low_ms=r.ci_low_ms,
        ci_high_ms=r.ci_high_ms,
        ratio=r.ratio,
        ratio_low=r.ratio_low,
        ratio_high=r.ratio_high,
        vs_s1=r.vs_s1,
        vs_s1_low=r.vs_s1_low,
        vs_s1_high=r.vs_s1_high,
        pool_rebuilds=r.pool_rebuilds,
        pool_reuses=r.pool_reuses,
        outcome=r.outcome,
        valid=r.valid,
        samples_ms=tuple(r.samples_ms),
        p10_ms=st.p10,
        p90_ms=st.p90,
        n=st.n,
        rounds=r.n_rounds,
        selection_agreement=parity if indexer else None,
        parity_max_abs=None if indexer else parity,
    )


def _finite(*xs: float | None) -> bool:
    return all(x is not None and math.isfinite(x) for x in xs)


def indexer_verdict(rows: list[IndexerRow], phase: str = "") -> str:
    """Per context of the indexer part whose S = 1 check is valid: the paired stock/patched at
    the widest S with its CI, and the patched arm's worst S > 1 cost over its own S = 1 (paired
    within rounds) with its CI. Contexts whose check is invalid or inconclusive are named as
    excluded, with no figures. In an A/A pass the slots are named A and B (`arm_label`)."""
    pair = ratio_label(phase)
    second = arm_label("patched", phase)
    cells = {(r.part, r.context, r.width, r.arm): r for r in rows}
    parts, valid_any = [], False
    indexer = IndexerPart.INDEXER.value
    for context in sorted({r.context for r in rows if r.part == indexer}):
        one = cells.get((indexer, context, 1, "stock"))
        if one is None:
            continue
        if not one.valid:
            parts.append(f"{context}: excluded (S=1 check {one.outcome or 'invalid'})")
            continue
        valid_any = True
        wide = sorted(
            w for p, c, w, a in cells if p == indexer and c == context and w > 1 and a == "stock"
        )
        if not wide:
            parts.append(f"{context}: S=1 check valid")
            continue
        s = cells[(indexer, context, max(wide), "stock")]
        text = f"{context}: S={max(wide)} {pair}"
        if _finite(s.ratio, s.ratio_low, s.ratio_high):
            text += " " + ci_text(s.ratio, s.ratio_low, s.ratio_high, 2, "×")
        patched = [cells[("indexer", context, w, "patched")] for w in wide]
        patched = [r for r in patched if _finite(r.vs_s1, r.vs_s1_low, r.vs_s1_high)]
        if patched:
            worst = max(patched, key=lambda r: r.vs_s1 or 0.0)
            text += (
                f", {second} S>1 at most "
                + ci_text(worst.vs_s1, worst.vs_s1_low, worst.vs_s1_high, 2, "×")
                + f" S=1 (S={worst.width})"
            )
        parts.append(text)
    if parts and not valid_any:
        parts.insert(0, "no valid context")
    return "; ".join(parts)


# Stock re-pools every window, patched only the tail: the same windows from the same tokens, so
# the selections must agree exactly; the layer's MLA branch may differ (absorbed vs materialised:
# the same sums in another order), a few ULP of the dtype relative to the output's scale.
PARITY_ULPS = 64
EPS = {mx.float32: 2.0**-23, mx.bfloat16: 2.0**-7, mx.float16: 2.0**-10}


@dataclass(frozen=True)
class SparseSite:
    """One sparse layer of a model: its position in `model.layers` (and the cache list), its
    module path, its geometry, and how many sparse layers share that geometry."""

    layer: int
    name: str
    config: SparseMLAConfig
    sharing: int = 1

    def describe(self) -> str:
        c = self.config
        return (
            f"{self.name} (MLA r/n/v {c.kv_lora_rank}/{c.qk_nope_head_dim}/{c.v_head_dim}, "
            f"{c.num_attention_heads} heads; indexer {c.index_n_heads}x{c.index_head_dim}, "
            f"pool {c.index_kpool}, top-k {c.index_topk})"
        )


def sparse_sites(model: Any) -> list[SparseSite]:
    """The model's pooled-indexer sparse layers, one per geometry (first layer of each)."""
    found: dict[str, SparseSite] = {}
    for i, layer in enumerate(getattr(model, "layers", None) or []):
        attn = getattr(layer, "self_attn", None)
        config = getattr(attn, "config", None)
        if not (isinstance(config, SparseMLAConfig) and hasattr(attn, "indexer")):
            continue
        key = repr(config)
        if key in found:
            found[key] = replace(found[key], sharing=found[key].sharing + 1)
        else:
            found[key] = SparseSite(i, f"layers.{i}.self_attn", config)
    return list(found.values())


def load_warnings(model: Any, model_name: str, phases: tuple[Phase, ...]) -> list[str]:
    """What the scenario's indexer phases cannot do on this model, said once at load."""
    wanted = [p for p in phases if p.kind.rules.sparse_sites]
    if not wanted:
        return []
    sites = sparse_sites(model)
    if not sites:
        names = ", ".join(p.name for p in wanted)
        return [
            f"{names}: {model_name} has no sparse layer with a pooled indexer, so the indexer "
            "phase is skipped (use a model with sparse layers, e.g. the embedded model)"
        ]
    topk = sites[0].config.index_topk
    out = []
    for p in wanted:
        low = [c for c in p.contexts if c <= topk]
        if low:
            out.append(
                f"{p.name}: contexts {', '.join(map(str, low))} are within index_topk {topk}: the "
                "indexer is bypassed there and they are skipped"
            )
    return out


@dataclass
class ArmSite:
    """One arm's sparse layer at one context, with its inputs; touched only on that arm's thread."""

    attn: Any
    cache: Any  # the arm's SparseMLACache of that layer
    context: int
    inputs: dict[int, list[tuple[mx.array, mx.array]]]  # width -> [(x, qr)]
    masks: dict[int, Any]
    calls: dict[tuple[str, int], int] = field(default_factory=dict)


def prepare(arm: Arm, site: SparseSite, widths: tuple[int, ...], seed: int) -> ArmSite:
    attn = arm.model.layers[site.layer].self_attn
    cache = arm.caches[site.layer]
    index = cache.index
    if index.pool_length != cache.offset:  # e.g. a random-latents fill has no pool yet
        index.refresh_pool(attn.indexer.kpool, 0, False, attn.indexer.compress_ape)
    dtype = attn.kv_a_layernorm.weight.dtype
    inputs: dict[int, list[tuple[mx.array, mx.array]]] = {}
    for w in widths:
        inputs[w] = []
        for i in range(INPUTS_PER_WIDTH):
            key = mx.random.key(stable_seed(seed, "indexer-input", w, i))
            x = mx.random.normal((1, w, site.config.hidden_size), key=key).astype(dtype)
            qr = attn.q_a_layernorm(attn.q_a_proj(x)) if attn.q_lora_rank else x  # (1, S, q)
            inputs[w].append((x, qr))
    masks = {w: cache.make_mask(w, return_array=True) for w in widths}  # every sample at context
    mx.eval(inputs, [m for m in masks.values() if isinstance(m, mx.array)], index.pooled)
    return ArmSite(attn, cache, cache.offset, inputs, masks)


def _forward(s: ArmSite, part: str, width: int, i: int) -> tuple[list[mx.array], Any]:
    """(arrays to sync, the output) of one step of `part`."""
    x, qr = s.inputs[width][i]
    index = s.cache.index
    if part == IndexerPart.INDEXER:
        sel = s.attn.indexer(x, qr, index)
        return [*sel, index.keys, index.gates, index.pooled], sel
    y = s.attn(x, mask=s.masks[width], cache=s.cache)
    return [y, s.cache.latent, index.keys, index.pooled], y


def step(s: ArmSite, arm: Arm, part: str, width: int) -> tuple[float, int, int, int, int]:
    """One timed step from the context, then rewound: (ms, pool rebuilds, pool reuses, absorbed
    calls, materialised calls)."""
    index = s.cache.index
    n = s.calls.get((part, width), 0)
    s.calls[(part, width)] = n + 1
    before = arm.counters.total()
    ms, rebuilt, reused = pool_step(
        f"{part} @ {s.context} S={width}, {arm.name} arm",
        index if part == IndexerPart.INDEXER else s.cache,
        index,
        s.context,
        lambda: _forward(s, part, width, n % INPUTS_PER_WIDTH)[0],
        s.attn.indexer.mode == "patched",
    )
    after = arm.counters.total()
    return ms, rebuilt, reused, after[0] - before[0], after[1] - before[1]


def output(_arm: Arm, s: ArmSite, part: str, width: int) -> np.ndarray:
    """One untimed step's output as plain numbers (selections: sorted token ids, -1 unused), on
    an arm's worker (the site already holds that arm's layer)."""
    _, out = _forward(s, part, width, 0)
    if part == IndexerPart.INDEXER:
        idx, valid = out
        result = np.sort(np.array(mx.where(valid, idx, -1)), axis=-1)
    else:
        result = np.array(out.astype(mx.float32))
    rewind(s.cache.index if part == IndexerPart.INDEXER else s.cache, s.cache.index, s.context)
    return result


def parity_tolerance(dtype: mx.Dtype) -> float:
    """The layer outputs' allowed max |stock - patched| / max |stock|."""
    return PARITY_ULPS * EPS.get(dtype, EPS[mx.float32])
