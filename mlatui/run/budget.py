"""Fit a scenario to a time budget (`budget_s`), pure (no mlx): the probe's costs come in as a
forecast function (mlatui.measure.progress). The plan is scaled down in a fixed order that keeps
the story, only while its forecast is over budget; then every segment of the plan (a sampler
run, mlatui.measure.plans) gets a slice of the budget in proportion to its forecast, and its
sampler adds no round past the slice's end (mlatui.measure.sampler.within). A slice the device
needs less of passes its time on to the segments after it; an undecided L = 1 check adds rounds,
and decode blocks grow (narrower speedup CIs), while their slice lasts. So a device slower than
its probe ends on time with fewer rounds, and a faster one spends the rest on what is undecided.

The order of reductions (a slow device with the reference BLAS needs all of them): the weaker
draft kinds (after the first in `[draft] sources`) keep their smallest depth; the tune keeps one
context; the sweep drops its largest contexts down to three (three still show the stock arm's
marginal cost growing), keeping those a tune reads its verify steps from (`verify_from`); decode
blocks of 8 tokens (their length is not what the CIs are made of); the sweep's rounds go to 5 and
the blocks' to 6, then both to 4 (on a noisy 2-core VM 4 sweep rounds left the L = 1 check
undecided in 3 of 3 runs, 7 in 0 of 2); the sweep down to two contexts, then to L = 1, 2 (the key
figure) and the widths a `verify_from` tune needs; the decode phases keep one depth per kind; the
weaker kinds are left out; the tune reads its verify steps from the sweep's rounds and moves to
its smallest context; where the tune still measures its own verify steps, 4 rounds of them.
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
# The forecast ran 2-7% short of the runs it planned on the 2-core CPU with OpenBLAS and -7..+18%
# with the reference BLAS: plan against the budget less 15%; the slices then fill all of it.
FORECAST_MARGIN = 1.15
END_SHARE = 0.03  # of the budget, kept after the last slice: the last estimates, the summary

Forecast = Callable[[tuple[Phase, ...]], float]


@dataclass(frozen=True)
class BudgetPlan:
    budget_s: float
    full_s: float  # the forecast of the phases as written
    predicted_s: float  # the forecast of the phases chosen
    written: tuple[Phase, ...]
    phases: tuple[Phase, ...]
    steps: int = 0  # how many of `reductions` were taken

    @property
    def fits(self) -> bool:
        return self.predicted_s <= self.budget_s

    @property
    def changes(self) -> tuple[str, ...]:
        return changes(self.written, self.phases)

    def describe(self) -> str:
        if not self.changes:
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


def _span(values: int | Sequence[int]) -> str:
    return str(values) if isinstance(values, int) else ", ".join(map(str, values)) or "none"


def changes(written: Sequence[Phase], chosen: Sequence[Phase]) -> tuple[str, ...]:
    """What differs between each phase as written and as chosen, one line per setting."""
    out = []
    for a, b in zip(written, chosen, strict=True):
        said: list[tuple[str, int | Sequence[int], int | Sequence[int]]] = [
            ("contexts", a.contexts, b.contexts),
            ("widths", a.widths, b.widths),
            ("rounds", a.reps, b.reps),
            ("verify rounds", a.verify_rounds, b.verify_rounds),
            ("blocks of", a.tokens, b.tokens),
            ("depths", a.depths, b.depths),
        ]
        kinds = dict.fromkeys(k for k, _ in (*a.kind_depths, *b.kind_depths))
        said += [(f"{k} depths", a.depths_for(k), b.depths_for(k)) for k in kinds]
        for what, x, y in said:
            if x != y:
                tokens = " tokens" if what == "blocks of" else ""
                out.append(f"{b.name}: {what} {_span(x)} -> {_span(y)}{tokens}")
        if b.verify_from and not a.verify_from:
            out.append(f"{b.name}: verify steps from {b.verify_from}'s rounds at the same context")
    return tuple(out)


def _swap(current: tuple[Phase, ...], i: int, p: Phase) -> tuple[Phase, ...]:
    return (*current[:i], p, *current[i + 1 :])


def _depths(p: Phase, kind: str, depths: tuple[int, ...]) -> Phase:
    if not kind:
        return structs.replace(p, depths=depths)
    return structs.replace(
        p, kind_depths=(*(kd for kd in p.kind_depths if kd[0] != kind), (kind, depths))
    )


def _kept_depths(p: Phase, kinds: Sequence[str]) -> list[int]:
    return sorted({d for k in (kinds or ("",)) for d in p.depths_for(k)})


def _sweep_contexts(
    current: tuple[Phase, ...], written: tuple[Phase, ...], n: int
) -> Iterator[tuple[Phase, ...]]:
    """Each sweep one context fewer at a time down to `n` of its contexts as written: those a
    tune reads its verify steps from (it would have none without them), then the smallest."""
    for i, sweep in enumerate(current):
        if not sweep.kind.rules.model_widths:
            continue
        for k in range(len(sweep.contexts), n - 1, -1):  # the same count first: kept anew
            kept = {c for p in current if p.verify_from == sweep.name for c in p.contexts}
            kept &= set(written[i].contexts)
            rest = sorted(set(written[i].contexts) - kept)
            chosen = kept | set(rest[: max(0, k - len(kept))])
            contexts = tuple(c for c in written[i].contexts if c in chosen)
            if contexts != current[i].contexts:
                current = _swap(current, i, structs.replace(current[i], contexts=contexts))
                yield current


def _key_widths(current: tuple[Phase, ...], kinds: Sequence[str]) -> Iterator[tuple[Phase, ...]]:
    for i, p in enumerate(current):
        if p.kind.rules.model_widths:
            keep = set(KEY_WIDTHS)
            for t in current:
                if t.verify_from == p.name:
                    keep |= set(verify_widths(_kept_depths(t, kinds)))
            widths = tuple(w for w in p.widths if w in keep)
            if widths != p.widths:
                current = _swap(current, i, structs.replace(p, widths=widths))
                yield current


def _each(
    current: tuple[Phase, ...], change: Callable[[Phase], Phase]
) -> Iterator[tuple[Phase, ...]]:
    """`change` applied to one phase at a time (a phase it leaves alone is not a step)."""
    for i, p in enumerate(current):
        q = change(p)
        if q != p:
            current = _swap(current, i, q)
            yield current


def _smallest_depth(kind: str, p: Phase) -> Phase:
    depths = sorted(set(p.depths_for(kind)))
    return _depths(p, kind, tuple(depths[:1])) if p.kind.rules.decodes and depths else p


def _left_out(kind: str, p: Phase) -> Phase:
    return _depths(p, kind, ()) if p.kind.rules.decodes and p.depths_for(kind) else p


def _one_tune_context(p: Phase) -> Phase:
    return structs.replace(p, contexts=(min(p.contexts),)) if p.kind.rules.compares_depths else p


def _short_blocks(p: Phase) -> Phase:
    return structs.replace(p, tokens=min(p.tokens, MIN_BLOCK_TOKENS)) if p.kind.rules.decodes else p


def _fewer_rounds(sweep_reps: int, block_reps: int, p: Phase) -> Phase:
    if p.kind.rules.model_widths:
        return structs.replace(p, reps=min(p.reps, sweep_reps))
    return structs.replace(p, reps=min(p.reps, block_reps)) if p.kind.rules.decodes else p


def _fewer_depths(current: tuple[Phase, ...], kinds: Sequence[str]) -> Iterator[tuple[Phase, ...]]:
    """Each decode phase's deepest depth of each kind dropped, one at a time, down to one."""
    for i in range(len(current)):
        for kind in (kinds or ("",)) if current[i].kind.rules.decodes else ():
            depths = tuple(sorted(set(current[i].depths_for(kind))))
            for n in range(len(depths) - 1, 0, -1):
                current = _swap(current, i, _depths(current[i], kind, depths[:n]))
                yield current


def reductions(phases: tuple[Phase, ...], kinds: Sequence[str] = ()) -> Iterator[tuple[Phase, ...]]:
    """Successively smaller plans, each a step of the module's order. `kinds`: the run's draft
    kinds, strongest first."""
    current, weaker = phases, tuple(reversed(kinds[1:]))
    steps: list[Callable[[tuple[Phase, ...]], Iterator[tuple[Phase, ...]]]] = [
        *(partial(_each, change=partial(_smallest_depth, k)) for k in weaker),
        partial(_each, change=_one_tune_context),
        partial(_sweep_contexts, written=phases, n=3),
        partial(_each, change=_short_blocks),
        partial(_each, change=partial(_fewer_rounds, 5, 6)),
        partial(_each, change=partial(_fewer_rounds, 4, 4)),
        partial(_sweep_contexts, written=phases, n=2),
        partial(_key_widths, kinds=kinds),
        partial(_fewer_depths, kinds=kinds),
        partial(_key_widths, kinds=kinds),  # what the depths cut no longer need
        *(partial(_each, change=partial(_left_out, k)) for k in weaker),
        partial(_reuse_sweep, written=phases, kinds=kinds),
    ]
    for step in steps:
        plans = list(step(current))
        yield from plans
        current = plans[-1] if plans else current


def _reuse_sweep(
    current: tuple[Phase, ...], written: tuple[Phase, ...], kinds: Sequence[str]
) -> Iterator[tuple[Phase, ...]]:
    """The tune's verify steps from a sweep that runs before it, at its smallest context."""
    at = next((j for j, p in enumerate(current) if p.kind.rules.model_widths), None)
    for i, p in enumerate(current):
        if at is None or i < at or not p.kind.rules.compares_depths:
            continue
        sweep = current[at]
        need = set(verify_widths(_kept_depths(p, kinds)))
        reusable = set(p.contexts) <= set(sweep.contexts) and need <= {1, *sweep.widths}
        if not p.verify_from and reusable:
            p = structs.replace(p, verify_from=sweep.name)
            current = _swap(current, i, p)
            yield current
        if min(sweep.contexts) < min(p.contexts):
            p = structs.replace(p, contexts=(min(sweep.contexts),))
            current = _swap(current, i, p)
            yield current
            n = len(current[at].contexts)  # the context the tune left is the sweep's to drop
            plans = list(_sweep_contexts(current, written, n))
            yield from plans
            current = plans[-1] if plans else current
        if not p.verify_from and p.verify_rounds > 4:
            current = _swap(current, i, structs.replace(p, verify_rounds=4))
            yield current


def fit_to_budget(
    phases: tuple[Phase, ...], budget_s: float, forecast_s: Forecast, kinds: Sequence[str] = ()
) -> BudgetPlan:
    """The first plan in `reductions` order whose forecast fits `budget_s` (the phases as
    written if they fit; the smallest plan if none does)."""
    full = forecast_s(phases)
    plan = BudgetPlan(budget_s, full, full, phases, phases)
    if plan.fits:
        return plan
    for steps, chosen in enumerate(reductions(phases, kinds), start=1):
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
    """Rank 0's plan on every rank (each rank forecast on its own timings; near a threshold
    two could choose differently and issue different collectives): its count of reductions."""
    plans = list(reductions(plan.written, kinds))
    steps = sum(decide([i < plan.steps for i in range(len(plans))]))
    if steps == plan.steps:
        return plan
    chosen = plans[steps - 1] if steps else plan.written
    return replace(plan, phases=chosen, steps=steps, predicted_s=forecast_s(chosen))


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
    first = (
        f"; the probe's first use of each shape (compilation) took {o.first_use_s:.1f} s"
        if o.first_use_s >= 0.5
        else ""
    )
    return (
        f"budget {o.budget_s:.0f} s: the run took {o.took_s:.0f} s; its plan forecast "
        f"~{o.forecast_s:.0f} s for what took {o.planned_s:.0f} s (forecast error "
        f"{o.error_pct:+.0f}%){extra}{still}{first}"
    )
