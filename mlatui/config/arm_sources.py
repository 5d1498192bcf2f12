"""`--arm-source NAME=PATH` and a scenario's `[arms] b_source = "PATH"`: which arm slot runs its
model code from which source tree. Pure Python (checked before MLX is imported)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

PACKAGES = {"mlx_lm": "mlx-lm", "mlx_vlm": "mlx-vlm"}
SLOT_NAMES = {"a": "stock", "stock": "stock", "b": "patched", "patched": "patched"}


class ArmSourceError(ValueError):
    """A bad arm source (one line saying what to give instead)."""


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
