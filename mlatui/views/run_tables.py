"""A run's figures as typed cells, read from DashboardState (pure Python): what the exports
print and what `mlatui compare` matches between two runs.

Sweep cells come from the paired estimates (medians over rounds with 95% CIs), available from
the first round on, so a mid-run export has them; a run without estimates gives plain medians of
the samples, without a CI.

Both arms' L = 1 figure in a check's row (`l1_figures`) is per step, as the sweep's: a decode or
tune phase with a draft decides its check on synced verify steps; with no draft the check is
decided on plain-decode blocks, whose figures are block times (a 12-token block read 46.7 ms
beside the sweep's 4.03 ms step), so such a row shows the block time per token, said as such, or
nothing when the block's length is not known.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass

from mlatui.config.phase_kind import rules_for
from mlatui.stream.events import ARMS, DecodeResult, Estimate, Validity
from mlatui.stream.phase_rows import Quantity
from mlatui.stream.phrases import CHECK_MARKS
from mlatui.views.dashboard_state import DashboardState
from mlatui.views.units import Ci


class Check(enum.StrEnum):
    """The L = 1 check of a (phase, context); PENDING before it is decided; POOLED: inconclusive
    alone, made valid by the run's pooled check (in verdicts, never shown as plain valid)."""

    VALID = "valid"
    POOLED = "valid (pooled)"
    INVALID = "invalid"
    INCONCLUSIVE = "inconclusive"
    PENDING = "pending"

    @property
    def mark(self) -> str:
        return CHECK_MARKS[self.value]

    @property
    def usable(self) -> bool:
        """Enters verdicts."""
        return self in (Check.VALID, Check.POOLED)


@dataclass(frozen=True)
class Cell:
    """One figure: `width` is L for sweep quantities and the draft depth for decode ones, with
    the `draft_kind` that drafted ("" for sweep figures and plain decode)."""

    phase: str
    context: int
    width: int
    arm: str  # "" for the paired stock/patched ratio
    quantity: Quantity
    ci: Ci
    n: int | None = None
    rounds: int | None = None
    draft_kind: str = ""


def check(state: DashboardState, phase: str, context: int) -> Check:
    v = state.validity.get((phase, context))
    if v is None:
        return Check.PENDING
    return Check.POOLED if v.valid and v.pooled else Check(v.verdict)


def sweep_phases(state: DashboardState) -> list[str]:
    return [p for p, kind in state.phase_kinds.items() if rules_for(kind).model_widths]


def _estimate_cells(e: Estimate) -> list[Cell]:
    out = []
    for r in e.rows:
        q = r.quantity
        out.append(
            Cell(
                e.phase,
                e.context,
                int(r.width),
                r.arm,
                q,
                Ci(r.median, r.low, r.high),
                r.n,
                e.rounds,
            )
        )
    return out


def _sample_cells(state: DashboardState, phase: str) -> list[Cell]:
    """Older recordings: plain medians of the sweep samples (no rounds, no CIs)."""
    out = []
    for (arm, c, w), samples in sorted(state.sweep_ms.items(), key=lambda kv: kv[0][1:]):
        m = state.l_median(arm, c, w)
        if m is not None:
            out.append(Cell(phase, c, w, arm, Quantity.STEP_MS, Ci(m), len(samples)))
    for c in sorted({c for (_, c, _) in state.sweep_ms}):
        for arm in ARMS:
            one, two = state.l_median(arm, c, 1), state.l_median(arm, c, 2)
            if one is not None and two is not None:
                out.append(Cell(phase, c, 2, arm, Quantity.MARGINAL_MS, Ci(two - one)))
    return out


def sweep_cells(state: DashboardState, phase: str | None = None) -> list[Cell]:
    """Every sweep phase's cells (or `phase`'s), per context in context order."""
    phases = [phase] if phase else sweep_phases(state)
    out: list[Cell] = []
    for p in phases:
        found = sorted((c, e) for (ph, c), e in state.estimates.items() if ph == p)
        if found:
            for _, e in found:
                out += _estimate_cells(e)
        elif p == (sweep_phases(state) or [p])[0]:  # samples are not kept per phase
            out += _sample_cells(state, p)
    return out


def latest_sweep_cells(state: DashboardState) -> list[Cell]:
    """Per sweep context, the cells of its latest estimate (what the dashboard's figure shows)."""
    latest: dict[int, list[Cell]] = {}
    for cell in sweep_cells(state):
        latest.setdefault(cell.context, [])
        if latest[cell.context] and latest[cell.context][0].phase != cell.phase:
            latest[cell.context] = []
        latest[cell.context].append(cell)
    return [c for context in sorted(latest) for c in latest[context]]


def decode_cells(state: DashboardState) -> list[Cell]:
    out = []
    for r in state.decode_results:

        def cell(quantity: Quantity, ci: Ci, tokens: int, r=r) -> Cell:
            return Cell(
                r.phase,
                r.context,
                r.depth,
                r.arm,
                quantity,
                ci,
                tokens,
                r.rounds or None,
                r.draft_kind,
            )

        if not r.measured or r.tok_s is None:
            if r.bound is not None:
                out.append(cell(Quantity.BOUND, Ci(r.bound.value), 0))
            continue
        out.append(cell(Quantity.TOK_S, Ci.of(r.tok_s), r.tokens))
        if r.depth and r.vs_plain is not None:
            ci = Ci.of(r.vs_plain)
            out.append(cell(Quantity.VS_PLAIN, ci, r.tokens))
    return out


@dataclass(frozen=True)
class L1Figures:
    stock_ms: float | None
    patched_ms: float | None
    block_tokens: int = 0  # > 0: per token of plain-decode blocks this long (not a step time)

    @property
    def per_token(self) -> bool:
        return self.block_tokens > 0

    @property
    def note(self) -> str:
        """What a marked row's figures are, for the table's legend."""
        return (
            f"per token of {self.block_tokens}-token plain-decode blocks (no draft: the check "
            "was decided on them)"
        )


def decided_on_blocks(kind: str, results: Iterable[DecodeResult], phase: str, context: int) -> bool:
    """A decode or tune check with no speculative result at its context: no verify steps."""
    if not rules_for(kind).decodes:
        return False
    return not any(r.depth > 0 and r.phase == phase and r.context == context for r in results)


def block_tokens(results: Iterable[DecodeResult], phase: str, context: int) -> int:
    return next(
        (
            r.block_tokens
            for r in results
            if r.depth == 0 and r.phase == phase and r.context == context and r.block_tokens
        ),
        0,
    )


def l1_figures(
    v: Validity, kind: str, results: Iterable[DecodeResult], phase: str, context: int
) -> L1Figures:
    """`v`'s two L = 1 figures as step times: its own (a sweep's, or a verify's), or its block
    times per token (None for both when the blocks' length is unknown)."""
    results = list(results)
    if not decided_on_blocks(kind, results, phase, context):
        return L1Figures(v.stock_l1_ms, v.patched_l1_ms)
    n = block_tokens(results, phase, context)
    if n <= 0:
        return L1Figures(None, None)
    return L1Figures(v.stock_l1_ms / n, v.patched_l1_ms / n, n)
