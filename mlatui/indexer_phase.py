"""The indexer phase: the pooled-window indexer and the whole sparse layer (GLM-5.3-Flash
geometry, random weights), stock vs patched pooling, through the one sampler.

Each (part, context) is sampled in rounds (`mlatui.indexer_bench`; the plan comes from the
scenario phase via `plan_for`). Step events carry the round as `rep`; an Estimate follows every
round under the part's own phase name (`<phase>:indexer`, `<phase>:layer`); the indexer part's
S = 1 check becomes the context's Validity (valid / invalid / inconclusive) under the phase's own
name, and a non-valid context is kept out of the verdict. The layer part's S = 1 outcome is in its
rows (and a warning when it is not valid).

The phase builds its own random-weight indexer and layer, but each slot runs what the engine's arm
in that slot runs: its variant's MLA gate and pooling (`Gates`), so an A/A pass measures two
identical arms here too and its estimates are the harness's bias, never the fix.
"""

from __future__ import annotations

import math
from dataclasses import replace

from mlatui.estimates import ContextEstimates, Outcome, Timing, stable_seed
from mlatui.events import LogMessage, PhaseStart, PhaseSummary, Step
from mlatui.gate_policy import Gates
from mlatui.indexer import SparseMLAConfig
from mlatui.indexer_bench import (
    DEFAULT_MODES,
    BenchHooks,
    IndexerRecord,
    Modes,
    PartRun,
    run_indexer_bench,
)
from mlatui.phases import (
    EstimateEmitter,
    ProgressTracker,
    RunContext,
    plan_for,
    validity,
)
from mlatui.sampler import SamplerPlan
from mlatui.scenario import Phase

PART_TAGS = {"indexer": "indexer", "sparse-layer": "layer"}


def part_phase(phase: Phase, part: str) -> str:
    return f"{phase.name}:{PART_TAGS[part]}"


class _PhaseHooks(BenchHooks):
    def __init__(
        self,
        ctx: RunContext,
        phase: Phase,
        plans: dict[tuple[str, int], SamplerPlan],
        progress: ProgressTracker,
    ):
        self.ctx, self.phase, self.plans, self.progress = ctx, phase, plans, progress
        self.emitters: dict[tuple[str, int], EstimateEmitter] = {}

    def check_stop(self) -> None:
        self.ctx.check_stop()

    def decide_more(self, wants_more: bool) -> bool:
        return self.ctx.decide_more(wants_more)

    def clock(self) -> float:
        return self.ctx.now()

    def _emitter(self, part: str, context: int) -> EstimateEmitter:
        key = (part, context)
        if key not in self.emitters:
            self.emitters[key] = EstimateEmitter(self.ctx, part_phase(self.phase, part), context)
        return self.emitters[key]

    def timing(self, part: str, context: int, timing: Timing) -> None:
        self.ctx.emit(
            Step(
                self.ctx.now(),
                part_phase(self.phase, part),
                timing.arm,
                context,
                timing.width,
                timing.round,
                timing.ms,
            )
        )
        self.progress.advance()

    def round(self, part: str, context: int, estimates: ContextEstimates) -> None:
        self._emitter(part, context)(estimates)
        plan = self.plans[(part, context)]
        r = estimates.rounds
        if r >= plan.first_rounds and r % 2 == 0 and r < plan.max_rounds:
            if estimates.control_outcome is Outcome.INCONCLUSIVE:  # two more rounds come
                self.progress.total += plan.timed_calls(2)

    def done(self, result: PartRun) -> None:
        self._emitter(result.part, result.context)(result.estimates, final=True)
        if result.part == "indexer":
            validity(self.ctx, self.phase.name, result.context, result.estimates)
        elif result.outcome is not Outcome.VALID:
            ratio = result.estimates.control_ratio
            ci = f" (paired {ratio.low:.3f}-{ratio.high:.3f})" if ratio else ""
            self.ctx.emit(
                LogMessage(
                    self.ctx.now(),
                    "warning",
                    f"{part_phase(self.phase, result.part)} @ {result.context}: S=1 check "
                    f"{result.outcome.value}{ci}; kept out of the verdict",
                )
            )


def arm_modes(ctx: RunContext) -> Modes:
    """(MLA gate, indexer mode) per slot, as `arms.gate_model` gates that slot's arm."""
    modes = dict(DEFAULT_MODES)
    for slot, worker in ctx.workers.items():
        arm = worker.arm
        if slot in modes and arm.variant is not None:
            modes[slot] = (arm.gates or Gates()).for_variant(arm.variant)
    return modes


def run_indexer_phase(
    ctx: RunContext,
    phase: Phase,
    index: int,
    total_phases: int,
    config: SparseMLAConfig | None = None,
) -> PhaseSummary:
    widths = tuple(sorted(set(phase.widths) | {1}))
    plans = {
        (part, context): replace(
            plan_for(phase, widths, ctx.seed, context, ctx.settle),
            seed=stable_seed(ctx.seed, part_phase(phase, part), context),
        )
        for part in PART_TAGS
        for context in phase.contexts
    }
    planned = sum(p.timed_calls() for p in plans.values())
    ctx.emit(
        PhaseStart(ctx.now(), phase.name, phase.kind, index, total_phases, planned, phase.contexts)
    )
    progress = ProgressTracker(ctx, phase.name, planned)
    records = run_indexer_bench(
        phase.contexts,
        widths,
        phase.reps,
        phase.warmup,
        _PhaseHooks(ctx, phase, plans, progress),
        layer_contexts=phase.contexts,
        config=config,
        seed=ctx.seed,
        plan=lambda part, context: plans[(part, context)],
        modes=arm_modes(ctx),
    )
    rows = [record_row(r) for r in records]
    summary = PhaseSummary(ctx.now(), phase.name, phase.kind, tuple(rows), indexer_verdict(rows))
    ctx.emit(summary)
    return summary


def record_row(r: IndexerRecord) -> dict:
    st = r.stats
    return {
        "part": r.bench,
        "context": r.context,
        "width": r.width,
        "arm": r.arm,
        "median_ms": r.median_ms,
        "ci_low_ms": r.ci_low_ms,
        "ci_high_ms": r.ci_high_ms,
        "p10_ms": st.p10,
        "p90_ms": st.p90,
        "n": st.n,
        "rounds": r.n_rounds,
        "ratio": r.ratio,
        "ratio_low": r.ratio_low,
        "ratio_high": r.ratio_high,
        "vs_s1": r.vs_s1,
        "vs_s1_low": r.vs_s1_low,
        "vs_s1_high": r.vs_s1_high,
        "pool_rebuilds": r.pool_rebuilds,
        "pool_reuses": r.pool_reuses,
        "outcome": r.outcome,
        "valid": r.valid,
        "samples_ms": r.samples_ms,
    }


def _finite(*xs: float | None) -> bool:
    return all(x is not None and math.isfinite(x) for x in xs)


def indexer_verdict(rows: list[dict]) -> str:
    """Per context of the indexer part whose S = 1 check is valid: the paired stock/patched at
    the widest S with its CI, and the patched arm's worst S > 1 cost over its own S = 1 (paired
    within rounds) with its CI. Contexts whose check is invalid or inconclusive are named as
    excluded, with no figures."""
    cells = {(r["part"], r["context"], r["width"], r["arm"]): r for r in rows}
    parts, valid_any = [], False
    for context in sorted({r["context"] for r in rows if r["part"] == "indexer"}):
        one = cells.get(("indexer", context, 1, "stock"))
        if one is None:
            continue
        if not one["valid"]:
            parts.append(f"{context}: excluded (S=1 check {one['outcome'] or 'invalid'})")
            continue
        valid_any = True
        wide = sorted(
            w for p, c, w, a in cells if p == "indexer" and c == context and w > 1 and a == "stock"
        )
        if not wide:
            parts.append(f"{context}: S=1 check valid")
            continue
        s = cells[("indexer", context, max(wide), "stock")]
        text = f"{context}: S={max(wide)} stock/patched"
        if _finite(s["ratio"], s["ratio_low"], s["ratio_high"]):
            text += f" {s['ratio']:.2f}x (95% CI {s['ratio_low']:.2f}-{s['ratio_high']:.2f})"
        patched = [cells[("indexer", context, w, "patched")] for w in wide]
        patched = [r for r in patched if _finite(r["vs_s1"], r["vs_s1_low"], r["vs_s1_high"])]
        if patched:
            worst = max(patched, key=lambda r: r["vs_s1"])
            text += (
                f", patched S>1 at most {worst['vs_s1']:.2f}x S=1 "
                f"(S={worst['width']}, 95% CI {worst['vs_s1_low']:.2f}-{worst['vs_s1_high']:.2f})"
            )
        parts.append(text)
    if parts and not valid_any:
        parts.insert(0, "no valid context")
    return "; ".join(parts)
