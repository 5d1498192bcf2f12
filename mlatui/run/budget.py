"""Fit a scenario to a time budget (`budget_s`): forecast what each phase would take on this
device from a short probe, and scale the plan down, in a fixed order that keeps the story, until
the forecast fits. Pure (no mlx): the probe's costs come in as a `RunProgress` cost table.

The order of reductions (each applied only while the forecast is over budget):
1. an undecided L = 1 check may add at most two rounds (not up to 3x the rounds);
2. with several draft kinds, the weaker ones (listed after the first in `[draft] sources`: the
   strongest first) keep only their smallest depth, the last-listed first;
3. the tune keeps one context, its smallest (each tune context is a full set of decode blocks);
4. the sweep's rounds go down to 5, then 4;
5. the sweep drops its largest contexts while more than three are left (three still show the
   stock arm's marginal cost growing with context);
6. decode blocks of 8 tokens instead of 16 or more.
What remains is run even when it does not fit, and the screen says so.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace

from mlatui.config.scenario import Phase
from mlatui.measure.plans import VERIFY_MIN_ROUNDS

MIN_SWEEP_CONTEXTS = 3
MIN_SWEEP_REPS = 4
MIN_BLOCK_TOKENS = 8
EXTRA_ROUNDS = 2


@dataclass(frozen=True)
class BudgetPlan:
    budget_s: float
    full_s: float  # the forecast of the phases as written
    predicted_s: float  # the forecast of the phases chosen
    phases: tuple[Phase, ...]
    changes: tuple[str, ...]

    @property
    def fits(self) -> bool:
        return self.predicted_s <= self.budget_s

    @property
    def scaled(self) -> bool:
        return bool(self.changes)

    def describe(self) -> str:
        if not self.scaled:
            return (
                f"budget {self.budget_s:.0f} s: the scenario as written fits (forecast "
                f"~{self.full_s:.0f} s on this device)"
            )
        verdict = "fits" if self.fits else "still over budget: this device is slow"
        return (
            f"budget {self.budget_s:.0f} s: the scenario as written would take ~{self.full_s:.0f} s "
            f"on this device, so it was scaled down to ~{self.predicted_s:.0f} s ({verdict}): "
            + "; ".join(self.changes)
            + " (--budget 0 runs it in full)"
        )


def _span(contexts: tuple[int, ...]) -> str:
    return ", ".join(str(c) for c in contexts)


def _cap_rounds(phases: tuple[Phase, ...]) -> tuple[tuple[Phase, ...], str]:
    out = []
    for p in phases:
        if p.kind == "sweep":
            out.append(replace(p, max_rounds=p.reps + EXTRA_ROUNDS))
        elif p.kind in ("tune", "decode"):
            out.append(replace(p, max_rounds=VERIFY_MIN_ROUNDS + EXTRA_ROUNDS))
        else:
            out.append(p)
    return tuple(out), f"an undecided L = 1 check adds at most {EXTRA_ROUNDS} rounds"


def _weaker_kinds(
    current: tuple[Phase, ...], kinds: Sequence[str]
) -> Iterator[tuple[tuple[Phase, ...], str]]:
    for kind in reversed(kinds[1:]):
        for i, p in enumerate(current):
            depths = sorted(set(p.depths_for(kind)))
            if p.kind in ("tune", "decode") and len(depths) > 1:
                keep = (depths[0],)
                q = replace(p, kind_depths=(*p.kind_depths, (kind, keep)))
                current = (*current[:i], q, *current[i + 1 :])
                yield (
                    current,
                    (
                        f"{p.name}: {kind} depths {_span(tuple(depths))} -> {_span(keep)} "
                        f"(weaker than {kinds[0]})"
                    ),
                )


def reductions(
    phases: tuple[Phase, ...], kinds: Sequence[str] = ()
) -> Iterator[tuple[tuple[Phase, ...], str]]:
    """Successively smaller plans, each with the change that made it. `kinds`: the run's draft
    kinds, strongest first."""
    current, note = _cap_rounds(phases)
    yield current, note
    for plan, note in _weaker_kinds(current, kinds):
        current = plan
        yield current, note
    for i, p in enumerate(current):
        if p.kind == "tune" and len(p.contexts) > 1:
            keep = (min(p.contexts),)
            current = (*current[:i], replace(p, contexts=keep), *current[i + 1 :])
            yield current, f"{p.name}: contexts {_span(p.contexts)} -> {_span(keep)}"
    for reps in (5, MIN_SWEEP_REPS):
        for i, p in enumerate(current):
            if p.kind == "sweep" and p.reps > reps:
                q = replace(p, reps=reps, max_rounds=reps + EXTRA_ROUNDS)
                current = (*current[:i], q, *current[i + 1 :])
                yield current, f"{p.name}: rounds per context {phases[i].reps} -> {reps}"
    for i, p in enumerate(current):
        if p.kind == "sweep":
            start = p.contexts
            while len(p.contexts) > MIN_SWEEP_CONTEXTS:
                p = replace(p, contexts=tuple(sorted(p.contexts))[:-1])
                current = (*current[:i], p, *current[i + 1 :])
                yield current, f"{p.name}: contexts {_span(start)} -> {_span(p.contexts)}"
    for i, p in enumerate(current):
        if p.kind in ("tune", "decode") and p.tokens > MIN_BLOCK_TOKENS:
            q = replace(p, tokens=MIN_BLOCK_TOKENS)
            current = (*current[:i], q, *current[i + 1 :])
            yield current, f"{p.name}: blocks of {p.tokens} -> {MIN_BLOCK_TOKENS} tokens"


def fit_to_budget(
    phases: tuple[Phase, ...],
    budget_s: float,
    forecast_s: Callable[[tuple[Phase, ...]], float],
    kinds: Sequence[str] = (),
) -> BudgetPlan:
    """The first plan in `reductions` order whose forecast fits `budget_s` (the phases as
    written if they fit; the smallest plan if none does). Changes that replace an earlier one of
    the same phase and kind (e.g. two context cuts) are reported once, as the final state."""
    full = forecast_s(phases)
    if full <= budget_s:
        return BudgetPlan(budget_s, full, full, phases, ())
    changes: list[str] = []
    chosen, predicted = phases, full
    for plan, note in reductions(phases, kinds):
        key = note.split(" -> ")[0]
        changes = [c for c in changes if c.split(" -> ")[0] != key] + [note]
        chosen, predicted = plan, forecast_s(plan)
        if predicted <= budget_s:
            break
    return BudgetPlan(budget_s, full, predicted, chosen, tuple(changes))
