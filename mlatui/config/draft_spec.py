"""A scenario's [draft] table: one draft source (`source = "..."`) or several draft kinds measured
in one run (`sources = ["mtp", "draft-model"]`)."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any

import msgspec
from msgspec import Meta, Struct


class DraftSource(StrEnum):
    """A scenario's [draft] source."""

    AUTO = "auto"  # the embedded model's draft, a checkpoint's MTP head if it has one, else none
    DRAFT_MODEL = "draft-model"
    MTP = "mtp"
    SYNTHETIC = "synthetic"
    NONE = "none"


# the kinds a `sources = [...]` list (and a phase's `kind_depths`) may name: each is a real draft
# measured on its own
LISTABLE_SOURCES = (DraftSource.MTP, DraftSource.DRAFT_MODEL)


class DraftSpec(Struct, frozen=True, forbid_unknown_fields=True):
    source: DraftSource = DraftSource.AUTO
    path: str | None = None
    config: dict[str, Any] = msgspec.field(default_factory=dict)  # random-weight draft model
    acceptance: Annotated[float, Meta(ge=0, le=1)] = 0.7  # synthetic draft only
    # several kinds, each measured at every depth (the file's `sources`; one: as `source`)
    sources: Annotated[
        tuple[Annotated[DraftSource, Meta(extra={"one_of": LISTABLE_SOURCES})], ...],
        Meta(min_length=1),
    ] = ()

    @property
    def kinds(self) -> tuple[DraftSource, ...]:
        """Every source asked for, in the scenario's order (one for `source = ...`)."""
        return self.sources or (self.source,)
