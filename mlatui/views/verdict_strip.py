"""The run's verdict in one line, from what the dashboard knows (pure Python).

One function for the screen, `replay --dump` and the exported markdown, so they never disagree:
the best significant speculative result per arm (its draft kind and depth), the marginal cost of the second query at the
largest valid context, the L = 1 checks, and the harness bias. It follows the verdict rules:
contexts whose L = 1 check is invalid or inconclusive and results with guard warnings are never
used; a speedup counts only when its CI lies above 1. A context made valid by the pooled L = 1
check (mlatui.measure.estimates) is used, and is always shown as such (✓p), never as plain valid.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

from mlatui.measure.estimates import judge_estimates
from mlatui.measure.plans import Setting
from mlatui.stream.events import ARMS, DecodeResult
from mlatui.stream.phrases import CHECK_MARKS
from mlatui.views.dashboard_state import DashboardState
from mlatui.views.run_meta import slot_name
from mlatui.views.units import fmt_context, ms_text, ratio_text


class Tone(enum.StrEnum):
    GOOD = "good"
    BAD = "bad"
    WARN = "warn"
    INFO = "info"


# When a line does not fit, parts shorten one step at a time, lowest rank first: the pooled
# check's suffix, the bias's detail, the wording around each result, its place.
# No form drops a speedup's CI or either Δ2 figure.
RANK_POOLED, RANK_BIAS, RANK_WORDS, RANK_PLACE = range(4)


@dataclass(frozen=True)
class Part:
    forms: tuple[str, ...]  # longest first; each next one is what fits a narrower screen
    tone: Tone
    ranks: tuple[int, ...] = ()  # when to step to forms[i + 1]: lower steps first

    @property
    def text(self) -> str:
        return self.forms[0]

    @property
    def short(self) -> str:
        return self.forms[-1]


def part(tone: Tone, *forms: tuple[str, int] | str) -> Part:
    """`part(tone, long, (shorter, rank), (shortest, rank))`: forms that equal the one before
    them are skipped."""
    texts: list[str] = []
    ranks: list[int] = []
    for f in forms:
        text, rank = (f, 0) if isinstance(f, str) else f
        if texts and text == texts[-1]:
            continue
        texts.append(text)
        if len(texts) > 1:
            ranks.append(rank)
    return Part(tuple(texts), tone, tuple(ranks))


def _valid(state: DashboardState, r: DecodeResult) -> bool:
    v = state.validity.get((r.phase, r.context))
    return v is not None and v.valid


def _usable(state: DashboardState, results: list[DecodeResult]) -> list[DecodeResult]:
    """Measured, or rejected by bound (its bound's upper end is its speedup's), at a context
    whose L = 1 check passed, with no guard warning."""
    return [
        r
        for r in results
        if not r.warnings and (r.vs_plain is not None or r.rejected_by_bound) and _valid(state, r)
    ]


def _best_win(mine: list[DecodeResult]) -> DecodeResult | None:
    wins = [r for r in mine if r.vs_plain is not None and r.vs_plain.known and r.vs_plain.low > 1]
    return (
        max(wins, key=lambda r: (r.vs_plain.median if r.vs_plain else 0.0, r.context))
        if wins
        else None
    )


def _upper_end(r: DecodeResult) -> float | None:
    """The most a setting gained: its speedup's CI high end, or its bound's when not measured."""
    if r.vs_plain is not None:
        return r.vs_plain.high if r.vs_plain.known else None
    return r.bound.value if not r.measured and r.bound is not None else None


def winner(state: DashboardState, arm: str) -> DecodeResult | None:
    """The result the verdict names for `arm` (its best significant speedup), if any."""
    results = [r for r in state.decode_results if r.depth > 0 and r.arm == arm]
    return _best_win(_usable(state, results))


def pane_setting(state: DashboardState) -> Setting | None:
    """The one speculative setting both arm panes show acceptance for: the verdict's best win
    over both arms (the ★), else the latest setting both arms ran at the current context, else
    the latest either ran."""
    wins = [w for arm in ARMS if (w := winner(state, arm)) is not None]
    if wins:
        best = max(wins, key=lambda r: (r.vs_plain.median if r.vs_plain else 0.0, r.context))
        return Setting(best.draft_kind, best.depth)
    arms = [state.arms[a] for a in ARMS if a in state.arms]
    latest = [a.setting for a in arms if a.setting is not None]
    both = [st for st in latest if all(st in a.counts for a in arms)]
    chosen = both or latest
    return chosen[-1] if chosen else None


def _speculation(state: DashboardState) -> list[Part]:
    results = [r for r in state.decode_results if r.depth > 0]
    if not results:
        return []
    usable = _usable(state, results)
    if not usable:
        return [_no_tune_verdict(state, results)]
    settings = state.header.settings if state.header else None
    parts = []
    for slot in ARMS:
        arm = slot_name(settings, slot)  # what ran there: "stock", or "pre-fix" on fixed code
        mine = [r for r in usable if r.arm == slot]
        if mine:
            parts.append(_arm_verdict(state, mine, arm))
            continue
        warned = sorted(
            {r.context for r in results if r.arm == slot and r.warnings and _valid(state, r)}
        )
        if warned:  # the other arm has a verdict: say why this one has none
            at = ", ".join(map(fmt_context, warned))
            parts.append(
                part(
                    Tone.WARN,
                    f"{arm}: no verdict (every result warned at {at})",
                    (f"{arm} n.v.", RANK_WORDS),
                )
            )
    return parts


def _no_tune_verdict(state: DashboardState, results: list[DecodeResult]) -> Part:
    """Why no result of the tune phase can carry a verdict."""
    invalid = sorted({r.context for r in results if not _valid(state, r)})
    reasons = []
    if invalid:
        reasons.append(f"L=1 check not valid at {', '.join(map(fmt_context, invalid))}")
        if state.drifts:  # a noisy host is the usual cause: say what the run saw of it
            reasons.append(f"device drift in {len(state.drifts)} steps")  # of >10%: the log
    warned = sorted({r.context for r in results if _valid(state, r) and r.warnings})
    if warned:
        reasons.append(f"every result warned at {', '.join(map(fmt_context, warned))}")
    reasons = reasons or ["no speedup measured"]
    return part(
        Tone.WARN, f"tune: no verdict ({'; '.join(reasons)})", ("tune: no verdict", RANK_WORDS)
    )


def _arm_verdict(state: DashboardState, mine: list[DecodeResult], arm: str) -> Part:
    """One arm's speculation verdict from its usable results: its best significant win, a
    rejection where every result is significantly slower, or no significant gain."""
    best = _best_win(mine)
    if best is not None:
        ratio = ratio_text(best.vs_plain)
        at = fmt_context(best.context)
        where = f"{Setting(best.draft_kind, best.depth).label} @ {at}"
        pooled = state.validity[(best.phase, best.context)].pooled
        return part(
            Tone.GOOD,
            f"{arm} spec wins {ratio} ({where}{', L=1 ✓p' if pooled else ''})",
            (f"{arm} {ratio} ({where}{' ✓p' if pooled else ''})", RANK_WORDS),
            (f"{arm} {ratio} @ {at}{' ✓p' if pooled else ''}", RANK_PLACE),
        )
    if all((high := _upper_end(r)) is not None and high < 1 for r in mine):
        worst = max(r.context for r in mine)
        how = "by bound" if all(r.rejected_by_bound for r in mine) else "slower"
        return part(
            Tone.BAD,
            f"{arm} spec rejected ({how} at {fmt_context(worst)})",
            (f"{arm} rejected", RANK_WORDS),
        )
    return part(Tone.INFO, f"{arm} no significant gain", (f"{arm} n.s.", RANK_WORDS))


def _marginal(state: DashboardState) -> list[Part]:
    checked = {c for (_, c) in state.validity}  # and no check there failed, in any phase
    valid = [c for c in state.contexts() if c in checked and not state.is_invalid(c)]
    if not valid:
        return []
    top = max(valid)
    m = {arm: dict(state.marginal(arm)).get(top) for arm in ARMS}
    if m["stock"] is None or m["patched"] is None:
        return []
    s, p = m["stock"], m["patched"]
    at = fmt_context(top)
    # both medians, never their ratio: a ratio of two medians has no CI of its own
    return [
        part(
            Tone.GOOD if p > 0 and s > 0 and s / p >= 2 else Tone.INFO,
            f"Δ2 @ {at}: {ms_text(s)} vs {ms_text(p)} ms",
            (f"Δ2 {at} {ms_text(s)} vs {ms_text(p)} ms", RANK_PLACE),
        )
    ]


def _checks(state: DashboardState) -> list[Part]:
    """`L=1 ✓ 1/5 ✓p 4/5 (pooled 1.003× [0.994, 1.011], 5 contexts)`: valid on their own, valid
    by the pooled check (never counted as plain valid), inconclusive, invalid; then the latest
    pooled check's figure."""
    checks = list(state.validity.values())
    if not checks:
        return []
    pooled = sum(v.valid and v.pooled for v in checks)
    ok = sum(v.valid for v in checks) - pooled
    unsure = sum(v.verdict == "inconclusive" for v in checks)
    bad = len(checks) - ok - pooled - unsure
    valid, by_pool, undecided, invalid = (
        CHECK_MARKS[v] for v in ("valid", "valid (pooled)", "inconclusive", "invalid")
    )
    text = f"L=1 {valid} {ok}/{len(checks)}"
    if pooled:
        text += f" {by_pool} {pooled}/{len(checks)}"
    if unsure:
        text += f" {undecided} {unsure}"
    if bad:
        text += f" {invalid} {bad}"
    counts = text
    p = state.latest_pooled
    if p is not None:
        said = "" if p.valid else f": {p.outcome}"
        text += f" (pooled {ratio_text(p.ratio)}, {len(p.contexts)} contexts{said})"
    # the counts at every width: a shorter line drops the pooled figure, never a count
    tone = Tone.GOOD if ok + pooled == len(checks) else Tone.BAD if bad else Tone.WARN
    return [part(tone, text, (counts, RANK_POOLED))]


def is_null_run(state: DashboardState) -> bool:
    return bool(state.header is not None and state.header.settings.null)


def _null(state: DashboardState) -> list[Part]:
    """An A/A run's own verdict: its finished cells' CIs counted against chance (both arms run
    one variant, so a speedup or a marginal-cost ratio between them means nothing)."""
    judged = judge_estimates(e for e in state.estimates.values() if e.final)
    if judged is None:
        return []
    short = f"A/A {judged.cells - judged.excluded}/{judged.cells} in CI"
    return [part(Tone.GOOD if judged.consistent else Tone.BAD, judged.text, (short, RANK_WORDS))]


def verdict_parts(state: DashboardState) -> list[Part]:
    if is_null_run(state):
        parts = [*_null(state), *_checks(state)]
    else:
        parts = [*_speculation(state), *_marginal(state), *_checks(state)]
    missing = state.header.settings.mtp_missing if state.header else ""
    if missing:  # the run measured without the draft it could have had: first, never dropped
        parts.insert(0, part(Tone.WARN, missing, ("MTP head missing (see log)", RANK_PLACE)))
    bias = state.harness_bias
    if bias:
        parts.append(part(Tone.INFO, bias, (bias.split(" (")[0], RANK_BIAS)))
    return parts


SEP = " · "


def wrap_forms(texts: list[str], width: int, indent: int = 0) -> list[list[str]]:
    """The texts on lines of at most `width` columns (the first `indent` columns taken),
    broken between texts, never inside one."""
    lines: list[list[str]] = [[]]
    used = indent
    for t in texts:
        if lines[-1] and used + len(SEP) + len(t) > width:
            lines.append([])
            used = indent
        used += (len(SEP) if lines[-1] else 0) + len(t)
        lines[-1].append(t)
    return lines


def fit_forms(parts: list[Part], width: int, indent: int = 0, max_lines: int = 1) -> list[str]:
    """One form per part: the longest that let the parts fit `max_lines` lines of `width`,
    shortening one part one step at a time, lowest rank first (then the later part)."""
    level = [0] * len(parts)
    steps = sorted(
        ((rank, -i, i) for i, p in enumerate(parts) for rank in p.ranks), key=lambda s: s[:2]
    )

    def forms() -> list[str]:
        return [p.forms[lv] for p, lv in zip(parts, level, strict=True)]

    def fits() -> bool:
        return len(wrap_forms(forms(), width, indent)) <= max_lines

    taken = []
    for _, _, i in steps:
        if fits():
            break
        level[i] += 1
        taken.append(i)
    for i in reversed(taken):  # a step that did not help (the wrap moved on later) is undone
        level[i] -= 1
        if not fits():
            level[i] += 1
    return forms()


def parts_line(parts: Sequence[Part], width: int = 1000) -> str:
    """The parts joined with ' · ', each in the longest form that lets the line fit `width`."""
    return SEP.join(fit_forms(list(parts), width)) if parts else "no result yet"


def verdict_line(state: DashboardState, width: int = 1000) -> str:
    return parts_line(verdict_parts(state), width)
