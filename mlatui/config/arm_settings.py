"""What each arm runs, as the user gave it (pure Python, checked before MLX is imported):

- its gate settings: the threshold (the one parser of `--threshold`, a scenario's
  `threshold = ...`, `launch`) and the sparse indexer's pooling mode; gate/policy.py turns them
  into the policy objects the layers consult;
- its source tree: `--arm-source NAME=PATH` and a scenario's `[arms] b_source = "PATH"`, which
  arm slot runs its model code from which source tree.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from mlatui.errors import UserError


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


# ---- which source tree an arm slot runs ----------------------------------------------------------

PACKAGES = {"mlx_lm": "mlx-lm", "mlx_vlm": "mlx-vlm"}
SLOT_NAMES = {"a": "stock", "stock": "stock", "b": "patched", "patched": "patched"}


class ArmSourceError(UserError, ValueError):
    """A bad arm source (one line saying what to give instead): the command line's bad input."""


def package_folder(path: str) -> tuple[Path, str]:
    """(package folder, package name) of a checkout holding mlx_lm/ or mlx_vlm/, or of the
    package folder itself (an installed one in site-packages, or the folder in a checkout)."""
    folder = Path(path).expanduser()
    if not folder.is_dir():
        raise ArmSourceError(
            f"{path}: no such folder (give an mlx-lm or mlx-vlm checkout or package folder)"
        )
    folder = folder.resolve()
    for candidate in (folder, *(folder / name for name in PACKAGES)):
        if candidate.name in PACKAGES and (candidate / "models" / "base.py").is_file():
            return candidate, candidate.name
    raise ArmSourceError(
        f"{path}: not an mlx-lm or mlx-vlm source tree (expected {path}/mlx_lm/models/base.py or "
        f"{path}/mlx_vlm/models/base.py, or the package folder itself)"
    )


def parse_arm_source(text: str, where: str = "--arm-source") -> tuple[str, str]:
    """`B=PATH` (NAME: A, B, stock or patched) -> (slot, path)."""
    name, sep, path = text.partition("=")
    slot = SLOT_NAMES.get(name.strip().lower())
    if not sep or slot is None or not path.strip():
        raise ArmSourceError(
            f"{where} {text!r}: give NAME=PATH, NAME one of A, B, stock, patched "
            "(e.g. B=~/src/mlx-lm)"
        )
    return slot, path.strip()


def parse_arm_sources(items: list[str] | None, where: str = "--arm-source") -> dict[str, str]:
    """Slot -> path from repeated `--arm-source NAME=PATH` (one source per slot), each path
    checked to be a source tree."""
    out: dict[str, str] = {}
    for item in items or []:
        slot, path = parse_arm_source(item, where)
        if slot in out:
            raise ArmSourceError(f"{where}: slot {slot} is given twice")
        out[slot] = path
    check_paths(out, where)
    return out


def check_paths(sources: Mapping[str, str], where: str = "arm source") -> None:
    """Each path is a source tree (a one-line error before anything loads)."""
    for slot, path in sources.items():
        try:
            package_folder(path)
        except ArmSourceError as e:
            raise ArmSourceError(f"{where} {slot}: {e}") from None
