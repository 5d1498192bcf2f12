"""How each phase samples its contexts (pure: no mlx), shared by the engine that runs the plan
and the progress estimator that forecasts it (`mlatui.measure.progress`).

A phase is a sequence of *segments*: one sampler run of one context (a sweep context; a tune
context's synced verify steps, then its decode blocks). A segment is run in rounds; each round
makes a fixed number of timed calls per width, and while the L = 1 check is inconclusive the
sampler adds rounds in pairs up to `max_rounds`. A decode block's width is its setting's place
in `decode_settings` plus one: width 1 is plain decode (the L = 1 control), then every depth of
every draft kind (one kind: width = depth + 1).

The plan of `+`, the rounds a live run measures once it has ended with undecided L = 1
checks: which checks are undecided, the phase that measures them, its name. One rule for the
engine (mlatui.run.phases.more, which contexts it measures) and the screen
(mlatui.views.progress_view.more_offer, what the strip offers and how long it takes), so the
two never disagree.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence

from msgspec import structs

from mlatui.config.phase_kind import Pass, PhaseKind, rules_for
from mlatui.config.scenario import DEFAULT_VERIFY_ROUNDS, Phase
from mlatui.measure.estimates import stable_seed
from mlatui.measure.sampler import L1_TOLERANCE_PCT, SamplerPlan, round_schedule
from mlatui.stream.events import ARMS, PhasePlan, Validity
from mlatui.stream.run_settings import RunSettings
from mlatui.stream.segments import Segment as Segment
from mlatui.stream.segments import Setting as Setting

# The L = 1 control gets three quads per round, spread through it: it is the cheapest step and
# the check needs a tight paired ratio (per-step jitter is ~5-9% on a small CPU).
CONTROL_QUADS = 3
# The L = 1 check of a decode context is decided on the synced verify steps, like the sweep's: an
# A/A of plain-decode blocks through generate_step scattered by 6% (16-token blocks) to 9%
# (48-token) per quad on the idle 2-core CPU (docs/method.md), so a ±2% CI
# from blocks needs 40+ quads per context, while synced steps decide in 6-10 rounds. The blocks'
# own plain-decode ratio is still checked: a CI wholly outside ±2% invalidates the context.
VERIFY_MIN_ROUNDS = DEFAULT_VERIFY_ROUNDS  # a phase's `verify_rounds` (the budget may lower it)
VERIFY_MAX_ROUNDS = 18
PLAIN_QUADS = 2


PLAIN = Setting()


def decode_settings(phase: Phase, kinds: Sequence[str]) -> tuple[Setting, ...]:
    """Plain decode, then every depth of every draft kind in order; settings[i] is width i + 1."""
    return (PLAIN, *(Setting(k, d) for k in kinds for d in sorted(set(phase.depths_for(k)))))


def spec_depths(settings: Sequence[Setting]) -> list[int]:
    """Every speculative depth of the settings (the verify steps measure L = 1 .. max + 1)."""
    return sorted({s.depth for s in settings if s.depth})


def plan_for(
    phase: Phase, widths: tuple[int, ...], seed: int, context: int, settle: bool = True
) -> SamplerPlan:
    return SamplerPlan(
        widths,
        min_rounds=max(2, phase.reps),  # rounds come in mirrored pairs
        max_rounds=max(phase.max_rounds or 3 * phase.reps, phase.reps, 2),
        warmup=phase.warmup,
        control_width=1 if 1 in widths else None,
        control_quads=CONTROL_QUADS if len(widths) > 1 else 1,
        tolerance_pct=L1_TOLERANCE_PCT,
        seed=stable_seed(seed, phase.name, context),
        settle=settle,
    )


def block_plan(
    phase: Phase,
    settings: Sequence[Setting],
    seed: int,
    context: int,
    skip: frozenset[tuple[str, int]] = frozenset(),
) -> SamplerPlan:
    """The decode blocks of one context; `skip`: (arm, width) rejected by bound, never run (a
    width rejected in both arms is left out)."""
    rounds = max(2, phase.reps)
    spec = len(settings) > 1
    widths = tuple(w for w in range(1, len(settings) + 1) if any((a, w) not in skip for a in ARMS))
    # with drafts the verify steps decide the L = 1 check: no rounds are added for the blocks
    return SamplerPlan(
        widths,
        min_rounds=rounds,
        max_rounds=rounds if spec else max(phase.max_rounds or 2 * rounds, rounds),
        warmup=phase.warmup,
        control_width=1,
        control_quads=PLAIN_QUADS,
        tolerance_pct=L1_TOLERANCE_PCT,
        seed=stable_seed(seed, phase.name, "blocks", context),
        settle=False,  # a block is many steps: one arm's carry-over is spread over all of them
        skip=frozenset((a, w) for a, w in skip if w in widths and w != 1),
    )


def verify_widths(depths: Sequence[int]) -> tuple[int, ...]:
    """L = 1 (the control and the plain step) and L = d + 1 of every depth kept."""
    return tuple(sorted({1, *(d + 1 for d in depths)}))


def verify_plan(
    phase: Phase, depths: list[int], seed: int, context: int, settle: bool
) -> SamplerPlan:
    return SamplerPlan(
        verify_widths(depths),
        min_rounds=phase.verify_rounds,
        max_rounds=max(phase.max_rounds or VERIFY_MAX_ROUNDS, phase.verify_rounds),
        warmup=phase.warmup,
        control_width=1,
        control_quads=PLAIN_QUADS,
        tolerance_pct=L1_TOLERANCE_PCT,
        seed=stable_seed(seed, phase.name, "verify", context),
        settle=settle,
    )


def segment(
    part: str,
    context: int,
    plan: SamplerPlan,
    tokens: int = 0,
    opens: bool = True,
    settings: Sequence[Setting] = (),
) -> Segment:
    counts = Counter(
        w
        for w, _ in round_schedule(
            plan.widths, 0, plan.arms, plan.control_width, plan.control_quads, plan.skip
        )
    )
    return Segment(
        part,
        context,
        tuple(sorted(counts.items())),
        plan.first_rounds,
        plan.max_rounds,
        plan.warmup,
        tokens,
        opens,
        tuple((i + 1, st.kind, st.depth) for i, st in enumerate(settings)),
        tuple(sorted(plan.skip)),
    )


def sweep_segments(phase: Phase, settle: bool = True) -> tuple[Segment, ...]:
    widths = tuple(sorted(set(phase.widths)))
    return tuple(
        segment(phase.name, c, plan_for(phase, widths, 0, c, settle)) for c in phase.contexts
    )


def decode_segments(
    phase: Phase, settings: Sequence[Setting], settle: bool = True
) -> tuple[Segment, ...]:
    depths = spec_depths(settings)
    measured = bool(depths) and not phase.verify_from  # else the sweep's rounds serve
    out: list[Segment] = []
    for c in phase.contexts:
        if measured:
            out.append(segment(f"{phase.name}:verify", c, verify_plan(phase, depths, 0, c, settle)))
        plan = block_plan(phase, settings, 0, c)
        seg = segment(phase.name, c, plan, phase.tokens, not measured, settings)
        out.append(structs.replace(seg, bound_rejects=phase.reject_by_bound))
    return tuple(out)


def phase_plans(
    phases: Sequence[Phase], kinds: Sequence[str], settle: bool, passes: Sequence[Pass] = (Pass.AB,)
) -> tuple[PhasePlan, ...]:
    """Every pass's phases as the engine will run them (each pass names them its own way): what
    the header and a budget's plan say of the phases not started yet."""
    out = []
    for run_pass in passes:
        for p in phases:
            named = structs.replace(p, name=run_pass.phase_name(p.name))
            segments = phase_segments(named, kinds, settle)
            out.append(PhasePlan(named.name, p.kind.value, segments))
    return tuple(out)


def phase_segments(phase: Phase, kinds: Sequence[str], settle: bool = True) -> tuple[Segment, ...]:
    """The segments a phase will run, in order; () for kinds the estimator does not model.
    `kinds`: the run's draft kinds (none: plain decode only)."""
    segments = SEGMENTS.get(phase.kind)
    return segments(phase, kinds, settle) if segments is not None else ()


def _decode_kind(phase: Phase, kinds: Sequence[str], settle: bool) -> tuple[Segment, ...]:
    return decode_segments(phase, decode_settings(phase, kinds), settle)


# each kind's segments, for the kinds the estimator models (an indexer phase: its own rate)
SEGMENTS: dict[PhaseKind, Callable[[Phase, Sequence[str], bool], tuple[Segment, ...]]] = {
    PhaseKind.SWEEP: lambda phase, _kinds, settle: sweep_segments(phase, settle),
    PhaseKind.DECODE: _decode_kind,
    PhaseKind.TUNE: _decode_kind,
}


# ---- the plan of `+` -----------------------------------------------------------------------------

# rounds of L = 1 quads one `+` adds at each undecided context (mirrored pairs: each arm leads
# equally often); the check's CI narrows about as the root of its rounds
MORE_ROUNDS = 12


def undecided_checks(
    validity: Mapping[tuple[str, int], Validity], kinds: Mapping[str, str], last_pass: Pass
) -> list[Validity]:
    """The latest checks still inconclusive, of model phases, by context then phase. In an A/A
    run only the last pass's (`last_pass`): its arms are the ones still loaded."""
    return [v for v in run_checks(validity, kinds, last_pass) if v.verdict == "inconclusive"]


def run_checks(
    validity: Mapping[tuple[str, int], Validity], kinds: Mapping[str, str], last_pass: Pass
) -> list[Validity]:
    """The latest checks of model phases of `last_pass`, whatever they read, by context then
    phase: the same list on every rank under mlx.launch (each rank reads its own timings)."""
    out = [
        v
        for (phase, _), v in validity.items()
        if rules_for(kinds.get(phase)).run_check and Pass.of(phase) is last_pass
    ]
    return sorted(out, key=lambda v: (v.context, v.phase))


def more_phase(name: str, context: int, rounds: int = MORE_ROUNDS) -> Phase:
    """The rounds one `+` runs at one context, as a sweep of L = 1 alone: the plan the engine
    samples with, and the shape the forecast costs (a prefill, the warm-up, `rounds` rounds)."""
    return Phase(
        name, PhaseKind.SWEEP, (context,), widths=(1,), reps=rounds, max_rounds=rounds, warmup=1
    )


def more_phase_name(index: int) -> str:
    """`more`, `more-2`, ...: each `+` of a run is a phase of its own."""
    return "more" if index <= 1 else f"more-{index}"


def last_pass(settings: RunSettings) -> Pass:
    """The pass a recorded run ended on (the header's `passes`: A/A tags, or '' for A/B)."""
    return Pass.of_tag(settings.passes[-1]) if settings.null and settings.passes else Pass.AB
