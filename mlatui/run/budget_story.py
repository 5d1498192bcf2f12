"""Contexts chosen by the device: from a scenario's `[story]` (mlatui.config.story) and the
probe's step costs, the contexts where this device shows the story, within the budget.

The default scenario's story (the stock arm's verify step a clear multiple of its plain step, the
patched arm's flat) shows on the 2-core CPU from 1-2K tokens; on the H200 a plain step of the
embedded model is ~3.3 ms of mostly fixed cost and the stock arm's L = 2 step costs 2.2x it at 4K,
3.3x at 16K, 4.5x at 32K. So the tune runs at the smallest candidate context where both hold
(forecast from the probe's costs), and the sweep at the `sweep_contexts` largest candidates up to
the largest that still lets the plan fit without cutting the sweep's contexts. No context runs
beyond the model's max positions; the tune (whose drafts must be good there) also stays inside
the windows the model was trained on, when it says. Pure: the costs come in as a function.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from mlatui.config.scenario import Phase
from mlatui.config.story import Story

# an L = 2 step forecast at less than this share of its L = 1 step is a drift's reading (the
# loaded 2-core CPU's probe once read the stock arm's at 0.7x), not the device's cost
NOISE_FLOOR = 0.9
StepMs = Callable[[str, int, int], float | None]  # (arm, context, width) -> mean ms, forecast


@dataclass(frozen=True)
class Limits:
    """What the model allows: the positions it was built for, and the tune's bound: the windows
    it was trained on, or fewer positions its draft model was built for (None: not said)."""

    max_positions: int | None = None
    trained_window: int | None = None


@dataclass(frozen=True)
class ContextChoice:
    tune_context: int | None
    sweep_contexts: tuple[int, ...]
    note: str


def _sweep(phases: Sequence[Phase]) -> Phase | None:
    return next((p for p in phases if p.kind.rules.model_widths), None)


def _tunes(phases: Sequence[Phase]) -> list[Phase]:
    return [p for p in phases if p.kind.rules.compares_depths]


def sweep_candidates(story: Story, phases: Sequence[Phase], limits: Limits) -> tuple[int, ...]:
    """The story's contexts the sweep may run at: its widest step still inside max positions."""
    sweep = _sweep(phases)
    widest = max(sweep.widths) if sweep else 1
    top = limits.max_positions
    return tuple(c for c in story.contexts if top is None or c + widest <= top)


def tune_candidates(story: Story, phases: Sequence[Phase], limits: Limits) -> tuple[int, ...]:
    """The story's contexts a tune may run at: a block's last position (context + tokens + the
    deepest draft) inside max positions and the trained windows."""
    tunes = _tunes(phases)
    reach = max((p.tokens + max(p.depths, default=0) + 1 for p in tunes), default=1)
    bounds = [b for b in (limits.max_positions, limits.trained_window) if b]
    top = min(bounds) if bounds else None
    return tuple(c for c in story.contexts if top is None or c + reach <= top)


def longest_context(story: Story | None, phases: Sequence[Phase], limits: Limits) -> int | None:
    """The longest context a plan may pick (the probe's ladder goes up to it); None: no story."""
    if story is None:
        return None
    allowed = sweep_candidates(story, phases, limits)
    return allowed[-1] if allowed else None


def _multiples(step_ms: StepMs, context: int) -> tuple[float, float] | None:
    """(stock L = 2 / L = 1, patched L = 2 / L = 1) at `context`, forecast."""
    out = []
    for arm in ("stock", "patched"):
        one, two = step_ms(arm, context, 1), step_ms(arm, context, 2)
        if not one or two is None:
            return None
        out.append(two / one)
    return out[0], out[1]


def with_contexts(
    phases: tuple[Phase, ...], tune_context: int | None, sweep_contexts: tuple[int, ...]
) -> tuple[Phase, ...]:
    """The phases with the sweep at `sweep_contexts` and every tune at `tune_context`."""
    out = []
    for p in phases:
        if sweep_contexts and p is _sweep(phases):
            p = replace(p, contexts=sweep_contexts)
        elif p.kind.rules.compares_depths and tune_context is not None:
            p = replace(p, contexts=(tune_context,))
        out.append(p)
    return tuple(out)


def window(candidates: Sequence[int], top: int, tune: int | None, n: int) -> tuple[int, ...]:
    """The `n` largest candidates up to `top`, the tune's context among them."""
    below = [c for c in candidates if c <= top]
    chosen = below[-n:]
    if tune is not None and tune not in chosen:
        chosen = sorted([tune, *chosen[-(n - 1) :]]) if n > 1 else [tune]
    return tuple(chosen)


def choose_contexts(
    phases: tuple[Phase, ...],
    story: Story,
    step_ms: StepMs,
    fits: Callable[[tuple[Phase, ...]], bool],
    limits: Limits = Limits(),
) -> ContextChoice:
    """The tune's context and the sweep's, for this device (the module's docstring says how).
    `fits(phases)`: whether a plan of those phases fits the budget with the sweep's contexts
    kept."""
    sweeps = sweep_candidates(story, phases, limits)
    tunes = tune_candidates(story, phases, limits)
    if not sweeps:
        return ContextChoice(None, (), _bounds_note(limits, story))
    n = story.sweep_contexts

    def affordable(c: int) -> bool:
        """A tune at `c` fits the budget with the smallest sweep window that reaches it."""
        top = next((t for t in sweeps if t >= c), None)
        return top is not None and fits(with_contexts(phases, c, window(sweeps, top, c, n)))

    tune, reason = (
        _tune_context(story, step_ms, [c for c in tunes if affordable(c)] or tunes[:1])
        if _tunes(phases)
        else (None, "")
    )
    if tunes and tune is not None and not affordable(tune):
        reason += f" (no allowed context fits the budget: {tune}, the smallest)"
    tops = [c for c in sweeps if tune is None or c >= tune]
    top = next(
        (
            t
            for t in reversed(tops)
            if fits(with_contexts(phases, tune, window(sweeps, t, tune, n)))
        ),
        tops[0] if tops else sweeps[-1],
    )
    contexts = window(sweeps, top, tune, n)
    said = [f"sweep {', '.join(map(str, contexts))}"]
    if tune is not None:
        said.append(f"tune {tune}")
    note = f"contexts for this device: {'; '.join(said)}"
    if reason:
        note += f". The tune: {reason}"
    if top < sweeps[-1]:
        note += f". The sweep stops at {top}: longer ones would not fit the budget"
    bounds = _bounds_note(limits, story)
    return ContextChoice(tune, contexts, note + (f". {bounds}" if bounds else ""))


def _tune_context(story: Story, step_ms: StepMs, tunes: Sequence[int]) -> tuple[int | None, str]:
    """The smallest candidate where the stock multiple and the patched flatness hold; else the
    one where the stock multiple is largest (the best this model and device can show).
    `tunes` are the candidates whose tune fits the budget (a slow device: the reference BLAS
    took the largest, 24K, and planned 666 s for 100)."""
    seen: list[tuple[int, float, float]] = []
    for c in tunes:
        got = _multiples(step_ms, c)
        if got is None or min(got) < NOISE_FLOOR:  # no step costs, or a drift's reading
            continue
        stock, patched = got
        seen.append((c, stock, patched))
        if stock >= story.stock_verify_multiple and patched <= story.patched_verify_flat:
            return c, (
                f"at {c} the stock arm's L = 2 step is forecast at {stock:.1f}x its L = 1 step "
                f"(>= {story.stock_verify_multiple:g}x) and the patched arm's at {patched:.2f}x "
                f"(<= {story.patched_verify_flat:g}x), the smallest context where both hold"
            )
    if not seen:
        return (tunes[-1] if tunes else None), (
            "the probe's steps give no reading of the multiples (none, or one wider step read "
            "cheaper than its L = 1 step: the host drifted), so the largest allowed"
        )
    c, stock, patched = max(seen, key=lambda s: (s[1] / max(s[2], 1e-9), s[0]))
    return c, (
        f"no allowed context shows the stock arm's L = 2 step at {story.stock_verify_multiple:g}x "
        f"its L = 1 step with the patched arm's within {story.patched_verify_flat:g}x; the best is "
        f"{c} (stock {stock:.1f}x, patched {patched:.2f}x): the story is weak on this device "
        "at the contexts this model allows"
    )


def _bounds_note(limits: Limits, story: Story) -> str:
    parts = []
    if limits.max_positions and story.contexts[-1] > limits.max_positions:
        parts.append(f"none beyond the model's max positions ({limits.max_positions})")
    if limits.trained_window and story.contexts[-1] > limits.trained_window:
        parts.append(
            f"the tune inside the {limits.trained_window} tokens its model and drafts were "
            "trained and measured at"
        )
    said = "; ".join(parts)
    return said[:1].upper() + said[1:]


def choice_index(story: Story, choice: ContextChoice) -> list[bool]:
    """The choice as yes/no per candidate (the tune's, then the sweep's), for rank 0 to share."""
    return [c == choice.tune_context for c in story.contexts] + [
        c in choice.sweep_contexts for c in story.contexts
    ]


def from_index(story: Story, flags: Sequence[bool], note: str) -> ContextChoice:
    n = len(story.contexts)
    tune = next((c for c, yes in zip(story.contexts, flags[:n], strict=True) if yes), None)
    sweep = tuple(c for c, yes in zip(story.contexts, flags[n:], strict=True) if yes)
    return ContextChoice(tune, sweep, note)
