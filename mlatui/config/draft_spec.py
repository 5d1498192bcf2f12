"""A scenario's [draft] table: one draft source (`source = "..."`) or several draft kinds measured
in one run (`sources = ["mtp", "draft-model"]`), and a phase's per-kind depths."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from mlatui.config.checks import ScenarioError, check_keys, int_list


class DraftSource(StrEnum):
    """A scenario's [draft] source."""

    AUTO = "auto"  # the embedded model's draft, a checkpoint's MTP head if it has one, else none
    DRAFT_MODEL = "draft-model"
    MTP = "mtp"
    SYNTHETIC = "synthetic"
    NONE = "none"


DRAFT_SOURCES = tuple(DraftSource)
# the kinds a `sources = [...]` list may name: each is a real draft measured on its own
LISTABLE_SOURCES = (DraftSource.MTP, DraftSource.DRAFT_MODEL)


@dataclass(frozen=True)
class DraftSpec:
    source: DraftSource = DraftSource.AUTO
    path: str | None = None
    config: dict[str, Any] = field(
        default_factory=dict[str, Any]
    )  # random-weight draft model config
    acceptance: float = 0.7  # synthetic draft only
    sources: tuple[DraftSource, ...] = ()  # `sources = [...]`: several kinds, each measured

    @property
    def kinds(self) -> tuple[DraftSource, ...]:
        """Every source asked for, in the scenario's order (one for `source = ...`)."""
        return self.sources or (self.source,)


def parse_draft(where: str, raw: dict[str, Any]) -> DraftSpec:
    check_keys(where, raw, ("source", "sources", "path", "config", "acceptance"))
    sources = _draft_sources(where, raw)
    dsource = sources[0].value if sources else raw.get("source", "auto")
    if dsource not in DRAFT_SOURCES:
        raise ScenarioError(
            f"{where}: 'source' must be one of {', '.join(DRAFT_SOURCES)}, got {dsource!r}"
        )
    acceptance = raw.get("acceptance", 0.7)
    if not isinstance(acceptance, (int, float)) or not 0 <= acceptance <= 1:
        raise ScenarioError(f"{where}: 'acceptance' must be a number in [0, 1]")
    return DraftSpec(
        DraftSource(dsource),
        raw.get("path"),
        dict(raw.get("config", {})),
        float(acceptance),
        sources if len(sources) > 1 else (),
    )


def _draft_sources(where: str, raw: dict[str, Any]) -> tuple[DraftSource, ...]:
    """`sources = ["mtp", "draft-model"]`: several draft kinds, each measured at every depth."""
    if "sources" not in raw:
        return ()
    if "source" in raw:
        raise ScenarioError(f"{where}: give 'source' or 'sources', not both")
    given = raw["sources"]
    allowed = ", ".join(s.value for s in LISTABLE_SOURCES)
    if not isinstance(given, list) or not given:
        raise ScenarioError(f"{where}: 'sources' must be a non-empty list of {allowed}")
    for s in given:
        if s not in LISTABLE_SOURCES:
            raise ScenarioError(f"{where}: 'sources' may list {allowed}, got {s!r}")
    if len(set(given)) != len(given):
        raise ScenarioError(f"{where}: 'sources' names a kind twice: {given}")
    return tuple(DraftSource(s) for s in given)


def kind_depths(where: str, raw: Any) -> tuple[tuple[str, tuple[int, ...]], ...]:
    """`kind_depths = { "draft-model" = [1] }`: a draft kind measured at other depths than
    `depths` (what the budget writes when it keeps a weaker kind at fewer); an empty list
    leaves the kind out of the phase (the budget's last resort for a weaker kind)."""
    kinds = ", ".join(s.value for s in LISTABLE_SOURCES)
    if not isinstance(raw, dict):
        raise ScenarioError(f"{where}: 'kind_depths' must be a table of draft kind -> depths")
    for kind in raw:
        if kind not in LISTABLE_SOURCES:
            raise ScenarioError(
                f"{where}: 'kind_depths' keys are draft kinds ({kinds}), got {kind!r}"
            )
    return tuple(
        (k, () if v == [] else int_list(where, f"kind_depths.{k}", v)) for k, v in raw.items()
    )
