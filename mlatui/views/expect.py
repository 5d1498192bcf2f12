"""`--expect`: an assertion on a measured ratio, checked against its 95% CI, for a CI job to
gate on (pure Python).

Grammar (one assertion; `--expect` may be given several times):

    RATIO@L=WIDTH,CONTEXT OP BOUND        e.g.  stock/patched@L=2,32K >= 5

- RATIO: `stock/patched` (the sweep's paired ratio) or `patched/stock` (its inverse);
- WIDTH: the query width L of the sweep row; CONTEXT: the cache length, an integer with an
  optional `K` (x 1024): `32K` = 32768;
- OP: `>=`, `>`, `<=` or `<`; BOUND: a positive number.

It **passes** when the whole CI satisfies it, **fails** when the whole CI violates it, and is
**undecided** otherwise: the CI straddles the bound, there is no CI, the context's L = 1 check did
not pass (its figures are left out of every verdict), or the run has no such row. The first
sweep phase (in run order) that measured that context and width is the one checked.
Exit status of the command: 1 when any assertion failed, else 3 when any is undecided, else 0.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

from mlatui.views.summary import Check, RunSummary, SweepRow
from mlatui.views.units import Ci, ratio_text

GRAMMAR = "RATIO@L=WIDTH,CONTEXT OP BOUND, e.g. 'stock/patched@L=2,32K >= 5'"
RATIOS = ("stock/patched", "patched/stock")
_PATTERN = re.compile(
    r"^\s*(?P<ratio>[a-z]+/[a-z]+)\s*@\s*L\s*=\s*(?P<width>\d+)\s*,\s*(?P<context>\d+)(?P<k>[kK]?)"
    r"\s*(?P<op>>=|<=|>|<)\s*(?P<bound>[0-9]*\.?[0-9]+(?:[eE][-+]?\d+)?)\s*$"
)
VALID_CHECKS = (Check.VALID, Check.POOLED)


class Outcome(enum.StrEnum):
    PASSED = "passed"
    FAILED = "failed"
    UNDECIDED = "undecided"

    @property
    def exit_status(self) -> int:
        return {"passed": 0, "failed": 1, "undecided": 3}[self.value]


@dataclass(frozen=True)
class Expectation:
    text: str  # as given
    ratio: str
    width: int
    context: int
    op: str
    bound: float


@dataclass(frozen=True)
class Result:
    expectation: Expectation
    outcome: Outcome
    measured: Ci | None
    why: str  # what decided it

    @property
    def line(self) -> str:
        measured = f"measured {ratio_text(self.measured)}" if self.measured else "not measured"
        shown = "FAILED" if self.outcome is Outcome.FAILED else self.outcome.value
        return f"mlatui: expect {self.expectation.text}: {shown}, {measured} ({self.why})"


def parse(text: str) -> Expectation:
    """ValueError (one line, naming the grammar) for anything that is not an assertion."""
    found = _PATTERN.match(text)
    if found is None:
        raise ValueError(f"{text!r}: expected {GRAMMAR}")
    if found["ratio"] not in RATIOS:
        raise ValueError(f"{text!r}: the ratio is one of {', '.join(RATIOS)}")
    width, context, bound = int(found["width"]), int(found["context"]), float(found["bound"])
    context *= 1024 if found["k"] else 1
    if width < 1 or context < 1 or not bound > 0:
        raise ValueError(f"{text!r}: width, context and bound must be positive")
    return Expectation(" ".join(text.split()), found["ratio"], width, context, found["op"], bound)


def _row(s: RunSummary, e: Expectation) -> SweepRow | None:
    for phase in s.phases:
        for row in phase.sweep:
            if row.context == e.context and row.width == e.width and row.ratio is not None:
                return row
    return None


def _oriented(ci: Ci, ratio: str) -> Ci:
    if ratio == "stock/patched":
        return ci
    if ci.bounds is None:
        return Ci(1 / ci.median)
    low, high = ci.bounds
    return Ci(1 / ci.median, 1 / high, 1 / low)


def _holds(x: float, op: str, bound: float) -> bool:
    return {">=": x >= bound, ">": x > bound, "<=": x <= bound, "<": x < bound}[op]


def check(s: RunSummary, e: Expectation) -> Result:
    row = _row(s, e)
    if row is None or row.ratio is None:
        return Result(e, Outcome.UNDECIDED, None, "the run has no such sweep row")
    ci = _oriented(row.ratio, e.ratio)
    if row.check not in VALID_CHECKS:
        why = f"the L = 1 check at {e.context} is {row.check.value}: left out of verdicts"
        return Result(e, Outcome.UNDECIDED, ci, why)
    if not ci.has_ci:
        return Result(e, Outcome.UNDECIDED, ci, "no CI")
    low, high = ci.bounds or (ci.median, ci.median)
    if _holds(low, e.op, e.bound) and _holds(high, e.op, e.bound):
        return Result(e, Outcome.PASSED, ci, f"the whole CI is {e.op} {e.bound:g}")
    if not _holds(low, e.op, e.bound) and not _holds(high, e.op, e.bound):
        side = "below" if e.op in (">=", ">") else "above"
        return Result(e, Outcome.FAILED, ci, f"the whole CI is {side} {e.bound:g}")
    return Result(e, Outcome.UNDECIDED, ci, f"the CI straddles {e.bound:g}")


def exit_status(results: list[Result]) -> int:
    """1 when any failed, else 3 when any is undecided, else 0."""
    outcomes = {r.outcome for r in results}
    for worst in (Outcome.FAILED, Outcome.UNDECIDED):
        if worst in outcomes:
            return worst.exit_status
    return 0
