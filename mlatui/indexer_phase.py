"""The indexer phase: the pooled-window indexer and the whole sparse layer (GLM-5.3-Flash
geometry, random weights), stock vs patched pooling, S = 1 as the control."""

from __future__ import annotations

from mlatui.events import PhaseStart, PhaseSummary, Step, Validity
from mlatui.indexer_bench import run_indexer_bench
from mlatui.measure import L1_TOLERANCE_PCT, l1_check
from mlatui.phases import ProgressTracker, RunContext, Stopped
from mlatui.scenario import Phase


def run_indexer_phase(ctx: RunContext, phase: Phase, index: int, total_phases: int) -> PhaseSummary:
    widths = sorted(set(phase.widths) | {1})
    planned = 2 * len(phase.contexts) * len(widths) * phase.reps * 2  # indexer + layer, two arms
    ctx.emit(
        PhaseStart(ctx.now(), phase.name, phase.kind, index, total_phases, planned, phase.contexts)
    )
    progress = ProgressTracker(ctx, phase.name, planned)

    def on_sample(sample: dict) -> None:
        if ctx.stop.is_set():
            raise Stopped()
        if sample["warmup"]:
            return
        # sweep-style step event; `phase` carries the part so the two series stay apart
        part = f"{phase.name}:{sample['bench']}"
        ctx.emit(
            Step(
                ctx.now(),
                part,
                sample["arm"],
                sample["context"],
                sample["width"],
                sample["sample"],
                sample["ms"],
            )
        )
        progress.advance()

    records = run_indexer_bench(phase.contexts, widths, phase.reps, phase.warmup, on_sample)
    rows = []
    by_key = {(r.bench, r.context, r.width, r.arm): r for r in records}
    for bench, context in sorted({(r.bench, r.context) for r in records}):
        s1, p1 = by_key[(bench, context, 1, "stock")], by_key[(bench, context, 1, "patched")]
        s, p, diff, ok = l1_check(s1.samples_ms, p1.samples_ms)
        if bench == "indexer":
            ctx.emit(Validity(ctx.now(), phase.name, context, s, p, diff, L1_TOLERANCE_PCT, ok))
            if not ok:
                ctx.invalid_contexts.add(context)
    for r in records:
        st = r.stats
        rows.append(
            {
                "part": r.bench,
                "context": r.context,
                "width": r.width,
                "arm": r.arm,
                "median_ms": st.median,
                "p10_ms": st.p10,
                "p90_ms": st.p90,
                "n": st.n,
                "valid": r.valid,
                "samples_ms": r.samples_ms,
            }
        )
    summary = PhaseSummary(ctx.now(), phase.name, phase.kind, tuple(rows), indexer_verdict(rows))
    ctx.emit(summary)
    return summary


def indexer_verdict(rows: list[dict]) -> str:
    med = {
        (r["part"], r["context"], r["width"], r["arm"]): r["median_ms"] for r in rows if r["valid"]
    }
    parts = []
    for context in sorted({c for _, c, _, _ in med}):
        one = med.get(("indexer", context, 1, "patched"))
        wide = [
            w for p, c, w, a in med if p == "indexer" and c == context and w > 1 and a == "patched"
        ]
        if one and wide:
            worst = max(med[("indexer", context, w, "patched")] for w in wide) / one
            stock2 = med.get(("indexer", context, 2, "stock"))
            parts.append(
                f"{context}: patched S>1 at most {worst:.2f}x S=1"
                + (f", stock S=2 {stock2 / one:.2f}x" if stock2 else "")
            )
    return "; ".join(parts)
