"""The gate settings a run is configured with, as the user gave them: the threshold (the one
parser of `--threshold`, a scenario's `threshold = ...`, `launch`) and the sparse indexer's pooling
mode. gate/policy.py turns them into the policy objects the layers consult."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class ThresholdKind(StrEnum):
    FORMULA = "formula"
    CALIBRATED = "calibrated"
    STOCK = "stock"
    FIXED = "fixed"  # an explicit max_absorbed_queries


@dataclass(frozen=True)
class Threshold:
    """A threshold setting as the user gave it, parsed; `str()` is how runs record it."""

    kind: ThresholdKind = ThresholdKind.FORMULA
    max_queries: int | None = None  # FIXED only

    @classmethod
    def parse(cls, value: object) -> Threshold:
        """The one parser: formula | calibrated | stock | an integer >= 1 (1 = the stock gate)."""
        if isinstance(value, Threshold):
            return value
        text = str(value).strip() if isinstance(value, (str, int)) else ""
        if isinstance(value, bool):
            text = ""
        if text in (ThresholdKind.FORMULA, ThresholdKind.CALIBRATED, ThresholdKind.STOCK):
            return cls(ThresholdKind(text))
        if text.isdigit() and int(text) >= 1:
            return cls(ThresholdKind.FIXED, int(text))
        raise ValueError(
            f"threshold {value!r}: use formula, calibrated, stock or an integer >= 1 (1 = the stock gate)"
        )

    def __str__(self) -> str:
        return str(self.max_queries) if self.kind is ThresholdKind.FIXED else self.kind.value


class IndexerMode(StrEnum):
    """When the sparse indexer may reuse its pool cache: stock only at S == 1, patched at any S."""

    PATCHED = "patched"
    STOCK = "stock"

    @classmethod
    def parse(cls, value: object) -> IndexerMode:
        if isinstance(value, str) and value in tuple(cls):
            return cls(value)
        raise ValueError(f"indexer mode must be 'patched' or 'stock', got {value!r}")
