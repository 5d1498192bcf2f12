"""Where mlx-vlm's model files are, found without importing mlx-vlm (no mlx here).

mlx-vlm is either named as a source tree (`MLATUI_MLX_VLM_SOURCE`: the `mlx_vlm` package folder
or a folder holding it) or installed (`pip install 'mlatui[vlm]'`); mlatui.models.vlm loads it.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

SOURCE_ENV = "MLATUI_MLX_VLM_SOURCE"
INSTALL_HINT = "pip install 'mlatui[vlm]'"
PREFIX = "mlx-vlm:"  # a family spelled "mlx-vlm:glm4_moe_lite" builds through mlx-vlm


def package_folder(path: Path) -> Path | None:
    """The `mlx_vlm` folder itself, given it or a folder holding it (None: neither)."""
    for folder in (path, path / "mlx_vlm"):
        if (folder / "models" / "base.py").is_file():
            return folder
    return None


def installed_folder() -> Path | None:
    """The installed mlx_vlm package's folder (its __init__ is not run)."""
    try:
        spec = importlib.util.find_spec("mlx_vlm")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def vlm_has_model_type(model_type: str) -> bool:
    """Whether the mlx-vlm mlatui would use (the named tree, else the installed one) has a
    language model of `model_type`."""
    named = os.environ.get(SOURCE_ENV)
    root = package_folder(Path(named).expanduser()) if named else installed_folder()
    return root is not None and (root / "models" / model_type / "language.py").is_file()


def split_name(name: str) -> tuple[bool, str]:
    """("mlx-vlm:glm4_moe_lite") -> (True, "glm4_moe_lite"); a bare name -> (False, name)."""
    if name.startswith(PREFIX):
        return True, name[len(PREFIX) :]
    return False, name
