"""Guards on decode results and the tune verdict, from result rows alone (pure Python).

A row is one (context, arm, draft kind, depth) result of a decode or tune phase; depth 0 is plain
decode. With several draft kinds the verdict picks the best (kind, depth) per arm.
Rows carry tok/s and the speedup over plain decode with their 95% CIs (paired within rounds),
the acceptance counts, and the warnings of the guards below. A warned row is shown with its
warning and left out of every verdict.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from mlatui.measure.acceptance import LOOPING as LOOPING_TEXT
from mlatui.measure.acceptance import AcceptanceCounts, Repetition, looping_warning
from mlatui.measure.plans import Setting
from mlatui.stream.events import ARMS, arm_label
from mlatui.stream.phase_rows import DecodeRow
from mlatui.stream.phrases import ci_text


class Guard(enum.StrEnum):
    BARELY_SPECULATED = "barely speculated"
    TOO_FEW_VERIFIES = "too few verify steps"
    IMPOSSIBLE_SPEEDUP = "speedup above what acceptance allows"
    DIVERGED = "arms diverged"
    LOOPING = LOOPING_TEXT


@dataclass(frozen=True)
class GuardSettings:
    min_draft_share: float = 0.25
    min_verify_steps: int = 16
    min_distinct_4gram: float = 0.5


def guard_warnings(
    counts: AcceptanceCounts | None,
    speedup_low: float | None,
    settings: GuardSettings,
    repetition: Repetition | None = None,
) -> list[str]:
    """Warnings of one speculative result (empty: it may enter a verdict).

    - barely speculated: fewer than `min_draft_share` of the emitted tokens were accepted drafts
      (the reference run threw out by hand a sampled run that drafted 12 of 256 tokens yet
      "ran 3x plain decode");
    - too few verify steps to say anything;
    - a speedup whose CI lies above the tokens emitted per verify step: a verify step costs at
      least one plain step, so a real speedup cannot exceed that; the timing is an artefact;
    - looping text (`looping_warning`): the acceptance measured a repeat, not the draft.
    """
    if counts is None:
        return []
    out = []
    share = counts.draft_share
    if share is not None and share < settings.min_draft_share:
        out.append(
            f"{Guard.BARELY_SPECULATED}: {share:.0%} of {counts.emitted_tokens} tokens were "
            f"accepted drafts (< {settings.min_draft_share:.0%})"
        )
    if counts.verify_steps < settings.min_verify_steps:
        out.append(
            f"{Guard.TOO_FEW_VERIFIES}: {counts.verify_steps} (< {settings.min_verify_steps})"
        )
    bound = counts.emitted_per_verify
    if bound is not None and speedup_low is not None and speedup_low > bound:
        out.append(
            f"{Guard.IMPOSSIBLE_SPEEDUP}: CI low {speedup_low:.2f}× > {bound:.2f} tokens per verify"
        )
    looping = looping_warning(repetition, settings.min_distinct_4gram)
    if looping is not None:
        out.append(looping)
    return out


def first_divergence(a: list[int], b: list[int]) -> int | None:
    """1-based index of the first emitted token where two streams differ (token 0, the shared
    context token, is not counted); None when they agree over their common length."""
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return None


def pick(speedups: dict[Setting, tuple[float, float, float]], tie_pct: float) -> Setting | None:
    """The winning setting (a draft kind at a depth) among those whose speedup CI lies above 1,
    or None. Within tie_pct of the fastest median the deeper one wins (it amortises better at
    long outputs); at one depth, the faster kind."""
    winners = {k: v for k, v in speedups.items() if v[1] > 1.0}
    if not winners:
        return None
    best = max(v[0] for v in winners.values())
    close = [k for k, v in winners.items() if v[0] >= best * (1 - tie_pct / 100)]
    return max(close, key=lambda k: (k.depth, winners[k][0]))


def _setting(row: DecodeRow) -> Setting:
    return Setting(row.draft_kind, row.depth)


def _name(st: Setting) -> str:
    return f"{st.kind} depth {st.depth}" if st.kind else f"depth {st.depth}"


def _ci(median: float | None, low: float | None, high: float | None) -> str:
    return ci_text(median, low, high, 2, "×")


Speedup = tuple[float, float | None, float | None]  # median, CI low, CI high


def _with_ci(speedups: dict[Setting, Speedup]) -> dict[Setting, tuple[float, float, float]]:
    return {
        k: (m, lo, hi) for k, (m, lo, hi) in speedups.items() if lo is not None and hi is not None
    }


def tune_verdict(rows: list[DecodeRow], tie_pct: float = 2.0, phase: str = "") -> str:
    """Per context and arm: the winning setting, or why none won. `phase` names the arms: in an
    A/A pass both slots run one variant and are named A and B (`arm_label`)."""
    parts = []
    for context in sorted({r.context for r in rows}):
        for slot in ARMS:
            arm = arm_label(slot, phase)
            mine = [r for r in rows if r.context == context and r.arm == slot]
            plain = next((r for r in mine if r.depth == 0), None)
            if plain is None:
                continue
            if not plain.valid:
                parts.append(
                    f"{arm} @ {context}: left out (L = 1 check {plain.outcome or 'invalid'})"
                )
                continue
            spec = [r for r in mine if r.depth > 0]
            usable = {
                _setting(r): (r.vs_plain, r.vs_plain_low, r.vs_plain_high)
                for r in spec
                if not r.warnings and r.vs_plain is not None
            }
            by_bound = [_setting(r) for r in spec if _rejected_by_bound(r)]
            bound_note = _bound_note(spec, by_bound)
            warned = [_setting(r) for r in spec if r.warnings]
            if warned and all(not st.kind for st in warned):
                note = f" (d{','.join(str(st.depth) for st in sorted(warned, key=lambda st: st.depth))} left out: see warnings)"
            elif warned:
                note = f" ({', '.join(st.label for st in warned)} left out: see warnings)"
            else:
                note = ""
            plain_txt = f"{plain.tok_s:.1f} tok/s plain"
            also = f"; {bound_note}" if by_bound else ""
            won = pick(_with_ci(usable), tie_pct)
            if won is not None:
                r = next(x for x in spec if _setting(x) == won)
                parts.append(
                    f"{arm} @ {context}: {_name(won)} wins {_ci(*usable[won])} plain "
                    f"({r.tok_s:.1f} vs {plain_txt}{also}){note}"
                )
            elif not usable and by_bound and not warned:
                parts.append(
                    f"{arm} @ {context}: speculation rejected, every setting by bound "
                    f"({bound_note}; {plain_txt})"
                )
            elif not usable:
                parts.append(f"{arm} @ {context}: no usable speculative result{note}")
            else:
                best = max(usable, key=lambda k: usable[k][0])
                # a setting rejected by bound is slower too: its bound's upper end is below 1
                slower = all(v[2] is not None and v[2] < 1.0 for v in usable.values())
                word = "speculation rejected" if slower else "no significant winner"
                parts.append(
                    f"{arm} @ {context}: {word}, best {best.label} {_ci(*usable[best])} "
                    f"({plain_txt}{also}){note}"
                )
    return "; ".join(parts)


def _rejected_by_bound(row: DecodeRow) -> bool:
    return not row.measured and row.bound is not None and row.bound.value < 1.0


def _bound_note(spec: list[DecodeRow], rejected: list[Setting]) -> str:
    """`mtp d1, mtp d2 rejected by bound (at most 0.05×)`: the largest bound among them."""
    if not rejected:
        return ""
    top = max(r.bound.value for r in spec if r.bound is not None and _rejected_by_bound(r))
    names = ", ".join(st.label for st in rejected)
    return f"{names} rejected by bound (at most {top:.2f}×)"


def decode_verdict(rows: list[DecodeRow], phase: str = "") -> str:
    parts = []
    for r in rows:
        arm = arm_label(r.arm, phase)
        if r.depth > 0 and r.valid and r.bound is not None and _rejected_by_bound(r):
            parts.append(
                f"{arm} @ {r.context} {_name(_setting(r))}: rejected by bound (at most "
                f"{r.bound.value:.2f}× plain)"
            )
        elif r.depth > 0 and r.valid and not r.warnings and r.tok_s is not None:
            parts.append(
                f"{arm} @ {r.context} {_name(_setting(r))}: {r.tok_s:.1f} tok/s "
                f"({_ci(r.vs_plain, r.vs_plain_low, r.vs_plain_high)} plain)"
            )
    return "; ".join(parts)
