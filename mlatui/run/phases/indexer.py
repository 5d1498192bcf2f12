"""The indexer phase: the pooled-window indexer and the whole sparse layer of the arms' own
model, stock vs patched pooling, through the one sampler on the arms' worker threads.

It times the model's first sparse layer (`indexer_sites`; every sparse layer of mlatui's model
type shares one geometry, the others are named in the log). Per context both arms take
bit-identical copies of one prefill (`share_context`, so `fill = "random-latents"` applies here
too); each arm steps its own twin of that layer, gated as the arm is (an A/A pass measures two
identical arms). Before the rounds each width runs once untimed in both arms and their outputs
are compared (`selection_agreement`, `parity_max_abs` in the rows). Step events carry the round
as `rep` under the part's own phase name (`<phase>:indexer`, `<phase>:layer`); an Estimate
follows every round; the indexer part's S = 1 check is the context's Validity under the phase's
name, and never joins the run's `invalid_contexts` (the model phases' contexts left out of
their verdicts).
"""

from __future__ import annotations

import functools
import math
from dataclasses import replace

import numpy as np

from mlatui.config.scenario import Phase
from mlatui.measure.estimates import ContextEstimates, Outcome, Timing, stable_seed
from mlatui.measure.indexer_records import IndexerPart, IndexerRecord, PartRun, part_records
from mlatui.measure.plans import plan_for
from mlatui.measure.sampler import Hooks, SamplerPlan, sample_context
from mlatui.run.arms import Arm
from mlatui.run.phases.base import (
    EstimateEmitter,
    ProgressTracker,
    RunContext,
    emit_phase_start,
    share_context,
    validity,
)
from mlatui.run.phases.indexer_sites import (
    ArmSite,
    SparseSite,
    output,
    parity_tolerance,
    prepare,
    sparse_sites,
    step,
)
from mlatui.run.phases.results import Need, PhaseInputs, PhaseResult
from mlatui.stream.events import ARMS, LogMessage, PhaseSummary, Step, arm_label, ratio_label
from mlatui.stream.phrases import ci_text, interval_text


def part_phase(phase: Phase, part: str) -> str:
    return f"{phase.name}:{IndexerPart(part).tag}"


def _output(_: Arm, s: ArmSite, part: str, width: int) -> np.ndarray:
    """`output` as an arm's worker runs it (the site already holds that arm's layer)."""
    return output(s, part, width)


def _parity(ctx: RunContext, sites: dict[str, ArmSite], part: str, widths) -> dict[int, float]:
    """Per width: the selections' share of identical rows (indexer) or max |stock - patched|
    over max |stock| (layer)."""
    out = {}
    for w in widths:
        a, b = (
            ctx.workers[arm].call(functools.partial(_output, s=sites[arm], part=part, width=w))
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
            ctx.emit(LogMessage(ctx.now(), "warning", f"{name} @ {context} S={w}: {what}"))


def _report_part(ctx: RunContext, phase: Phase, result: PartRun) -> None:
    if result.part == IndexerPart.INDEXER:  # its own check: never one of the run's invalid contexts
        validity(ctx, phase.name, result.context, result.estimates)
    elif result.outcome is not Outcome.VALID:
        ratio = result.estimates.control_ratio
        ci = f" (paired {interval_text(ratio, 3, '×')})" if ratio else ""
        ctx.emit(
            LogMessage(
                ctx.now(),
                "warning",
                f"{part_phase(phase, result.part)} @ {result.context}: S=1 check "
                f"{result.outcome.value}{ci}; kept out of the verdict",
            )
        )


def _skip(ctx: RunContext, phase: Phase, index: int, total: int, why: str) -> PhaseSummary:
    emit_phase_start(ctx, phase, index, total, 0, ())
    ctx.emit(LogMessage(ctx.now(), "warning", f"{phase.name}: skipped, {why}"))
    summary = PhaseSummary(ctx.now(), phase.name, phase.kind, (), f"skipped: {why}")
    ctx.emit(summary)
    return summary


NEEDS: frozenset[Need] = frozenset()  # its S = 1 checks read only its own quads


def run_indexer_phase(
    ctx: RunContext, phase: Phase, index: int, total_phases: int, inputs: PhaseInputs
) -> PhaseResult:
    """The sparse indexer's parts, stock vs patched pooling, at each context above top-k."""
    summary, finals = _indexer_summary(ctx, phase, index, total_phases)
    return PhaseResult(summary, finals=finals)


Finals = tuple[tuple[str, int, ContextEstimates], ...]


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


def _indexer_summary(
    ctx: RunContext, phase: Phase, index: int, total_phases: int
) -> tuple[PhaseSummary, Finals]:
    """Its summary and each part's final estimates per context."""
    stock = ctx.workers["stock"].arm
    sites = sparse_sites(stock.model)
    model_name = stock.model_name
    if not sites:
        why = f"{model_name} has no pooled-indexer sparse layer"
        return _skip(ctx, phase, index, total_phases, why), ()
    site = sites[0]
    contexts = [c for c in phase.contexts if c > site.config.index_topk]
    if not contexts:
        why = (
            f"every context is within index_topk {site.config.index_topk} (the indexer is bypassed)"
        )
        return _skip(ctx, phase, index, total_phases, why), ()
    widths = tuple(sorted(set(phase.widths) | {1}))
    plans = _part_plans(ctx, phase, widths, contexts)
    planned = sum(p.timed_calls() for p in plans.values())
    emit_phase_start(ctx, phase, index, total_phases, planned, ())
    others = "; ".join(s.describe() for s in sites[1:])
    ctx.emit(
        LogMessage(
            ctx.now(),
            "info",
            f"{phase.name}: timing {site.describe()}, {site.sharing} sparse layer(s) of this "
            f"geometry" + (f"; not timed: {others}" if others else ""),
        )
    )
    progress = ProgressTracker(ctx, phase.name, planned)
    rows: list[dict] = []
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
    return summary, tuple(finals)


ROW_ATTRS = (
    *("context", "width", "arm", "median_ms", "ci_low_ms", "ci_high_ms", "ratio", "ratio_low"),
    *("ratio_high", "vs_s1", "vs_s1_low", "vs_s1_high", "pool_rebuilds", "pool_reuses"),
    *("outcome", "valid", "samples_ms"),
)


def record_row(r: IndexerRecord, site: SparseSite, parity: float | None) -> dict:
    st = r.stats
    row = {"part": r.bench, "layer": site.name, **{k: getattr(r, k) for k in ROW_ATTRS}}
    row.update(p10_ms=st.p10, p90_ms=st.p90, n=st.n, rounds=r.n_rounds)
    row["selection_agreement" if r.bench == IndexerPart.INDEXER else "parity_max_abs"] = parity
    return row


def _finite(*xs: float | None) -> bool:
    return all(x is not None and math.isfinite(x) for x in xs)


def indexer_verdict(rows: list[dict], phase: str = "") -> str:
    """Per context of the indexer part whose S = 1 check is valid: the paired stock/patched at
    the widest S with its CI, and the patched arm's worst S > 1 cost over its own S = 1 (paired
    within rounds) with its CI. Contexts whose check is invalid or inconclusive are named as
    excluded, with no figures. In an A/A pass the slots are named A and B (`arm_label`)."""
    pair = ratio_label(phase)
    second = arm_label("patched", phase)
    cells = {(r["part"], r["context"], r["width"], r["arm"]): r for r in rows}
    parts, valid_any = [], False
    indexer = IndexerPart.INDEXER.value
    for context in sorted({r["context"] for r in rows if r["part"] == indexer}):
        one = cells.get((indexer, context, 1, "stock"))
        if one is None:
            continue
        if not one["valid"]:
            parts.append(f"{context}: excluded (S=1 check {one['outcome'] or 'invalid'})")
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
        if _finite(s["ratio"], s["ratio_low"], s["ratio_high"]):
            text += " " + ci_text(s["ratio"], s["ratio_low"], s["ratio_high"], 2, "×")
        patched = [cells[("indexer", context, w, "patched")] for w in wide]
        patched = [r for r in patched if _finite(r["vs_s1"], r["vs_s1_low"], r["vs_s1_high"])]
        if patched:
            worst = max(patched, key=lambda r: r["vs_s1"])
            text += (
                f", {second} S>1 at most "
                + ci_text(worst["vs_s1"], worst["vs_s1_low"], worst["vs_s1_high"], 2, "×")
                + f" S=1 (S={worst['width']})"
            )
        parts.append(text)
    if parts and not valid_any:
        parts.insert(0, "no valid context")
    return "; ".join(parts)
