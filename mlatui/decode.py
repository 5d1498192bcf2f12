"""Decode and tune phases: plain decode vs speculative decoding, per arm, measured in one run."""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field

import mlx.core as mx
from mlx_lm.models.cache import trim_prompt_cache

from mlatui.arms import Arm, cache_len
from mlatui.estimates import ContextEstimates, Timing, estimate_context, stable_seed
from mlatui.events import DecodeResult, LogMessage, PhaseStart, PhaseSummary, SpecStep
from mlatui.measure import L1_TOLERANCE_PCT
from mlatui.phases import ARM_ORDER, ProgressTracker, RunContext, share_context, validity
from mlatui.scenario import Phase
from mlatui.spec import SyntheticDraft, plain_step, require_trimmable, speculative_step

TIE_PCT = 2.0  # a deeper depth within 2% of the fastest wins (it amortises better at long outputs)


@dataclass
class ArmRun:
    """One arm's decode of `tokens` new tokens at one setting (depth 0 = plain)."""

    depth: int
    emitted: list[int] = field(default_factory=list)
    step_ms: list[float] = field(default_factory=list)
    verify_ms: list[float] = field(default_factory=list)
    draft_ms: list[float] = field(default_factory=list)
    accepted_at: list[int] = field(default_factory=list)  # per position: times accepted
    offered_at: list[int] = field(default_factory=list)  # per position: times drafted
    last: int = 0
    hidden: object = None
    base_len: int = 0


def _start(
    arm: Arm, ctx: RunContext, depth: int, last: int, base_len: int, oracle: list[int] | None
) -> ArmRun:
    run = ArmRun(depth, last=last, base_len=base_len)
    run.accepted_at, run.offered_at = [0] * depth, [0] * depth
    if depth > 0:
        require_trimmable(arm.cache, arm.state.get("model_name", "model"))
        if isinstance(arm.draft, SyntheticDraft):
            arm.draft.set_oracle(oracle or [])
        context = arm.state["context_tokens"]
        hidden = arm.state.get("context_hidden") if arm.draft.needs_hidden else None
        arm.draft.prefill(mx.array([context]), hidden)  # (1, T - 1)
        run.hidden = arm.state.get("last_hidden")
    return run


def _plain(arm: Arm, run: ArmRun) -> float:
    tok, ms = plain_step(arm.model, arm.cache, run.last)
    run.emitted.append(run.last)
    run.last = tok
    run.step_ms.append(ms)
    return ms


def _spec(arm: Arm, run: ArmRun):
    start = time.perf_counter_ns()
    result, run.hidden = speculative_step(
        arm.model, arm.cache, arm.draft, run.last, run.depth, run.hidden
    )
    run.step_ms.append((time.perf_counter_ns() - start) / 1e6)
    run.emitted += [run.last, *result.emitted[:-1]]
    run.last = result.emitted[-1]
    run.verify_ms.append(result.verify_ms)
    run.draft_ms.append(result.draft_ms)
    for i in range(run.depth):
        run.offered_at[i] += 1
        if i < result.accepted:
            run.accepted_at[i] += 1
    return result


def _rewind(arm: Arm, run: ArmRun) -> None:
    trim_prompt_cache(arm.cache, cache_len(arm.cache) - run.base_len)


def decode_setting(
    ctx: RunContext,
    phase: Phase,
    context: int,
    depth: int,
    n_tokens: int,
    oracle: dict[str, list[int]],
    progress: ProgressTracker | None,
) -> dict[str, ArmRun]:
    """Decode n_tokens in both arms at one depth, interleaving arms step by step (A B B A)."""
    runs: dict[str, ArmRun] = {}
    for name in ARM_ORDER:
        w = ctx.workers[name]
        last, base = w.arm.state["last"], w.arm.state["base_len"]
        runs[name] = w.call(
            lambda a, last=last, base=base, name=name: _start(
                a, ctx, depth, last, base, oracle.get(name)
            )
        )
    step = 0
    while any(len(r.emitted) < n_tokens for r in runs.values()):
        order = ARM_ORDER if step % 2 == 0 else ARM_ORDER[::-1]
        for name in order:
            run = runs[name]
            if len(run.emitted) >= n_tokens:
                continue
            ctx.check_stop()
            if depth == 0:
                ctx.workers[name].call(lambda a, run=run: _plain(a, run))
                if progress:
                    progress.advance()
                continue
            before = ctx.workers[name].arm.counters.total()
            emitted_before = len(run.emitted)
            result = ctx.workers[name].call(lambda a, run=run: _spec(a, run))
            after = ctx.workers[name].arm.counters.total()
            if progress is None:  # warm-up: nothing is recorded
                continue
            ctx.emit(
                SpecStep(
                    ctx.now(),
                    phase.name,
                    name,
                    context,
                    depth,
                    step,
                    result.draft_ms,
                    result.verify_ms,
                    result.accepted,
                    tuple(
                        1 if i < result.accepted else 0
                        for i in range(min(depth, result.accepted + 1))
                    ),
                    len(result.emitted),
                    after[0] - before[0],
                    after[1] - before[1],
                )
            )
            progress.advance(min(len(run.emitted), n_tokens) - emitted_before)
        step += 1
    for name in ARM_ORDER:
        ctx.workers[name].call(lambda a, run=runs[name]: _rewind(a, run))
    return runs


def plain_estimates(plain: dict[str, ArmRun], seed: int, context: int) -> ContextEstimates:
    """Plain decode alternates the arms per step (A B, then B A), so steps 2j and 2j + 1 of both
    arms form one A B B A quad: round j of the sampler's paired L = 1 estimate."""
    n = min(len(plain[name].step_ms) for name in ARM_ORDER) // 2 * 2
    a, b = ARM_ORDER
    sa, sb = plain[a].step_ms, plain[b].step_ms
    timings = []
    for i in range(0, n, 2):  # the order they ran: A B (step i), then B A (step i + 1)
        r = i // 2
        timings += [
            Timing(r, 1, a, sa[i]),
            Timing(r, 1, b, sb[i]),
            Timing(r, 1, b, sb[i + 1]),
            Timing(r, 1, a, sa[i + 1]),
        ]
    return estimate_context(
        timings, ARM_ORDER, 1, L1_TOLERANCE_PCT, stable_seed(seed, "decode", context)
    )


def _result(
    ctx: RunContext, phase: Phase, arm: str, context: int, run: ArmRun, n_tokens: int
) -> DecodeResult:
    seconds = sum(run.step_ms) / 1e3  # whole steps: draft + verify + accept + rollback
    emitted = min(len(run.emitted), n_tokens) if run.depth == 0 else len(run.emitted)
    acceptance = tuple(a / o for a, o in zip(run.accepted_at, run.offered_at, strict=True) if o)
    r = DecodeResult(
        ctx.now(),
        phase.name,
        arm,
        context,
        run.depth,
        emitted,
        seconds,
        emitted / seconds if seconds > 0 else 0.0,
        acceptance,
        statistics.median(run.verify_ms) if run.verify_ms else None,
        statistics.median(run.draft_ms) if run.draft_ms else None,
    )
    ctx.emit(r)
    return r


def _prepare_context(ctx: RunContext, context: int) -> int:
    """Prefill `context` tokens once, a copy per arm; the next text token is `last`."""
    text = ctx.tokens_for(context + 1)
    length = share_context(ctx, text[:-1])
    for name in ARM_ORDER:

        def remember(a: Arm, length=length) -> None:
            a.state.update(last=text[-1], base_len=length, context_tokens=text[:-1])

        ctx.workers[name].call(remember)
    return length


def _warm_up(ctx: RunContext, phase: Phase, context: int, depths: list[int]) -> None:
    """Compile every width once in both arms; nothing here is timed or emitted."""
    for depth in [0, *depths]:
        decode_setting(ctx, phase, context, depth, phase.warmup + depth, {}, None)


def run_decode(ctx: RunContext, phase: Phase, index: int, total_phases: int) -> PhaseSummary:
    """Plain decode and speculative decoding at each context and depth, both arms."""
    depths = list(phase.depths) if ctx.make_draft is not None else []
    if not depths:
        ctx.emit(
            LogMessage(
                ctx.now(),
                "warning",
                f"{phase.name}: no draft source, so only plain decode is measured",
            )
        )
    planned = len(phase.contexts) * phase.tokens * 2 * (1 + len(depths))
    ctx.emit(
        PhaseStart(ctx.now(), phase.name, phase.kind, index, total_phases, planned, phase.contexts)
    )
    progress = ProgressTracker(ctx, phase.name, planned)
    rows: list[dict] = []
    for context in phase.contexts:
        ctx.check_stop()
        length = _prepare_context(ctx, context)
        _warm_up(ctx, phase, length, depths)
        plain = decode_setting(ctx, phase, length, 0, phase.tokens, {}, progress)
        oracle = {name: plain[name].emitted[1:] + [plain[name].last] for name in ARM_ORDER}
        v = validity(ctx, phase.name, length, plain_estimates(plain, ctx.seed, length))
        results = {
            (name, 0): _result(ctx, phase, name, length, plain[name], phase.tokens)
            for name in ARM_ORDER
        }
        for depth in depths:
            runs = decode_setting(ctx, phase, length, depth, phase.tokens, oracle, progress)
            for name in ARM_ORDER:
                results[(name, depth)] = _result(ctx, phase, name, length, runs[name], phase.tokens)
                n = min(len(runs[name].emitted), len(plain[name].emitted))
                if (
                    not isinstance(ctx.workers[name].arm.draft, SyntheticDraft)
                    and runs[name].emitted[:n] != plain[name].emitted[:n]
                ):
                    ctx.emit(
                        LogMessage(
                            ctx.now(),
                            "warning",
                            f"{name} arm, context {length}, depth {depth}: speculative output diverged from plain greedy (near-tie under a different summation order)",
                        )
                    )
        rows += _rows(results, length, v.valid, v.verdict)
    verdict = tune_verdict(rows) if phase.kind == "tune" else decode_verdict(rows)
    summary = PhaseSummary(ctx.now(), phase.name, phase.kind, tuple(rows), verdict)
    ctx.emit(summary)
    return summary


def _rows(
    results: dict[tuple[str, int], DecodeResult], context: int, valid: bool, outcome: str
) -> list[dict]:
    rows = []
    for (arm, depth), r in sorted(results.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        plain = results[(arm, 0)].tok_s
        rows.append(
            {
                "context": context,
                "arm": arm,
                "depth": depth,
                "tok_s": r.tok_s,
                "vs_plain": r.tok_s / plain if plain else None,
                "acceptance_by_position": list(r.acceptance_by_position),
                "verify_ms_median": r.verify_ms_median,
                "draft_ms_median": r.draft_ms_median,
                "tokens": r.tokens,
                "valid": valid,
                "outcome": outcome,
            }
        )
    return rows


def pick_depth(tok_s_by_depth: dict[int, float], tie_pct: float = TIE_PCT) -> int:
    """Fastest setting; a deeper depth within tie_pct of the fastest wins. 0 = plain decode."""
    best = max(tok_s_by_depth.values())
    close = [d for d, v in tok_s_by_depth.items() if v >= best * (1 - tie_pct / 100)]
    return max(close)


def tune_verdict(rows: list[dict]) -> str:
    parts = []
    outcomes = {r["context"]: r.get("outcome", "invalid") for r in rows}
    for context in sorted({r["context"] for r in rows}):
        for arm in ARM_ORDER:
            mine = {
                r["depth"]: r["tok_s"]
                for r in rows
                if r["context"] == context and r["arm"] == arm and r["valid"]
            }
            if not mine:
                parts.append(
                    f"{arm} @ {context}: left out (L = 1 check {outcomes.get(context, 'not valid')})"
                )
                continue
            depth = pick_depth(mine)
            if depth == 0:
                parts.append(f"{arm} @ {context}: speculation rejected ({mine[0]:.1f} tok/s plain)")
            else:
                parts.append(
                    f"{arm} @ {context}: depth {depth} wins, {mine[depth]:.1f} tok/s = {mine[depth] / mine[0]:.2f}x plain"
                )
    return "; ".join(parts)


def decode_verdict(rows: list[dict]) -> str:
    parts = []
    for r in rows:
        if r["depth"] > 0 and r["valid"]:
            parts.append(
                f"{r['arm']} @ {r['context']} depth {r['depth']}: {r['tok_s']:.1f} tok/s ({r['vs_plain']:.2f}x plain)"
            )
    return "; ".join(parts)
