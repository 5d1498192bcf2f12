"""The phase kinds and the passes of a run: typed values every layer looks up, never strings to
compare.

A kind's rules here are what the config, the plan, the fit and the budget read; each higher layer
keeps its own per-kind parts in one registry keyed by `PhaseKind` (the runners:
`mlatui.run.engine.RUNNERS`; the segments: `mlatui.measure.plans.SEGMENTS`; the tables, export
rows and folds: `mlatui.views.dashboard_views`).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class PhaseKind(StrEnum):
    """A phase's kind, as a scenario's `kind = "..."` names it and a PhaseStart records it."""

    SWEEP = "sweep"
    DECODE = "decode"
    TUNE = "tune"
    INDEXER = "indexer"
    MORE = "l1"  # `+` after a run: rounds of L = 1 quads at its undecided contexts

    @property
    def rules(self) -> KindRules:
        return RULES[self]

    @classmethod
    def of(cls, name: str | None) -> PhaseKind | None:
        """The kind a recording names; None for a name no kind has (a newer tool's)."""
        if name not in _NAMES:
            return None
        return cls(name)


@dataclass(frozen=True)
class KindRules:
    """What a kind is, as the scenario's parsing, the plan, the fit and the budget read it."""

    # times the model's step at each width against L = 1 (the L = 1 control is never optional);
    # the decoded text is never read, so its memory is a cache and its widest step
    timed_widths: bool
    # its steps are the whole model's at every width: the run's estimates, the key figure, and
    # the verify steps a decode phase may borrow (`verify_from`) come from it
    model_widths: bool
    decodes: bool  # decodes blocks through the runtime: depths, tokens, verify rounds
    compares_depths: bool  # several depths at a context: a budget puts it at its story's one
    # its L = 1 check is the run's: an undecided one leaves its context out of the verdicts
    run_check: bool
    in_scenarios: bool = True  # a scenario's [[phase]] may name it
    sparse_sites: bool = False  # times a pooled-indexer sparse layer: a model without one skips it
    one_depth: bool = False  # takes exactly one depth (a tune compares several)
    default_reps: int = 9
    min_reps: int = 3


_DECODING = dict(timed_widths=False, model_widths=False, decodes=True, run_check=True)
RULES: dict[PhaseKind, KindRules] = {
    PhaseKind.SWEEP: KindRules(
        timed_widths=True, model_widths=True, decodes=False, compares_depths=False, run_check=True
    ),
    PhaseKind.DECODE: KindRules(
        **_DECODING, compares_depths=False, one_depth=True, default_reps=4, min_reps=2
    ),
    PhaseKind.TUNE: KindRules(**_DECODING, compares_depths=True, default_reps=4, min_reps=2),
    PhaseKind.INDEXER: KindRules(
        timed_widths=True,
        model_widths=False,
        decodes=False,
        compares_depths=False,
        run_check=False,
        sparse_sites=True,
    ),
    PhaseKind.MORE: KindRules(
        timed_widths=True,
        model_widths=False,
        decodes=False,
        compares_depths=False,
        run_check=False,
        in_scenarios=False,
    ),
}
SCENARIO_KINDS = tuple(k for k in PhaseKind if k.rules.in_scenarios)
# a kind a recording names that this tool does not know: no rule holds
UNKNOWN_RULES = KindRules(
    timed_widths=False,
    model_widths=False,
    decodes=False,
    compares_depths=False,
    run_check=False,
    in_scenarios=False,
)


def rules_for(kind: str | None) -> KindRules:
    """The rules of a kind as recorded (a PhaseStart's `kind`); none hold for an unknown one."""
    known = PhaseKind.of(kind)
    return known.rules if known is not None else UNKNOWN_RULES


class Pass(StrEnum):
    """What the two arm slots run in one pass over the phases: stock against patched (a real
    run), or the same variant in both (the two passes of an A/A run). An A/A pass's phases are
    recorded as NAME/aa-stock and NAME/aa-patched (`phase_name`; read back by `of`)."""

    AB = "ab"
    AA_STOCK = "aa-stock"
    AA_PATCHED = "aa-patched"

    @property
    def null(self) -> bool:
        return self is not Pass.AB

    @property
    def variants(self) -> tuple[str, str]:
        """(slot A's variant, slot B's): 'stock' / 'patched'."""
        return {
            Pass.AB: ("stock", "patched"),
            Pass.AA_STOCK: ("stock", "stock"),
            Pass.AA_PATCHED: ("patched", "patched"),
        }[self]

    @property
    def variant(self) -> str | None:
        """The variant both slots ran in an A/A pass; None for A/B."""
        return self.variants[0] if self.null else None

    @property
    def tag(self) -> str:
        """'' for A/B; the suffix an A/A pass's phase names carry."""
        return self.value if self.null else ""

    def phase_name(self, name: str) -> str:
        """The name a phase runs and is recorded under in this pass."""
        return f"{name}{AA_TAG}{self.value.removeprefix('aa-')}" if self.null else name

    @classmethod
    def of_tag(cls, tag: str) -> Pass:
        """The pass a header's `passes` entry names ('' or a tag this tool does not know: A/B)."""
        return next((p for p in cls if p.null and p.value == tag), cls.AB)

    @classmethod
    def of(cls, phase: str) -> Pass:
        """The pass a recorded phase name ran in (the one reader of the names `phase_name`
        writes; a part of a phase, `tune/aa-stock:verify`, ran in its phase's pass)."""
        return _split(phase)[1]

    @staticmethod
    def base_name(phase: str) -> str:
        """The phase's name without its A/A pass (`tune:verify` for `tune/aa-stock:verify`)."""
        base, _, part = _split(phase)
        return base + part


def _split(phase: str) -> tuple[str, Pass, str]:
    """(name, pass, part): `tune/aa-stock:verify` is ('tune', AA_STOCK, ':verify'); a label
    that names the phase, `sweep/aa-stock (pooled)`, reads the same way."""
    base, tag, rest = phase.rpartition(AA_TAG)
    for variant in ("stock", "patched"):
        if tag and rest.startswith(variant):
            return base, Pass(f"aa-{variant}"), rest.removeprefix(variant)
    return phase, Pass.AB, ""


AA_TAG = "/aa-"
_NAMES = frozenset(k.value for k in PhaseKind)


def run_passes(null: bool) -> tuple[Pass, ...]:
    """The passes of a run: A/B, or A/A stock then A/A patched."""
    return (Pass.AA_STOCK, Pass.AA_PATCHED) if null else (Pass.AB,)
