"""The run's summary as one JSON document for machines (`bench --format json`, `replay --dump
--format json`, the `e` export's .json): a rendering of mlatui.views.summary.RunSummary, field
for field, typed by the msgspec Structs below (the schema: tests/test_summary_doc.py decodes every
document into `RunDocument`, so a field that goes missing fails there). Figures keep their full
precision (`median`, `low`, `high`) beside the text the markdown prints (`text`, one formatter
per unit, mlatui.views.units). Pure Python.
"""

from __future__ import annotations

import math
from typing import Any

import msgspec

from mlatui.stream.event_base import Interval
from mlatui.stream.events import ARMS, RunHeader
from mlatui.views.dashboard_views import Table
from mlatui.views.run_meta import header_fields
from mlatui.views.summary import PhaseFigures, RunSummary
from mlatui.views.units import Ci, ci_text
from mlatui.views.verdict_strip import parts_line

SCHEMA_VERSION = 1


class Figure(msgspec.Struct, forbid_unknown_fields=True):
    """A median with its 95% CI (`low`/`high` None where there is none) and its printed text."""

    median: float
    low: float | None
    high: float | None
    text: str


class CheckDoc(msgspec.Struct, forbid_unknown_fields=True):
    """One (phase, context)'s L = 1 check: `check` is valid | valid (pooled) | invalid |
    inconclusive | pending; `ratio` the paired stock/patched ratio at L = 1."""

    phase: str
    context: int
    check: str
    ratio: Figure | None
    rounds: int
    stock_l1_ms: float | None
    patched_l1_ms: float | None


class PooledDoc(msgspec.Struct, forbid_unknown_fields=True):
    phase: str
    contexts: list[int]
    ratio: Figure | None
    outcome: str
    quads: int
    rounds: int


class MarginalDoc(msgspec.Struct, forbid_unknown_fields=True):
    """L = 2 − L = 1 per arm (ms) at one sweep context."""

    phase: str
    context: int
    stock_ms: Figure | None
    patched_ms: Figure | None
    check: str


class SweepDoc(msgspec.Struct, forbid_unknown_fields=True):
    """One sweep context and width: each arm's step (ms), the paired `ratio` (stock/patched),
    the patched step over its L = 1 step, GB/s and MBU per arm (absent without step bytes)."""

    phase: str
    context: int
    width: int
    stock_ms: Figure | None
    patched_ms: Figure | None
    ratio: Figure | None
    patched_vs_l1: Figure | None
    rounds: int | None
    drifting_rounds: int
    check: str
    gb_s: dict[str, Figure]
    mbu: dict[str, Figure]
    mbu_most: dict[str, Figure]


class DecodeDoc(msgspec.Struct, forbid_unknown_fields=True):
    """One arm at one setting: depth 0 is plain decode; `vs_plain` its paired speedup; None
    figures where a bound rejected the setting before it ran (`rejected_by_bound`: at most)."""

    phase: str
    context: int
    arm: str
    draft: str
    depth: int
    tok_s: Figure | None
    vs_plain: Figure | None
    rejected_by_bound: float | None
    rounds: int
    check: str


class PhaseDoc(msgspec.Struct, forbid_unknown_fields=True):
    """A phase; a kind shown by its own rows (the indexer's parts) carries them in `rows`."""

    name: str
    kind: str
    table: str
    rows: list[dict[str, Any]]


class ExpectationDoc(msgspec.Struct, forbid_unknown_fields=True):
    """An `--expect` assertion, checked against the CI it names (mlatui.views.expect)."""

    expect: str
    outcome: str  # passed | failed | undecided
    measured: Figure | None
    line: str


class RunDocument(msgspec.Struct, forbid_unknown_fields=True):
    schema_version: int
    status: str
    status_text: str
    verdict: str
    header: dict[str, Any] | None  # the recording's header record, as recorded
    header_fields: dict[str, str]  # what the markdown's header lines say, by stable key
    checks: list[CheckDoc]
    pooled: list[PooledDoc]
    tolerance_pct: float
    marginal: list[MarginalDoc]
    sweep: list[SweepDoc]
    decode: list[DecodeDoc]
    phases: list[PhaseDoc]
    left_out: list[int]
    synthetic_acceptance: bool
    expectations: list[ExpectationDoc]


def figure(x: Ci | Interval | None, unit: str = "") -> Figure | None:
    if x is None:
        return None
    ci = Ci.of(x) if isinstance(x, Interval) else x
    if not math.isfinite(ci.median):  # nothing measured
        return None
    text = ci_text(ci, unit)
    low, high = (ci.low, ci.high) if ci.has_ci else (None, None)
    return Figure(ci.median, low, high, text)


def _finite(x: float | None) -> float | None:
    return x if x is not None and math.isfinite(x) else None


def _by_arm(figures: dict[str, Ci], unit: str = "") -> dict[str, Figure]:
    return {arm: f for arm in ARMS if arm in figures and (f := figure(figures[arm], unit))}


def _sweep(phase: PhaseFigures) -> list[SweepDoc]:
    return [
        SweepDoc(
            phase.name,
            r.context,
            r.width,
            figure(r.stock),
            figure(r.patched),
            figure(r.ratio, "×"),
            figure(r.vs_l1, "×"),
            r.rounds,
            r.drifting,
            r.check.value,
            _by_arm(r.gb_s),
            _by_arm(r.mbu),
            _by_arm(r.mbu_most),
        )
        for r in phase.sweep
    ]


def _decode(phase: PhaseFigures) -> list[DecodeDoc]:
    out = []
    for row in phase.decode:
        r = row.result
        bound = r.bound.value if r.bound is not None and r.tok_s is None else None
        out.append(
            DecodeDoc(
                phase.name,
                r.context,
                r.arm,
                r.draft_kind,
                r.depth,
                figure(r.tok_s),
                figure(r.vs_plain, "×") if r.depth else None,
                bound,
                r.rounds,
                row.check.value,
            )
        )
    return out


def _phase(phase: PhaseFigures) -> PhaseDoc:
    own = phase.table not in (Table.SWEEP, Table.DECODE) and phase.summary is not None
    rows = [msgspec.to_builtins(r) for r in phase.summary.rows] if own and phase.summary else []
    return PhaseDoc(phase.name, phase.kind, phase.table.value, rows)


def _header(h: RunHeader) -> dict[str, Any]:
    """The header as recorded, but its phase plans: each phase's segments, what the progress
    fold forecasts from, not a figure of the run."""
    return {k: v for k, v in h.to_dict().items() if k != "phase_plans"}


def document(s: RunSummary, expectations: list[ExpectationDoc] | None = None) -> RunDocument:
    """The summary as the document; `expectations`: the `--expect` results checked on it."""
    h = s.header
    return RunDocument(
        schema_version=SCHEMA_VERSION,
        status=s.status,
        status_text=s.status_text,
        verdict=parts_line(s.verdict, 1000),
        header=_header(h) if h is not None else None,
        header_fields={f.key: f.value for f in header_fields(h)} if h is not None else {},
        checks=[
            CheckDoc(
                c.phase,
                c.context,
                c.check.value,
                figure(c.validity.ratio, "×"),
                c.validity.rounds,
                _finite(c.figures.stock_ms),
                _finite(c.figures.patched_ms),
            )
            for c in s.checks
        ],
        pooled=[
            PooledDoc(p.phase, list(p.contexts), figure(p.ratio, "×"), p.outcome, p.quads, p.rounds)
            for p in s.pooled
        ],
        tolerance_pct=s.tolerance_pct,
        marginal=[
            MarginalDoc(m.phase, m.context, figure(m.stock), figure(m.patched), m.check.value)
            for m in s.marginal
        ],
        sweep=[row for p in s.phases for row in _sweep(p)],
        decode=[row for p in s.phases for row in _decode(p)],
        phases=[_phase(p) for p in s.phases],
        left_out=list(s.left_out),
        synthetic_acceptance=s.synthetic,
        expectations=expectations or [],
    )


def document_json(doc: RunDocument) -> str:
    return msgspec.json.format(msgspec.json.encode(doc), indent=1).decode() + "\n"
