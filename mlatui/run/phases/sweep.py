"""The sweep phase: step ms per arm at each context and width, its rows and its verdict."""

from __future__ import annotations

import functools

from mlatui.config.scenario import Phase
from mlatui.measure.estimates import ContextEstimates
from mlatui.measure.plans import plan_for, sweep_segments
from mlatui.measure.records import Stats
from mlatui.measure.sampler import SamplerPlan, SamplerRun
from mlatui.run.phases.base import (
    ProgressTracker,
    RunContext,
    StepSite,
    close_phase,
    emit_phase_start,
    sample_steps,
    share_context,
    validity,
)
from mlatui.run.phases.results import L1Quads, Need, PhaseInputs, PhaseResult
from mlatui.stream.events import ARMS, Validity, arm_label, ratio_label
from mlatui.stream.phase_rows import SweepRow
from mlatui.stream.phrases import ci_text

NEEDS = frozenset({Need.L1_QUADS})  # the pooled check reads every quad of the pass


def run_sweep(
    ctx: RunContext, phase: Phase, index: int, total_phases: int, inputs: PhaseInputs
) -> PhaseResult:
    """Step ms per arm at each context and width, in interleaved rounds; paired estimates with
    CIs; the L = 1 check per context."""
    widths = tuple(sorted(set(phase.widths)))
    plans = {c: plan_for(phase, widths, ctx.seed, c, ctx.settle) for c in phase.contexts}
    planned = sum(p.timed_calls() for p in plans.values())
    emit_phase_start(ctx, phase, index, total_phases, planned, sweep_segments(phase, ctx.settle))
    progress = ProgressTracker(ctx, phase.name, planned)
    rows: list[SweepRow] = []
    checks: list[Validity] = []
    l1 = L1Quads()
    estimates: list[tuple[int, ContextEstimates]] = []
    added_s = 0.0
    for context in phase.contexts:
        ctx.check_stop()
        deadline = inputs.slices.deadline(phase.name, context)
        length, run = _sweep_context(ctx, phase, context, plans[context], (progress, deadline))
        added_s += run.added_s
        l1 = l1.plus(length, run.timings, plans[context].control_width)
        estimates.append((length, run.final))
        check = validity(ctx, phase.name, length, run.final)
        rows += sweep_rows(length, run, check)
        checks.append(check)
    verdict_of = functools.partial(sweep_verdict, phase=phase.name)
    summary, ended = close_phase(ctx, phase, rows, checks, inputs.l1 + l1, verdict_of)
    finals = tuple((phase.name, length, e) for length, e in estimates)
    return PhaseResult(summary, l1, tuple(estimates), ended, finals, added_s)


def _sweep_context(
    ctx: RunContext,
    phase: Phase,
    context: int,
    plan: SamplerPlan,
    pace: tuple[ProgressTracker, float | None],
) -> tuple[int, SamplerRun]:
    """One context's rounds; `pace`: the phase's progress and the context's budget deadline."""
    progress, deadline = pace
    text = ctx.tokens_for(context + max(plan.widths))
    length = share_context(ctx, text[:context])
    site = StepSite(phase.name, length, text[context:])
    return length, sample_steps(ctx, site, plan, progress, deadline=deadline)


def sweep_rows(length: int, run: SamplerRun, v: Validity) -> list[SweepRow]:
    """Per (width, arm): the paired estimates with CIs, raw samples kept beside them."""
    est = run.final
    samples: dict[tuple[str, int], list[float]] = {}
    for t in run.timings:
        samples.setdefault((t.arm, t.width), []).append(t.ms)
    rows = []
    for (arm, width), iv in sorted(est.step_ms.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        ratio = est.ratio.get(width)
        marginal = est.marginal_ms.get(arm)
        flat = est.vs_l1.get((arm, width))
        s = Stats.of(samples[(arm, width)])
        rows.append(
            SweepRow(
                context=length,
                width=width,
                arm=arm,
                median_ms=iv.median,
                ci_low_ms=iv.low,
                ci_high_ms=iv.high,
                p10_ms=s.p10,
                p90_ms=s.p90,
                rounds=run.rounds,
                n=s.n,
                ratio=ratio.median if ratio else None,
                ratio_low=ratio.low if ratio else None,
                ratio_high=ratio.high if ratio else None,
                marginal_ms=marginal.median if marginal else None,
                marginal_low_ms=marginal.low if marginal else None,
                marginal_high_ms=marginal.high if marginal else None,
                vs_l1=flat.median if flat else (1.0 if width == 1 else None),
                vs_l1_low=flat.low if flat else (1.0 if width == 1 else None),
                vs_l1_high=flat.high if flat else (1.0 if width == 1 else None),
                valid=v.valid,
                outcome=v.verdict,
                basis=v.basis,
                drifting_rounds=est.drifting_rounds,
                samples_ms=tuple(samples[(arm, width)]),
            )
        )
    return rows


def sweep_verdict(rows: list[SweepRow], phase: str = "") -> str:
    """The largest valid context's widest width: paired stock/patched with its CI (in an A/A
    pass, the paired A/B: both slots ran one variant)."""
    valid = [r for r in rows if r.valid]
    if not valid:
        return "no valid context (the L = 1 check was invalid or inconclusive everywhere)"
    top = max(r.context for r in valid)
    cell = {(r.width, r.arm): r for r in valid if r.context == top}
    widths = sorted({w for w, _ in cell if w > 1})
    if not widths:
        return f"largest valid context {top}"
    w = max(widths)
    s, p = cell[(w, "stock")], cell[(w, "patched")]
    a, b = (arm_label(arm, phase) for arm in ARMS)
    pair = ratio_label(phase)
    return (
        f"at context {top}, L = {w}: {a} {s.median_ms:.2f} ms vs {b} {p.median_ms:.2f} ms, "
        f"paired {pair} " + ci_text(s.ratio, s.ratio_low, s.ratio_high, 2, "×")
    )
