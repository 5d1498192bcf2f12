"""How each phase kind is shown: the printers' and the fold's one lookup by kind.

A kind's rules (`mlatui.config.phase_kind`) say what it measures; here, which table presents
it and how the dashboard folds its steps. A kind shown like an existing one is one line here.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from mlatui.config.phase_kind import PhaseKind


class Table(StrEnum):
    """A phase's table in `bench`'s summary, the export and `replay --dump`."""

    SWEEP = "sweep"  # per context and width: both arms' step ms, the paired ratio, Δ2
    DECODE = "decode"  # per context, arm and setting: tok/s, acceptance, the verify step
    ROWS = "rows"  # the phase summary's own rows (the indexer's parts)
    NONE = "none"  # no table of its own (`+`: its checks join the L = 1 table)


@dataclass(frozen=True)
class KindView:
    table: Table
    layer_steps: bool = False  # its steps time one layer, not the model: its own pane


VIEWS: dict[PhaseKind, KindView] = {
    PhaseKind.SWEEP: KindView(Table.SWEEP),
    PhaseKind.DECODE: KindView(Table.DECODE),
    PhaseKind.TUNE: KindView(Table.DECODE),
    PhaseKind.INDEXER: KindView(Table.ROWS, layer_steps=True),
    PhaseKind.MORE: KindView(Table.NONE),
}
UNKNOWN_VIEW = KindView(Table.ROWS)


def view_of(kind: str | None) -> KindView:
    """How a kind as recorded is shown (a kind this tool does not know: its summary's rows)."""
    known = PhaseKind.of(kind)
    return VIEWS[known] if known is not None else UNKNOWN_VIEW
