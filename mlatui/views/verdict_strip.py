"""The run's verdict in one line, from what the dashboard knows (pure Python).

One function for the screen, `replay --dump` and the exported markdown, so they never disagree:
the best significant speculative result per arm (its draft kind and depth), the marginal cost of the second query at the
largest valid context, the L = 1 checks, and the harness bias. It follows the verdict rules:
contexts whose L = 1 check is invalid or inconclusive and results with guard warnings are never
used; a speedup counts only when its CI lies above 1. A context made valid by the pooled L = 1
check (mlatui.measure.pooled) is used, and is always shown as such (✓p), never as plain valid.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from mlatui.measure.multiplicity import judge_estimates
from mlatui.measure.plans import Setting
from mlatui.stream.events import ARMS, DecodeResult
from mlatui.views.dashboard_state import DashboardState
from mlatui.views.rounding import fmt_context, sig


class Tone(enum.StrEnum):
    GOOD = "good"
    BAD = "bad"
    WARN = "warn"
    INFO = "info"


@dataclass(frozen=True)
class Part:
    text: str
    short: str  # for narrow screens
    tone: Tone


def _valid(state: DashboardState, r: DecodeResult) -> bool:
    v = state.validity.get((r.phase, r.context))
    return v is not None and v.valid


def _speculation(state: DashboardState) -> list[Part]:
    results = [r for r in state.decode_results if r.depth > 0]
    if not results:
        return []
    usable = [  # measured, or rejected by bound (its bound's upper end is its speedup's)
        r
        for r in results
        if not r.warnings and (r.vs_plain is not None or r.rejected_by_bound) and _valid(state, r)
    ]
    if not usable:
        invalid = sorted({r.context for r in results if not _valid(state, r)})
        reasons = []
        if invalid:
            reasons.append(f"L=1 check not valid at {', '.join(map(fmt_context, invalid))}")
            if state.drifts:  # a noisy host is the usual cause: say what the run saw of it
                reasons.append(f"device drift {len(state.drifts)}×")  # steps of >10%: the log
        warned = sorted({r.context for r in results if _valid(state, r) and r.warnings})
        if warned:
            reasons.append(f"every result warned at {', '.join(map(fmt_context, warned))}")
        reasons = reasons or ["no speedup measured"]
        return [Part(f"tune: no verdict ({'; '.join(reasons)})", "tune: no verdict", Tone.WARN)]
    parts = []
    for arm in ARMS:
        mine = [r for r in usable if r.arm == arm]
        if not mine:
            warned = sorted(
                {r.context for r in results if r.arm == arm and r.warnings and _valid(state, r)}
            )
            if warned:  # the other arm has a verdict: say why this one has none
                at = ", ".join(map(fmt_context, warned))
                parts.append(
                    Part(
                        f"{arm}: no verdict (every result warned at {at})", f"{arm} n.v.", Tone.WARN
                    )
                )
            continue
        wins = [r for r in mine if r.vs_plain_low is not None and r.vs_plain_low > 1]
        if wins:
            best: DecodeResult = max(wins, key=lambda r: (r.vs_plain, r.context))
            ci = f" [{best.vs_plain_low:.2f}-{best.vs_plain_high:.2f}]"
            where = f"{Setting(best.draft_kind, best.depth).label} @ {fmt_context(best.context)}"
            if state.validity[(best.phase, best.context)].pooled:
                where += ", L=1 ✓p"
            parts.append(
                Part(
                    f"{arm} spec wins ×{best.vs_plain:.2f}{ci} ({where})",
                    f"{arm} ×{best.vs_plain:.2f} ({where})",
                    Tone.GOOD,
                )
            )
        elif all(r.vs_plain_high is not None and r.vs_plain_high < 1 for r in mine):
            worst = max(r.context for r in mine)
            how = "by bound" if all(r.rejected_by_bound for r in mine) else "slower"
            parts.append(
                Part(
                    f"{arm} spec rejected ({how} at {fmt_context(worst)})",
                    f"{arm} rejected",
                    Tone.BAD,
                )
            )
        else:
            parts.append(Part(f"{arm} no significant gain", f"{arm} n.s.", Tone.INFO))
    return parts


def _marginal(state: DashboardState) -> list[Part]:
    valid = [
        c
        for c in state.contexts()
        if not state.sweep_invalid(c) and (v := state.verdict(c)) is not None and v.valid
    ]
    if not valid:
        return []
    top = max(valid)
    m = {arm: dict(state.marginal(arm)).get(top) for arm in ARMS}
    if m["stock"] is None or m["patched"] is None:
        return []
    s, p = m["stock"], m["patched"]
    ratio = f" ({s / p:.0f}×)" if p > 0 and s > 0 else ""  # a noisy negative Δ2 has no ratio
    return [
        Part(
            f"Δ2 @ {fmt_context(top)}: {sig(s)} vs {sig(p)} ms{ratio}",
            f"Δ2 @ {fmt_context(top)}{ratio}",
            Tone.GOOD if p > 0 and s > 0 and s / p >= 2 else Tone.INFO,
        )
    ]


def _checks(state: DashboardState) -> list[Part]:
    """`L=1 ✓ 1/5 ✓p 4/5 (pooled 1.003 [0.994, 1.011], 5 contexts)`: valid on their own, valid
    by the pooled check (never counted as plain valid), inconclusive, invalid; then the latest
    pooled check's figure."""
    checks = list(state.validity.values())
    if not checks:
        return []
    pooled = sum(v.valid and v.pooled for v in checks)
    ok = sum(v.valid for v in checks) - pooled
    unsure = sum(v.verdict == "inconclusive" for v in checks)
    bad = len(checks) - ok - pooled - unsure
    text = f"L=1 ✓ {ok}/{len(checks)}"
    if pooled:
        text += f" ✓p {pooled}/{len(checks)}"
    if unsure:
        text += f" ? {unsure}"
    if bad:
        text += f" ✗ {bad}"
    short = text
    p = state.latest_pooled
    if p is not None:
        said = "" if p.valid else f": {p.outcome}"
        text += (
            f" (pooled {p.ratio:.3f} [{p.ratio_low:.3f}, {p.ratio_high:.3f}], "
            f"{len(p.contexts)} contexts{said})"
        )
    tone = Tone.GOOD if ok + pooled == len(checks) else Tone.BAD if bad else Tone.WARN
    return [Part(text, short, tone)]


def is_null_run(state: DashboardState) -> bool:
    return bool(state.header is not None and (state.header.settings or {}).get("null"))


def _null(state: DashboardState) -> list[Part]:
    """An A/A run's own verdict: its finished cells' CIs counted against chance (both arms run
    one variant, so a speedup or a marginal-cost ratio between them means nothing)."""
    judged = judge_estimates(e for e in state.estimates.values() if e.final)
    if judged is None:
        return []
    short = f"A/A {judged.cells - judged.excluded}/{judged.cells} in CI"
    return [Part(judged.text, short, Tone.GOOD if judged.consistent else Tone.BAD)]


def verdict_parts(state: DashboardState) -> list[Part]:
    if is_null_run(state):
        parts = [*_null(state), *_checks(state)]
    else:
        parts = [*_speculation(state), *_marginal(state), *_checks(state)]
    bias = state.harness_bias
    if bias:
        parts.append(Part(bias, bias.split(" (")[0], Tone.INFO))
    return parts


def verdict_line(state: DashboardState, width: int = 1000) -> str:
    """The parts joined with ' · '; short forms when the long line does not fit `width`."""
    parts = verdict_parts(state)
    if not parts:
        return "no result yet"
    long = " · ".join(p.text for p in parts)
    return long if len(long) <= width else " · ".join(p.short for p in parts)
