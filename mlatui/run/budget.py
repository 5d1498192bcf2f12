"""Fit a scenario to a time budget (`budget_s`): forecast what each phase would take on this
device from a short probe, and scale the plan down, in a fixed order that keeps the story, until
the forecast fits. Pure (no mlx): the probe's costs come in as a `RunProgress` cost table.

The forecast already knows that a setting rejected by bound (mlatui.measure.bound: its verify
step costs too much for any acceptance to win) runs no decode blocks, from the probe's step costs
per arm and width; so on a device where the stock arm's verify steps are slow its speculative
blocks cost nothing, and only what is left is cut. The order of reductions (each applied only
while the forecast is over budget):
1. an undecided L = 1 check may add at most two rounds (not up to 3x the rounds);
2. with several draft kinds, the weaker ones (listed after the first in `[draft] sources`: the
   strongest first) keep only their smallest depth, the last-listed first;
3. the tune keeps one context, its smallest (each tune context is a full set of decode blocks);
4. the sweep drops its largest contexts while more than three are left (three still show the
   stock arm's marginal cost growing with context), keeping those a tune takes its verify steps
   from (`verify_from`): before its rounds, which the L = 1 check needs (on a noisy 2-core VM,
   4 rounds per context left the check undecided in all 3 default runs, 7 rounds in none of 2);
5. decode blocks of 8 tokens instead of 16 or more (a block's length changes how many verify
   steps it holds, not the rounds the CIs and the L = 1 check are made of);
6. the sweep's rounds go down to 5 and a tune's or decode's rounds of blocks to 6, then all to 4
   (with sweep rounds cut before the blocks, 4 rounds left a 100 s launch at 63 s with
   every L = 1 check undecided; a tune's speedup CI over 4 rounds spans most of their range);
7. the sweep drops its largest contexts down to two (two still show it growing), again keeping
   a tune's;
8. the sweep measures L = 1 and 2 only (the key figure's widths), and the widths a tune taking
   its verify steps from it needs;
9. the tune and decode phases drop their deepest depths down to one per kind, and their verify
   steps then run only at L = 1 and the L = depth + 1 of the depths kept (the sweep drops the
   widths no depth kept needs);
10. the weaker draft kinds are left out entirely, the last-listed first (the strongest kind
   still gives each arm a speculative result);
11. the tune takes its verify steps (and its L = 1 check) from the sweep's rounds at the same
   context, when the sweep runs first and measured every width they need, instead of
   measuring the same synced steps again;
12. the tune moves to the sweep's smallest context when that is shorter (its prefill, the
   drafts' and the stock arm's steps cost in proportion to the context);
13. where the tune still measures its own verify steps, their rounds go down to 4 (an undecided
   L = 1 check there is pooled with the sweep's quads at the same context).
What remains is run even when it does not fit, and the screen says so. The story stays: the
stock arm's marginal cost at two contexts at least, and a tune result per arm.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace

from mlatui.config.scenario import Phase
from mlatui.measure.plans import VERIFY_MIN_ROUNDS, verify_widths

MIN_SWEEP_CONTEXTS = 3
LAST_SWEEP_CONTEXTS = 2  # the fewest that still show the marginal cost growing with context
KEY_WIDTHS = (1, 2)  # the key figure: L = 2 - L = 1
MIN_SWEEP_REPS = 4
MIN_TUNE_REPS = 4
MIN_BLOCK_TOKENS = 8
MIN_VERIFY_ROUNDS = 4
EXTRA_ROUNDS = 2


@dataclass(frozen=True)
class BudgetPlan:
    budget_s: float
    full_s: float  # the forecast of the phases as written
    predicted_s: float  # the forecast of the phases chosen
    phases: tuple[Phase, ...]
    changes: tuple[str, ...]
    steps: int = 0  # how many of `reductions` were taken (`plan_after` replays them)

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
    """Never raises a cap already lower (a scenario's own, or an earlier plan's: a re-plan
    starts from phases that plan cut)."""
    out = []
    for p in phases:
        if p.kind.rules.run_check:
            cap = (VERIFY_MIN_ROUNDS if p.kind.rules.decodes else p.reps) + EXTRA_ROUNDS
            out.append(replace(p, max_rounds=min(p.max_rounds or cap, cap)))
        else:
            out.append(p)
    return tuple(out), f"an undecided L = 1 check adds at most {EXTRA_ROUNDS} rounds"


def _weaker_kinds(
    current: tuple[Phase, ...], kinds: Sequence[str]
) -> Iterator[tuple[tuple[Phase, ...], str]]:
    for kind in reversed(kinds[1:]):
        for i, p in enumerate(current):
            depths = sorted(set(p.depths_for(kind)))
            if p.kind.rules.decodes and len(depths) > 1:
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
        if p.kind.rules.compares_depths and len(p.contexts) > 1:
            keep = (min(p.contexts),)
            current = (*current[:i], replace(p, contexts=keep), *current[i + 1 :])
            yield current, f"{p.name}: contexts {_span(p.contexts)} -> {_span(keep)}"
    for plan, note in _fewer_sweep_contexts(current, phases, MIN_SWEEP_CONTEXTS):
        current = plan
        yield current, note
    for i, p in enumerate(current):
        if p.kind.rules.decodes and p.tokens > MIN_BLOCK_TOKENS:
            q = replace(p, tokens=MIN_BLOCK_TOKENS)
            current = (*current[:i], q, *current[i + 1 :])
            yield current, f"{p.name}: blocks of {p.tokens} -> {MIN_BLOCK_TOKENS} tokens"
    for sweep_reps, tune_reps in ((5, 6), (MIN_SWEEP_REPS, MIN_TUNE_REPS)):
        for i, p in enumerate(current):
            if p.kind.rules.model_widths and p.reps > sweep_reps:
                q = replace(p, reps=sweep_reps, max_rounds=sweep_reps + EXTRA_ROUNDS)
                current = (*current[:i], q, *current[i + 1 :])
                yield current, f"{p.name}: rounds per context {phases[i].reps} -> {sweep_reps}"
            elif p.kind.rules.decodes and p.reps > tune_reps:
                current = (*current[:i], replace(p, reps=tune_reps), *current[i + 1 :])
                yield current, f"{p.name}: rounds of blocks {phases[i].reps} -> {tune_reps}"
    yield from _slow_device(current, kinds, phases)


def _sweep_contexts(
    current: tuple[Phase, ...], i: int, written: Phase, n: int
) -> tuple[tuple[Phase, ...], str]:
    """The sweep at `current[i]` with `n` of its contexts as written: those a tune takes its
    verify steps from (`verify_from`; the tune would have none without them), then the smallest
    (the cheapest). The change said from the contexts as written ("" when nothing changed)."""
    sweep = current[i]
    kept = {c for p in current if p.verify_from == sweep.name for c in p.contexts}
    kept &= set(written.contexts)
    rest = sorted(set(written.contexts) - kept)
    chosen = kept | set(rest[: max(0, n - len(kept))])
    contexts = tuple(c for c in written.contexts if c in chosen)
    if contexts == sweep.contexts:
        return current, ""
    note = f"{sweep.name}: contexts {_span(written.contexts)} -> {_span(contexts)}"
    return _swap(current, i, replace(sweep, contexts=contexts)), note


def _fewer_sweep_contexts(
    current: tuple[Phase, ...], written: tuple[Phase, ...], floor: int
) -> Iterator[tuple[tuple[Phase, ...], str]]:
    """Each sweep one context fewer at a time, down to `floor` (`_sweep_contexts` picks which)."""
    for i, p in enumerate(current):
        if p.kind.rules.model_widths:
            for n in range(len(p.contexts) - 1, floor - 1, -1):
                current, note = _sweep_contexts(current, i, written[i], n)
                if note:
                    yield current, note


def _key_widths(
    current: tuple[Phase, ...], kinds: Sequence[str]
) -> Iterator[tuple[tuple[Phase, ...], str]]:
    """The sweep down to the key figure's widths and those a tune reading its verify steps from
    it (`verify_from`) needs for the depths it keeps."""
    for i, p in enumerate(current):
        if not p.kind.rules.model_widths:
            continue
        keep = set(KEY_WIDTHS)
        for t in current:
            if t.verify_from == p.name:
                keep |= set(verify_widths(_kept_depths(t, kinds)))
        widths = tuple(w for w in p.widths if w in keep)
        if widths != p.widths:
            current = _swap(current, i, replace(p, widths=widths))
            yield current, f"{p.name}: widths {_span(p.widths)} -> {_span(widths)}"


def _swap(current: tuple[Phase, ...], i: int, p: Phase) -> tuple[Phase, ...]:
    return (*current[:i], p, *current[i + 1 :])


def _slow_device(
    current: tuple[Phase, ...], kinds: Sequence[str], written: tuple[Phase, ...]
) -> Iterator[tuple[tuple[Phase, ...], str]]:
    """Reductions 7-10: what a device with a slow BLAS needs on top of the others. Changes are
    said from the phases as `written`, so a later cut of the same thing replaces an earlier one."""
    for plan, note in _fewer_sweep_contexts(current, written, LAST_SWEEP_CONTEXTS):
        current = plan
        yield current, note
    for plan, note in _key_widths(current, kinds):
        current = plan
        yield current, note
    for i, p in enumerate(current):
        if not p.kind.rules.decodes:
            continue
        for kind in kinds or ("",):
            start = tuple(sorted(set(p.depths_for(kind))))
            depths = start
            while len(depths) > 1:
                depths = depths[:-1]
                p = (
                    replace(p, kind_depths=(*p.kind_depths, (kind, depths)))
                    if kind
                    else (replace(p, depths=depths))
                )
                current = _swap(current, i, p)
                name = f"{kind} depths" if kind else "depths"
                yield (
                    current,
                    f"{p.name}: {name} {_span(start)} -> {_span(depths)} (verify steps at "
                    f"L = {_span(verify_widths(_kept_depths(p, kinds)))})",
                )
    for plan, note in _key_widths(current, kinds):  # what the tune's cut depths no longer need
        current = plan
        yield current, note
    for kind in reversed(kinds[1:]):
        for i, p in enumerate(current):
            if p.kind.rules.decodes and p.depths_for(kind):
                current = _swap(current, i, replace(p, kind_depths=(*p.kind_depths, (kind, ()))))
                was = _span(tuple(sorted(set(written[i].depths_for(kind)))))
                yield (
                    current,
                    f"{p.name}: {kind} depths {was} -> none (weaker than {kinds[0]}: left out)",
                )
    yield from _reuse_sweep(current, kinds, written)


def _reuse_sweep(
    current: tuple[Phase, ...], kinds: Sequence[str], written: tuple[Phase, ...]
) -> Iterator[tuple[tuple[Phase, ...], str]]:
    """Reductions 11-13: the tune's verify steps, where a sweep before it measured them."""
    sweep_at = next((j for j, p in enumerate(current) if p.kind.rules.model_widths), None)
    sweep = current[sweep_at] if sweep_at is not None else None
    for i, p in enumerate(current):
        if sweep is None or sweep_at is None or i < sweep_at or not p.kind.rules.compares_depths:
            continue
        need = set(verify_widths(_kept_depths(p, kinds)))
        if (
            not p.verify_from
            and set(p.contexts) <= set(sweep.contexts)
            and need <= {1, *sweep.widths}
        ):
            current = _swap(current, i, replace(p, verify_from=sweep.name))
            yield (
                current,
                f"{p.name}: verify steps from {sweep.name}'s rounds at the same context (the "
                "same synced steps, not measured twice)",
            )
    for i, p in enumerate(current):
        tune = p.kind.rules.compares_depths
        if tune and sweep is not None and min(sweep.contexts) < min(p.contexts):
            keep = (min(sweep.contexts),)
            current = _swap(current, i, replace(p, contexts=keep))
            yield (
                current,
                f"{p.name}: contexts {_span(written[i].contexts)} -> {_span(keep)} (the "
                "sweep's smallest: the cheapest context)",
            )
            if sweep_at is not None:  # the context the tune left is the sweep's to drop now
                n = len(current[sweep_at].contexts)
                current, note = _sweep_contexts(current, sweep_at, written[sweep_at], n)
                if note:
                    yield current, note
    for i, p in enumerate(current):
        tune = p.kind.rules.compares_depths
        if tune and not p.verify_from and p.verify_rounds > MIN_VERIFY_ROUNDS:
            q = replace(
                p, verify_rounds=MIN_VERIFY_ROUNDS, max_rounds=MIN_VERIFY_ROUNDS + EXTRA_ROUNDS
            )
            current = _swap(current, i, q)
            yield (
                current,
                f"{p.name}: verify rounds {p.verify_rounds} -> {MIN_VERIFY_ROUNDS} (an undecided "
                "L = 1 check is pooled with the sweep's at the same context)",
            )


def _kept_depths(p: Phase, kinds: Sequence[str]) -> list[int]:
    return sorted({d for k in (kinds or ("",)) for d in p.depths_for(k)})


def merge_changes(before: Sequence[str], after: Sequence[str]) -> tuple[str, ...]:
    """`before` then `after`, where a change of `after` replaces one of `before` of the same
    phase and kind (`tune: blocks of 16 -> 8 tokens` replaces `tune: blocks of …`): said once,
    as the final state."""
    keys = {c.split(" -> ")[0] for c in after}
    return (*(c for c in before if c.split(" -> ")[0] not in keys), *after)


def _walk(
    phases: tuple[Phase, ...], kinds: Sequence[str]
) -> Iterator[tuple[tuple[Phase, ...], tuple[str, ...]]]:
    """After each of `reductions`: the plan and the changes said so far. A change that replaces
    an earlier one of the same phase and kind (two context cuts) is said once, as the final
    state; a reduction that changes nothing (already so) is not said."""
    changes: tuple[str, ...] = ()
    chosen = phases
    for plan, note in reductions(phases, kinds):
        if plan != chosen:
            changes, chosen = merge_changes(changes, (note,)), plan
        yield chosen, changes


def reduction_count(phases: tuple[Phase, ...], kinds: Sequence[str] = ()) -> int:
    return sum(1 for _ in _walk(phases, kinds))


def plan_after(
    phases: tuple[Phase, ...], kinds: Sequence[str], steps: int
) -> tuple[tuple[Phase, ...], tuple[str, ...]]:
    """The plan after the first `steps` reductions, and its changes: what another rank chose
    (the walk is pure, so every rank replays the same plan from the same count)."""
    chosen: tuple[Phase, ...] = phases
    changes: tuple[str, ...] = ()
    for i, (plan, said) in enumerate(_walk(phases, kinds), start=1):
        if i > steps:
            break
        chosen, changes = plan, said
    return chosen, changes


def fit_to_budget(
    phases: tuple[Phase, ...],
    budget_s: float,
    forecast_s: Callable[[tuple[Phase, ...]], float],
    kinds: Sequence[str] = (),
    high_s: Callable[[tuple[Phase, ...]], float] | None = None,
) -> BudgetPlan:
    """The first plan in `reductions` order whose forecast fits `budget_s` (the phases as
    written if they fit; the smallest plan if none does), with its changes (`_walk`).
    `high_s`: the forecast's high end; the phases as written are kept only if it fits too, as
    their undecided L = 1 checks may triple a context's rounds (a 100 s budget ran 142 s: its
    forecast, 86 s, expected the share of extra rounds the earlier contexts needed)."""
    full = forecast_s(phases)
    if full <= budget_s and (high_s is None or high_s(phases) <= budget_s):
        return BudgetPlan(budget_s, full, full, phases, ())
    best = BudgetPlan(budget_s, full, full, phases, ())
    for steps, (plan, changes) in enumerate(_walk(phases, kinds), start=1):
        best = BudgetPlan(budget_s, full, forecast_s(plan), plan, changes, steps)
        if best.fits:
            break
    return best
