"""Fit a scenario to a time budget, pure (no mlx; the probe's costs come in as a forecast).

The plan is scaled down in a fixed order that keeps the story, only while its forecast is over
budget; then each sampler run of the plan gets a slice of the budget in proportion to its
forecast, and its sampler adds no round past the slice's end (mlatui.measure.sampler.within):
a device slower than its probe ends on time with fewer rounds, a faster one spends the rest on
what is undecided (at a phase boundary where the pace so far would end past the budget, the
phases left are fitted again: mlatui.run.budget_probe.Budget.replan). The order (a slow device with the reference BLAS needs all of it): the weaker
draft kinds keep their smallest depth; one tune context; the sweep down to three contexts (still
a growth), keeping those a `verify_from` tune reads; blocks of 8 tokens; rounds 5 (blocks 6),
then 4 (4 sweep rounds left the L = 1 check undecided in 3 of 3 runs on a noisy 2-core VM, 7 in
0 of 2); two sweep contexts; the key figure's widths; one depth per kind; the weaker kinds left
out; the tune's verify steps from the sweep's rounds at its smallest context, or 4 rounds.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from functools import partial

from msgspec import structs

from mlatui.config.scenario import Phase
from mlatui.measure.plans import Segment, verify_widths
from mlatui.run.phases.results import Slices
from mlatui.stream.events import BudgetOutcome

KEY_WIDTHS = (1, 2)  # the key figure: L = 2 - L = 1
MIN_BLOCK_TOKENS = 8
GROW_ROUNDS = 64  # the most rounds a segment runs under a budget (its slice ends it sooner)
# The forecast ran 2-7% short on the 2-core CPU with OpenBLAS, -7..+18% with the reference BLAS:
# plan against the budget less 15%; the slices then fill all of it.
FORECAST_MARGIN = 1.15
END_SHARE = 0.03  # of the budget, kept after the last slice: the last estimates, the summary
CHANGED = (  # (what the log calls it, the Phase field)
    ("contexts", "contexts"),
    ("widths", "widths"),
    ("rounds", "reps"),
    ("verify rounds", "verify_rounds"),
    ("blocks of", "tokens"),
    ("depths", "depths"),
)

Forecast = Callable[[tuple[Phase, ...]], float]
Plan = tuple[Phase, ...]
Change = Callable[[Plan, int], Phase]  # the plan's phase i, changed (or as it is)


@dataclass(frozen=True)
class BudgetPlan:
    budget_s: float
    full_s: float  # the forecast of the phases as written
    predicted_s: float  # the forecast of the phases chosen
    written: Plan
    phases: Plan
    steps: int = 0  # how many of `reductions` were taken

    @property
    def fits(self) -> bool:
        return self.predicted_s <= self.budget_s

    @property
    def changes(self) -> tuple[str, ...]:
        return changes(self.written, self.phases)

    def describe(self, what: str = "") -> str:
        """The plan in one line; `what` is planned (default: the scenario as written)."""
        what = what or "the scenario as written"
        if not self.changes:
            return (
                f"budget {self.budget_s:.0f} s: {what} fits (forecast ~{self.full_s:.0f} s on "
                "this device)"
            )
        verdict = "fits" if self.fits else "still over budget: this device is slow"
        return (
            f"budget {self.budget_s:.0f} s: {what} would take ~{self.full_s:.0f} s on this "
            f"device, so the plan was scaled down to ~{self.predicted_s:.0f} s ({verdict}): "
            + "; ".join(self.changes)
            + " (--budget 0 runs it in full)"
        )


def _span(values: int | Sequence[int]) -> str:
    return str(values) if isinstance(values, int) else ", ".join(map(str, values)) or "none"


def changes(written: Sequence[Phase], chosen: Sequence[Phase]) -> tuple[str, ...]:
    """What differs between each phase as written and as chosen, one line per setting."""
    out = []
    for a, b in zip(written, chosen, strict=True):
        said = [(what, getattr(a, f), getattr(b, f)) for what, f in CHANGED]
        kinds = dict.fromkeys(k for k, _ in (*a.kind_depths, *b.kind_depths))
        said += [(f"{k} depths", a.depths_for(k), b.depths_for(k)) for k in kinds]
        out += [
            f"{b.name}: {what} {_span(x)} -> {_span(y)}" + " tokens" * (what == "blocks of")
            for what, x, y in said
            if x != y
        ]
        if b.verify_from and not a.verify_from:
            out.append(f"{b.name}: verify steps from {b.verify_from}'s rounds at the same context")
    return tuple(out)


def _swap(current: Plan, i: int, p: Phase) -> Plan:
    return (*current[:i], p, *current[i + 1 :])


def _each(current: Plan, *changes: Change) -> Iterator[Plan]:
    """Each change on each phase in turn, again while it changes it (every change a step)."""
    for change in changes:
        for i in range(len(current)):
            while (p := change(current, i)) != current[i]:
                current = _swap(current, i, p)
                yield current


def _one(change: Callable[[Phase], Phase]) -> Change:
    return lambda current, i: change(current[i])


def _depths(p: Phase, kind: str, depths: tuple[int, ...]) -> Phase:
    if not kind:
        return structs.replace(p, depths=depths)
    kept = tuple(kd for kd in p.kind_depths if kd[0] != kind)
    return structs.replace(p, kind_depths=(*kept, (kind, depths)))


def _kept_depths(p: Phase, kinds: Sequence[str]) -> list[int]:
    return sorted({d for k in (kinds or ("",)) for d in p.depths_for(k)})


def _fewer_contexts(written: Plan, n: int, current: Plan, i: int) -> Phase:
    """A sweep one context fewer (at least `n` of those written): it keeps those a tune reads
    its verify steps from, then the smallest; at the same count first, when that set moved."""
    p, contexts = current[i], written[i].contexts
    if not p.kind.rules.model_widths:
        return p
    kept = {c for t in current if t.verify_from == p.name for c in t.contexts} & set(contexts)
    rest = sorted(set(contexts) - kept)
    for k in (len(p.contexts), len(p.contexts) - 1):
        chosen = kept | set(rest[: max(0, k - len(kept))])
        if k >= n and (picked := tuple(c for c in contexts if c in chosen)) != p.contexts:
            return structs.replace(p, contexts=picked)
    return p


def _key_widths(kinds: Sequence[str], current: Plan, i: int) -> Phase:
    p, keep = current[i], set(KEY_WIDTHS)
    if not p.kind.rules.model_widths:
        return p
    for t in current:
        if t.verify_from == p.name:
            keep |= set(verify_widths(_kept_depths(t, kinds)))
    return structs.replace(p, widths=tuple(w for w in p.widths if w in keep))


def _smallest_depth(kind: str, p: Phase) -> Phase:
    depths = sorted(set(p.depths_for(kind)))
    return _depths(p, kind, tuple(depths[:1])) if p.kind.rules.decodes and depths else p


def _left_out(kind: str, p: Phase) -> Phase:
    return _depths(p, kind, ()) if p.kind.rules.decodes and p.depths_for(kind) else p


def _drop_deepest(kinds: Sequence[str], p: Phase) -> Phase:
    for kind in (kinds or ("",)) if p.kind.rules.decodes else ():
        depths = sorted(set(p.depths_for(kind)))
        if len(depths) > 1:
            return _depths(p, kind, tuple(depths[:-1]))
    return p


def _one_tune_context(p: Phase) -> Phase:
    return structs.replace(p, contexts=(min(p.contexts),)) if p.kind.rules.compares_depths else p


def _short_blocks(p: Phase) -> Phase:
    return structs.replace(p, tokens=min(p.tokens, MIN_BLOCK_TOKENS)) if p.kind.rules.decodes else p


def _fewer_rounds(sweep_reps: int, block_reps: int, p: Phase) -> Phase:
    if p.kind.rules.model_widths:
        return structs.replace(p, reps=min(p.reps, sweep_reps))
    return structs.replace(p, reps=min(p.reps, block_reps)) if p.kind.rules.decodes else p


def reductions(phases: Plan, kinds: Sequence[str] = ()) -> Iterator[Plan]:
    """Successively smaller plans, each a step of the module's order. `kinds`: the run's draft
    kinds, strongest first."""
    weaker = tuple(reversed(kinds[1:]))
    steps: list[Change] = [
        *(_one(partial(_smallest_depth, k)) for k in weaker),
        _one(_one_tune_context),
        partial(_fewer_contexts, phases, 3),
        _one(_short_blocks),
        _one(partial(_fewer_rounds, 5, 6)),
        _one(partial(_fewer_rounds, 4, 4)),
        partial(_fewer_contexts, phases, 2),
        partial(_key_widths, kinds),
        _one(partial(_drop_deepest, kinds)),
        partial(_key_widths, kinds),  # what the depths cut no longer need
        *(_one(partial(_left_out, k)) for k in weaker),
    ]
    last = phases
    for last in _each(phases, *steps):
        yield last
    yield from _reuse_sweep(last, phases, kinds)


def _reuse_sweep(current: Plan, written: Plan, kinds: Sequence[str]) -> Iterator[Plan]:
    """The tune's verify steps from a sweep that runs before it, at its smallest context."""
    at = next((j for j, p in enumerate(current) if p.kind.rules.model_widths), len(current))
    for i in range(at + 1, len(current)):
        p, sweep = current[i], current[at]
        if not p.kind.rules.compares_depths:
            continue
        need = set(verify_widths(_kept_depths(p, kinds)))
        reusable = set(p.contexts) <= set(sweep.contexts) and need <= {1, *sweep.widths}
        if not p.verify_from and reusable:
            current = _swap(current, i, p := structs.replace(p, verify_from=sweep.name))
            yield current
        if min(sweep.contexts) < min(p.contexts):
            current = _swap(current, i, p := structs.replace(p, contexts=(min(sweep.contexts),)))
            yield current
            n = len(sweep.contexts)  # the context the tune left is the sweep's to drop
            plans = list(_each(current, partial(_fewer_contexts, written, n)))
            yield from plans
            current = plans[-1] if plans else current
        if not p.verify_from and p.verify_rounds > 4:
            current = _swap(current, i, structs.replace(p, verify_rounds=4))
            yield current


def fit_to_budget(
    phases: Plan, budget_s: float, forecast_s: Forecast, kinds: Sequence[str] = ()
) -> BudgetPlan:
    """The first plan in `reductions` order whose forecast fits `budget_s` (the phases as
    written if they fit; the smallest plan if none does)."""
    full = forecast_s(phases)
    plan = BudgetPlan(budget_s, full, full, phases, phases)
    for steps, chosen in enumerate(reductions(phases, kinds) if not plan.fits else (), start=1):
        plan = BudgetPlan(budget_s, full, forecast_s(chosen), phases, chosen, steps)
        if plan.fits:
            break
    return plan


def agreed(
    decide: Callable[[list[bool]], list[bool]],
    plan: BudgetPlan,
    kinds: Sequence[str],
    forecast_s: Forecast,
) -> BudgetPlan:
    """Rank 0's count of reductions on every rank (each forecast on its own timings: near a
    threshold two could choose differently and issue different collectives)."""
    plans = [plan.written, *reductions(plan.written, kinds)]
    steps = sum(decide([i < plan.steps for i in range(len(plans) - 1)]))
    if steps == plan.steps:
        return plan
    return replace(plan, phases=plans[steps], steps=steps, predicted_s=forecast_s(plans[steps]))


def slices(segments: Sequence[tuple[Segment, float]], start_s: float, budget_s: float) -> Slices:
    """Each segment's end: the time from `start_s` to the budget's end (less END_SHARE) shared in
    proportion to the segments' forecast seconds (none left: each runs one pair of rounds);
    no slices when a forecast is missing."""
    total = sum(s for _, s in segments)
    if not segments or not 0 < total < float("inf"):
        return Slices()
    span_s = max(0.0, budget_s * (1 - END_SHARE) - start_s)
    ends, done = [], 0.0
    for seg, s in segments:
        done += s
        ends.append((seg.part, seg.context, start_s + span_s * done / total))
    return Slices(tuple(ends), GROW_ROUNDS)


def outcome_text(o: BudgetOutcome) -> str:
    """The end of a budgeted run in one line (the log's, and `bench`'s on stderr)."""
    extra = f"; {o.extra_s:.0f} s went to rounds past the plan" if o.extra_s >= 0.5 else ""
    still = f"; L = 1 checks still undecided: {', '.join(o.undecided)}" if o.undecided else ""
    first = f"; the probe's first use of each shape (compilation) took {o.first_use_s:.1f} s"
    return (
        f"budget {o.budget_s:.0f} s: the run took {o.took_s:.0f} s; its plan forecast "
        f"~{o.forecast_s:.0f} s for what took {o.planned_s:.0f} s (forecast error "
        f"{o.error_pct:+.0f}%){extra}{still}{first * (o.first_use_s >= 0.5)}"
    )
