"""Fit a scenario to a time budget, pure (no mlx; costs come in as a forecast).

The contexts come first: those that show the scenario's `[story]` on this device (the stock
arm's verify step a clear multiple of its plain step, the patched arm's flat: on the 2-core CPU
from 1-2K tokens, on the H200, whose plain step is ~3.3 ms of mostly fixed cost, only past
24K), none past the model's positions, the tune inside its trained windows. Then the plan is
scaled down in a fixed order that keeps the story, only while its forecast is over budget, and
each sampler run of the plan gets a slice of the budget in proportion to its forecast: its
sampler adds no round past the slice's end (mlatui.measure.sampler.within), so a device slower
than its probe ends on time with fewer rounds and a faster one spends the rest on what is
undecided. The order (a slow device with the reference BLAS needs all of it): the weaker draft
kinds keep their smallest depth; one tune context; the sweep down to three contexts (still a
growth), keeping those a `verify_from` tune reads; blocks of 8 tokens; rounds 5 (blocks 6), then
4 (4 sweep rounds left the L = 1 check undecided in 3 of 3 runs on a noisy 2-core VM, 7 in 0 of
2); two sweep contexts; the key figure's widths; one depth per kind; the weaker kinds left out;
the tune's verify steps from the sweep's rounds at its smallest context, or 4 rounds.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial

from msgspec import structs

from mlatui.config.scenario import Phase
from mlatui.config.story import Story
from mlatui.measure.plans import Segment, verify_widths
from mlatui.run.phases.results import Slices
from mlatui.stream.events import ARMS, BudgetOutcome
from mlatui.stream.phrases import ci_text

KEY_WIDTHS = (1, 2)  # the key figure: L = 2 - L = 1
MIN_BLOCK_TOKENS = 8
GROW_ROUNDS = 64  # the most rounds a segment runs under a budget (its slice ends it sooner)
# The forecast ran 2-7% short on the 2-core CPU with OpenBLAS, -7..+18% with the reference BLAS:
# plan against the budget less 15%; the slices then fill all of it.
FORECAST_MARGIN = 1.15
END_SHARE = 0.03  # of the budget, kept after the last slice: the last estimates, the summary
# an L = 2 step read under this share of its L = 1 step is a drift (the loaded 2-core CPU's probe
# once read the stock arm's at 0.7x), not the device's cost
NOISE_FLOOR = 0.9
CHANGED = (  # (what the log calls it, the Phase field)
    ("contexts", "contexts"),
    ("widths", "widths"),
    ("rounds", "reps"),
    ("verify rounds", "verify_rounds"),
    ("blocks of", "tokens"),
    ("depths", "depths"),
)

Plan = tuple[Phase, ...]
Forecast = Callable[[Plan], float]
Decide = Callable[[list[bool]], list[bool]]  # rank 0's yes/no per item, on every rank
Change = Callable[[Plan, int], Phase]  # the plan's phase i, changed (or as it is)
StepMs = Callable[[str, int, int], float | None]  # (arm, context, width) -> ms, forecast


@dataclass(frozen=True)
class BudgetPlan:
    budget_s: float
    full_s: float  # the forecast of the phases as written
    predicted_s: float  # the forecast of the phases chosen
    written: Plan
    phases: Plan

    @property
    def fits(self) -> bool:
        return self.predicted_s <= self.budget_s

    @property
    def changes(self) -> tuple[str, ...]:
        return changes(self.written, self.phases)

    def describe(self, what: str = "") -> str:
        """The plan in one line; `what` is planned (default: the scenario as written)."""
        what, head = what or "the scenario as written", f"budget {self.budget_s:.0f} s: "
        if not self.changes:  # as written, or nothing left to scale down
            fits = "fits" if self.fits else "is over budget with nothing left to scale down"
            return head + f"{what} {fits} (forecast ~{self.full_s:.0f} s on this device)"
        verdict = "fits" if self.fits else "still over budget: this device is slow"
        return (
            head + f"{what} would take ~{self.full_s:.0f} s on this device, so the plan was "
            f"scaled down to ~{self.predicted_s:.0f} s ({verdict}): "
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
        kinds = dict.fromkeys((*a.kind_depths, *b.kind_depths))
        said += [(f"{k} depths", a.depths_for(k), b.depths_for(k)) for k in kinds]
        out += [
            f"{b.name}: {what} {_span(x)} -> {_span(y)}" + " tokens" * (what == "blocks of")
            for what, x, y in said
            if x != y
        ]
        if b.verify_from and not a.verify_from:
            out.append(f"{b.name}: verify steps from {b.verify_from}'s rounds at the same context")
    return tuple(out)


# ---- the order of reductions ---------------------------------------------------------------


def _depths(p: Phase, kind: str, depths: Sequence[int]) -> Phase:
    if not kind:
        return structs.replace(p, depths=tuple(depths))
    kept = {k: d for k, d in p.kind_depths.items() if k != kind}
    return structs.replace(p, kind_depths={**kept, kind: tuple(depths)})


def _kept_depths(p: Phase, kinds: Sequence[str]) -> list[int]:
    return sorted({d for k in (kinds or ("",)) for d in p.depths_for(k)})


def _sweep_before(plan: Plan, i: int) -> Phase | None:
    return next((p for p in plan[:i] if p.kind.rules.model_widths), None)


def _fewer_contexts(written: Plan, n: int | None, plan: Plan, i: int) -> Phase:
    """A sweep one context fewer (at least `n` of those written; None: as many as it has): it
    keeps those a tune reads its verify steps from, then the smallest; at the same count first,
    when that set moved."""
    p, contexts = plan[i], written[i].contexts
    if not p.kind.rules.model_widths:
        return p
    kept = {c for t in plan if t.verify_from == p.name for c in t.contexts} & set(contexts)
    rest = sorted(set(contexts) - kept)
    for k in (len(p.contexts), len(p.contexts) - 1):
        chosen = kept | set(rest[: max(0, k - len(kept))])
        if (
            k >= (n or len(p.contexts))
            and (picked := tuple(c for c in contexts if c in chosen)) != p.contexts
        ):
            return structs.replace(p, contexts=picked)
    return p


def _key_widths(kinds: Sequence[str], plan: Plan, i: int) -> Phase:
    p, keep = plan[i], set(KEY_WIDTHS)
    if not p.kind.rules.model_widths:
        return p
    for t in (t for t in plan if t.verify_from == p.name):
        keep |= set(verify_widths(_kept_depths(t, kinds)))
    return structs.replace(p, widths=tuple(w for w in p.widths if w in keep))


def _smallest_depth(kind: str, plan: Plan, i: int) -> Phase:
    p, depths = plan[i], sorted(set(plan[i].depths_for(kind)))
    return _depths(p, kind, depths[:1]) if p.kind.rules.decodes and depths else p


def _left_out(kind: str, plan: Plan, i: int) -> Phase:
    p = plan[i]
    return _depths(p, kind, ()) if p.kind.rules.decodes and p.depths_for(kind) else p


def _drop_deepest(kinds: Sequence[str], plan: Plan, i: int) -> Phase:
    p = plan[i]
    for kind in (kinds or ("",)) if p.kind.rules.decodes else ():
        if len(depths := sorted(set(p.depths_for(kind)))) > 1:
            return _depths(p, kind, depths[:-1])
    return p


def _one_tune_context(plan: Plan, i: int) -> Phase:
    p = plan[i]
    return structs.replace(p, contexts=(min(p.contexts),)) if p.kind.rules.compares_depths else p


def _short_blocks(plan: Plan, i: int) -> Phase:
    p = plan[i]
    return structs.replace(p, tokens=min(p.tokens, MIN_BLOCK_TOKENS)) if p.kind.rules.decodes else p


def _fewer_rounds(sweep_reps: int, block_reps: int, plan: Plan, i: int) -> Phase:
    p = plan[i]
    reps = sweep_reps if p.kind.rules.model_widths else block_reps if p.kind.rules.decodes else 0
    return structs.replace(p, reps=min(p.reps, reps)) if reps else p


def _verify_from_sweep(kinds: Sequence[str], plan: Plan, i: int) -> Phase:
    """A tune's verify steps from a sweep before it that measured its contexts and widths."""
    p, sweep = plan[i], _sweep_before(plan, i)
    if sweep is None or p.verify_from or not p.kind.rules.compares_depths:
        return p
    need = set(verify_widths(_kept_depths(p, kinds)))
    reusable = set(p.contexts) <= set(sweep.contexts) and need <= {1, *sweep.widths}
    return structs.replace(p, verify_from=sweep.name) if reusable else p


def _tune_at_sweeps_smallest(plan: Plan, i: int) -> Phase:
    p, sweep = plan[i], _sweep_before(plan, i)
    if sweep is None or not p.kind.rules.compares_depths or min(sweep.contexts) >= min(p.contexts):
        return p
    return structs.replace(p, contexts=(min(sweep.contexts),))


def _four_verify_rounds(plan: Plan, i: int) -> Phase:
    p = plan[i]
    if not p.kind.rules.compares_depths or p.verify_from or p.verify_rounds <= 4:
        return p
    return structs.replace(p, verify_rounds=4)


def reductions(phases: Plan, kinds: Sequence[str] = ()) -> Iterator[Plan]:
    """Successively smaller plans, each one change of the module's order, each change made on
    each phase in turn while it changes it. `kinds`: the run's draft kinds, strongest first."""
    weaker = tuple(reversed(kinds[1:]))
    steps: list[Change] = [
        *(partial(_smallest_depth, k) for k in weaker),
        _one_tune_context,
        partial(_fewer_contexts, phases, 3),
        _short_blocks,
        partial(_fewer_rounds, 5, 6),
        partial(_fewer_rounds, 4, 4),
        partial(_fewer_contexts, phases, 2),
        partial(_key_widths, kinds),
        partial(_drop_deepest, kinds),
        partial(_key_widths, kinds),  # what the depths cut no longer need
        *(partial(_left_out, k) for k in weaker),
        partial(_verify_from_sweep, kinds),
        _tune_at_sweeps_smallest,
        partial(_fewer_contexts, phases, None),  # the context the tune left: the sweep's to drop
        _four_verify_rounds,
    ]
    plan = phases
    for change in steps:
        for i in range(len(plan)):
            while (p := change(plan, i)) != plan[i]:
                plan = (*plan[:i], p, *plan[i + 1 :])
                yield plan


def fit_to_budget(
    phases: Plan,
    budget_s: float,
    forecast_s: Forecast,
    kinds: Sequence[str] = (),
    decide: Decide = list,
) -> BudgetPlan:
    """The first plan in `reductions` order whose forecast fits `budget_s` (the phases as written
    if they fit; the smallest plan if none does), rank 0's (`decide`) on every rank."""
    plans = [phases, *reductions(phases, kinds)]
    k = next((i for i, p in enumerate(plans) if forecast_s(p) <= budget_s), len(plans) - 1)
    k = sum(decide([i < k for i in range(len(plans) - 1)]))
    return BudgetPlan(budget_s, forecast_s(phases), forecast_s(plans[k]), phases, plans[k])


# ---- the contexts that show the story ------------------------------------------------------


@dataclass(frozen=True)
class Limits:
    """The model's positions, and the tune's bound: the windows its model was trained on, or a
    draft model's fewer positions (None: not said)."""

    max_positions: int | None = None
    trained_window: int | None = None

    def allowed(self, story: Story, phases: Sequence[Phase]) -> tuple[tuple[int, ...], ...]:
        """(sweep, tune) candidates: the widest step, and a block's last position (context +
        tokens + the deepest draft), inside the bounds."""
        widest = max((max(p.widths) for p in phases if p.kind.rules.model_widths), default=1)
        tunes = [p for p in phases if p.kind.rules.compares_depths]
        reach = max((p.tokens + max(p.depths, default=0) + 1 for p in tunes), default=1)
        return tuple(
            tuple(c for c in story.contexts if top is None or c + reach <= top)
            for reach, top in (
                (widest, self.max_positions),
                (
                    reach,
                    min((b for b in (self.max_positions, self.trained_window) if b), default=None),
                ),
            )
        )

    def note(self, story: Story) -> str:
        parts = []
        if self.max_positions and story.contexts[-1] > self.max_positions:
            parts.append(f"none beyond the model's max positions ({self.max_positions})")
        if self.trained_window and story.contexts[-1] > self.trained_window:
            parts.append(
                f"the tune inside the {self.trained_window} tokens its model and drafts were "
                "trained and measured at"
            )
        said = "; ".join(parts)
        return said[:1].upper() + said[1:]


def longest_context(story: Story | None, phases: Sequence[Phase], limits: Limits) -> int | None:
    """The longest context a plan may pick (the probe's ladder goes up to it); None: no story."""
    allowed = limits.allowed(story, phases)[0] if story else ()
    return allowed[-1] if allowed else None


def with_contexts(phases: Plan, tune: int | None, sweep: tuple[int, ...]) -> Plan:
    """The phases with the (first) sweep at `sweep` and every tune at `tune`."""
    first = next((p for p in phases if p.kind.rules.model_widths), None)
    return tuple(
        structs.replace(p, contexts=sweep)
        if sweep and p is first
        else structs.replace(p, contexts=(tune,))
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
    phases: Plan,
    story: Story,
    step_ms: StepMs,
    fits: Callable[[Plan], bool],
    limits: Limits = Limits(),
    decide: Decide = list,
) -> tuple[Plan, str]:
    """The phases at the contexts that show the story on this device (rank 0's choice on every
    rank), and the note that says why. `fits(phases)`: whether a plan of those phases fits the
    budget with the sweep's contexts kept."""
    sweeps, tunes = limits.allowed(story, phases)
    bounds, n = limits.note(story), story.sweep_contexts
    if not sweeps:
        return phases, bounds

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
    k = len(story.contexts)  # rank 0's choice, as yes/no per candidate
    flags = decide([c == tune for c in story.contexts] + [c <= top for c in story.contexts])
    tune = next((c for c, yes in zip(story.contexts, flags[:k], strict=True) if yes), None)
    top = max(c for c, yes in zip(story.contexts, flags[k:], strict=True) if yes)
    sweep = window(sweeps, top, tune, n)
    said = [f"sweep {', '.join(map(str, sweep))}"] + ([f"tune {tune}"] if tune else [])
    note = f"contexts for this device: {'; '.join(said)}" + (f". The tune: {reason}" * bool(reason))
    if top < sweeps[-1]:
        note += f". The sweep stops at {top}: longer ones would not fit the budget"
    return with_contexts(phases, tune, sweep), note + (f". {bounds}" if bounds else "")


def _tune_context(story: Story, step_ms: StepMs, tunes: Sequence[int]) -> tuple[int | None, str]:
    """The smallest candidate where the stock multiple and the patched flatness hold; else the
    one where the stock multiple is largest against the patched one. `tunes`: the candidates
    whose tune fits the budget (the reference BLAS took the largest, 24K, and planned 666 s)."""
    seen: list[tuple[int, float, float, str]] = []
    for c in tunes:
        steps = [(step_ms(arm, c, 1), step_ms(arm, c, 2)) for arm in ARMS]
        if any(not one or two is None for one, two in steps):
            continue  # no step costs here
        stock, patched = (two / one for one, two in steps)  # type: ignore[operator]
        if min(stock, patched) < NOISE_FLOOR:
            continue  # a drift's reading
        # a single forecast has no CI: the note gives the ms, not their ratio
        said = "; ".join(
            f"{arm} L = 2 {ci_text(two, None, None, 1)} vs L = 1 {ci_text(one, None, None, 1)} ms"
            for arm, (one, two) in zip(ARMS, steps, strict=True)
        )
        seen.append((c, stock, patched, said))
        multiple, flat = story.stock_verify_multiple, story.patched_verify_flat
        if stock >= multiple and patched <= flat:
            return c, (
                f"at {c} the probe forecasts {said}: the stock arm's L = 2 step at least "
                f"{multiple:g}× its L = 1 step and the patched arm's within {flat:g}×, the "
                "smallest context where both hold"
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


# ---- the slices and the end ----------------------------------------------------------------


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
        f"budget {o.budget_s:.0f} s: the run took {o.took_s:.0f} s; its plan forecast the "
        f"phases at ~{o.forecast_s - o.plan_t:.0f} s and they took {o.planned_s - o.plan_t:.0f} s "
        f"(forecast error {o.error_pct:+.0f}%){extra}{still}{first * (o.first_use_s >= 0.5)}"
    )
