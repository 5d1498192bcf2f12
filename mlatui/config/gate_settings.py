"""The gate settings a run is configured with, as the user gave them: the threshold (the one
parser of `--threshold`, a scenario's `threshold = ...`, `launch`) and the sparse indexer's pooling
mode. gate/policy.py turns them into the policy objects the layers consult."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class ThresholdKind(StrEnum):
    FORMULA = "formula"
    CALIBRATED = "calibrated"
    STOCK = "stock"  # L == 1: the pre-fix gate (a counterfactual on fixed code)
    FIXED = "fixed"  # an explicit max_absorbed_queries
    INSTALLED = "installed"  # whatever the runtime's own gate decides
    COMPILED = "compiled"  # the formula's gate, absorbed calls through mlatui's compiled attention


@dataclass(frozen=True)
class Threshold:
    """A threshold setting as the user gave it, parsed; `str()` is how runs record it."""

    kind: ThresholdKind = ThresholdKind.FORMULA
    max_queries: int | None = None  # FIXED only

    @classmethod
    def parse(cls, value: object) -> Threshold:
        """The one parser: installed | pre-fix (= stock) | formula | calibrated | compiled | an
        integer >= 1 (1 = the pre-fix gate); `fixed N` and `fixed:N` spell an integer too."""
        if isinstance(value, Threshold):
            return value
        text = str(value).strip() if isinstance(value, (str, int)) else ""
        if isinstance(value, bool):
            text = ""
        text = {"pre-fix": "stock", "prefix": "stock"}.get(text, text)
        for spelled in ("fixed:", "fixed "):
            if text.startswith(spelled):
                text = text[len(spelled) :].strip()
        if text in tuple(k.value for k in ThresholdKind if k is not ThresholdKind.FIXED):
            return cls(ThresholdKind(text))
        if text.isdigit() and int(text) >= 1:
            return cls(ThresholdKind.FIXED, int(text))
        raise ValueError(
            f"threshold {value!r}: use installed, pre-fix, formula, calibrated, compiled or an "
            "integer >= 1 (1 = the pre-fix gate)"
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


def parse_arms(text: object) -> tuple[Threshold, Threshold]:
    """`--arms A,B` / a scenario's [arms]: the stock slot's and the patched slot's gate."""
    parts = [p.strip() for p in text.split(",")] if isinstance(text, str) else []
    if len(parts) != 2 or not all(parts):
        raise ValueError(
            f"arms {text!r}: give two gates separated by a comma, e.g. pre-fix,installed "
            "(each: installed, pre-fix, formula, calibrated, compiled or an integer)"
        )
    try:
        return Threshold.parse(parts[0]), Threshold.parse(parts[1])
    except ValueError as e:
        raise ValueError(f"arms {text!r}: {e}") from None
