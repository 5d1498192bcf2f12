"""The contexts where this device shows a scenario's `[story]` within the budget, from the probe's
step costs. Pure. The default story (the stock arm's verify step a clear multiple of its plain
step, the patched arm's flat) shows on the 2-core CPU from 1-2K tokens, on the H200 (a plain step
of the embedded model is ~3.3 ms of mostly fixed cost) only past 24K: the tune runs at the
smallest candidate where it holds, the sweep at the `sweep_contexts` largest candidates that let
the plan fit without cutting them; none past the model's positions, the tune inside its trained
windows.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from msgspec.structs import replace

from mlatui.config.scenario import Phase, Scenario
from mlatui.config.story import Story
from mlatui.measure.progress import RunProgress
from mlatui.run.budget import BudgetPlan
from mlatui.stream.phrases import ci_text

# an L = 2 step read under this share of its L = 1 step is a drift (the loaded 2-core CPU's probe
# once read the stock arm's at 0.7x), not the device's cost
NOISE_FLOOR = 0.9
StepMs = Callable[[str, int, int], float | None]  # (arm, context, width) -> mean ms, forecast


@dataclass(frozen=True)
class Limits:
    """The model's positions, and the tune's bound: the windows its model was trained on, or a
    draft model's fewer positions (None: not said)."""

    max_positions: int | None = None
    trained_window: int | None = None


@dataclass(frozen=True)
class ContextChoice:
    tune_context: int | None
    sweep_contexts: tuple[int, ...]
    note: str


def _allowed(story: Story, reach: int, *bounds: int | None) -> tuple[int, ...]:
    top = min((b for b in bounds if b), default=None)
    return tuple(c for c in story.contexts if top is None or c + reach <= top)


def _candidates(
    story: Story, phases: Sequence[Phase], limits: Limits
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(sweep, tune) candidates: the widest step, and a block's last position (context + tokens +
    the deepest draft), inside the bounds."""
    widest = max((max(p.widths) for p in phases if p.kind.rules.model_widths), default=1)
    tunes = [p for p in phases if p.kind.rules.compares_depths]
    reach = max((p.tokens + max(p.depths, default=0) + 1 for p in tunes), default=1)
    return (
        _allowed(story, widest, limits.max_positions),
        _allowed(story, reach, limits.max_positions, limits.trained_window),
    )


def longest_context(story: Story | None, phases: Sequence[Phase], limits: Limits) -> int | None:
    """The longest context a plan may pick (the probe's ladder goes up to it); None: no story."""
    allowed = _candidates(story, phases, limits)[0] if story else ()
    return allowed[-1] if allowed else None


def with_contexts(
    phases: tuple[Phase, ...], tune: int | None, sweep: tuple[int, ...]
) -> tuple[Phase, ...]:
    """The phases with the (first) sweep at `sweep` and every tune at `tune`."""
    first = next((p for p in phases if p.kind.rules.model_widths), None)
    return tuple(
        replace(p, contexts=sweep)
        if sweep and p is first
        else replace(p, contexts=(tune,))
        if p.kind.rules.compares_depths and tune is not None
        else p
        for p in phases
    )


def window(candidates: Sequence[int], top: int, tune: int | None, n: int) -> tuple[int, ...]:
    """The `n` largest candidates up to `top`, the tune's context among them."""
    chosen = [c for c in candidates if c <= top][-n:]
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
    """The tune's context and the sweep's for this device. `fits(phases)`: whether a plan of
    those phases fits the budget with the sweep's contexts kept."""
    sweeps, tunes = _candidates(story, phases, limits)
    bounds = _bounds_note(limits, story)
    if not sweeps:
        return ContextChoice(None, (), bounds)
    n = story.sweep_contexts

    def fits_with(tune: int | None, top: int) -> bool:
        return fits(with_contexts(phases, tune, window(sweeps, top, tune, n)))

    def affordable(c: int) -> bool:  # with the smallest sweep window that reaches it
        return any(t >= c for t in sweeps) and fits_with(c, next(t for t in sweeps if t >= c))

    tune, reason = None, ""
    if any(p.kind.rules.compares_depths for p in phases):
        fitting = [c for c in tunes if affordable(c)]
        tune, reason = _tune_context(story, step_ms, fitting or tunes[:1])
        if tune is not None and not fitting:
            reason += f" (no allowed context fits the budget: {tune}, the smallest)"
    tops = [c for c in sweeps if tune is None or c >= tune]
    # at least two contexts (a growth to show) where there are two, also where none fits
    tops = [t for t in tops if len(window(sweeps, t, tune, n)) > 1] or tops or [sweeps[-1]]
    top = next((t for t in reversed(tops) if fits_with(tune, t)), tops[0])
    contexts = window(sweeps, top, tune, n)
    said = [f"sweep {', '.join(map(str, contexts))}"] + ([f"tune {tune}"] if tune else [])
    note = f"contexts for this device: {'; '.join(said)}" + (f". The tune: {reason}" * bool(reason))
    if top < sweeps[-1]:
        note += f". The sweep stops at {top}: longer ones would not fit the budget"
    return ContextChoice(tune, contexts, note + (f". {bounds}" if bounds else ""))


def _tune_context(story: Story, step_ms: StepMs, tunes: Sequence[int]) -> tuple[int | None, str]:
    """The smallest candidate where the stock multiple and the patched flatness hold; else the
    one where the stock multiple is largest against the patched one. `tunes`: the candidates
    whose tune fits the budget (the reference BLAS took the largest, 24K, and planned 666 s)."""
    seen: list[tuple[int, float, float, str]] = []
    for c in tunes:
        steps = [(step_ms(arm, c, 1), step_ms(arm, c, 2)) for arm in ("stock", "patched")]
        if any(not one or two is None for one, two in steps):
            continue  # no step costs here
        stock, patched = (two / one for one, two in steps)  # type: ignore[operator]
        if min(stock, patched) < NOISE_FLOOR:
            continue  # a drift's reading
        # a single forecast has no CI: the note gives the ms, not their ratio
        said = "; ".join(
            f"{arm} L = 2 {ci_text(two, None, None, 1)} vs L = 1 {ci_text(one, None, None, 1)} ms"
            for arm, (one, two) in zip(("stock", "patched"), steps, strict=True)
        )
        seen.append((c, stock, patched, said))
        if stock >= story.stock_verify_multiple and patched <= story.patched_verify_flat:
            return c, (
                f"at {c} the probe forecasts {said}: the stock arm's L = 2 step at least "
                f"{story.stock_verify_multiple:g}× its L = 1 step and the patched arm's within "
                f"{story.patched_verify_flat:g}×, the smallest context where both hold"
            )
    if not seen:
        return (tunes[-1] if tunes else None), (
            "the probe's steps give no reading of the multiples (none, or one wider step read "
            "cheaper than its L = 1 step: the host drifted), so the largest allowed"
        )
    c, _, _, said = max(seen, key=lambda s: (s[1] / max(s[2], 1e-9), s[0]))
    return c, (
        f"no allowed context shows the stock arm's L = 2 step at {story.stock_verify_multiple:g}× "
        f"its L = 1 step with the patched arm's within {story.patched_verify_flat:g}×; the best is "
        f"{c} ({said}): the story is weak on this device at the contexts this model allows"
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


def choose(
    scenario: Scenario,
    costs: RunProgress,
    fit: Callable[[tuple[Phase, ...]], BudgetPlan],
    limits: Limits,
    decide: Callable[[list[bool]], list[bool]] = list,
) -> tuple[tuple[Phase, ...], str]:
    """The phases at the contexts that show the scenario's story on this device (rank 0's
    choice on every rank, `decide`), and the note that says why; as written without a story."""
    story = scenario.story
    if story is None:
        return scenario.phases, ""

    def step_ms(arm: str, context: int, width: int) -> float | None:
        got = costs.costs.step(arm, context, width)
        return got[1] if got else None

    def fits(phases: tuple[Phase, ...]) -> bool:
        plan = fit(phases)
        kept = [p.contexts for p in plan.phases if p.kind.rules.model_widths]
        return plan.fits and kept == [p.contexts for p in phases if p.kind.rules.model_widths]

    choice = choose_contexts(scenario.phases, story, step_ms, fits, limits)
    k = len(story.contexts)
    flags = decide(  # rank 0's choice, as yes/no per candidate
        [c == choice.tune_context for c in story.contexts]
        + [c in choice.sweep_contexts for c in story.contexts]
    )
    tune = next((c for c, yes in zip(story.contexts, flags[:k], strict=True) if yes), None)
    sweep = tuple(c for c, yes in zip(story.contexts, flags[k:], strict=True) if yes)
    return with_contexts(scenario.phases, tune, sweep), choice.note
