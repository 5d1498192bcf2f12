"""A scenario's `[story]`: what its run is to show, so that a budgeted run can pick the contexts
that show it on the device at hand (mlatui.run.budget).

The story of the default scenario: the stock arm's verify step (L = 2) costs a clear multiple of
its plain step (L = 1), because it re-expands the whole cache, while the patched arm's stays flat.
Where that happens depends on the device: on a slow CPU from 1-2K tokens, on a GPU, whose plain
step is mostly fixed cost, only from 16-32K. The phases as written are what runs without a budget.
"""

from __future__ import annotations

from typing import Annotated

import msgspec
from msgspec import Meta, Struct

Ratio = Annotated[float, Meta(ge=1, lt=1e6, description="a step's cost over the L = 1 step's")]


class Story(Struct, frozen=True):
    """What the run is to show, as a recording's header keeps it (a key this tool does not
    know is skipped)."""

    # the contexts a plan may pick from (ascending, each once)
    contexts: Annotated[
        tuple[Annotated[int, Meta(ge=16)], ...],
        Meta(min_length=1, description="the contexts a plan may pick from, in tokens"),
    ]
    stock_verify_multiple: Ratio = 4.0  # the stock arm's L = 2 step / its L = 1 step, at least
    patched_verify_flat: Ratio = 1.5  # the patched arm's L = 2 step / its L = 1 step, at most
    sweep_contexts: Annotated[int, Meta(ge=2, description="two show growth")] = 4

    def __post_init__(self) -> None:
        msgspec.structs.force_setattr(self, "contexts", tuple(sorted(set(self.contexts))))


class StoryTable(Story, frozen=True, forbid_unknown_fields=True):
    """A scenario file's [story] table: a key no Story has is an error there."""
