"""mlx-vlm releases for the tests, from their wheels, without installing mlx-vlm or its dependencies.

The wheels (pure Python) are looked up in `$MLATUI_VLM_WHEELS`, then in the user cache
(`~/.cache/mlatui/wheels` on Linux); CI downloads them there before the suite
(`pip download --no-deps -d DIR mlx-vlm==VERSION`). Each is unpacked once beside its wheel and
mounted as a source tree (mlatui.models.source_tree), so two releases coexist in one process. Without the wheels the tests skip, naming the command that fetches them; under CI
(`CI` set) or with `MLATUI_VLM_WHEELS` set, a missing wheel fails instead.
"""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

import pytest

CURRENT = "0.7.10"  # mlx-vlm with the fix (cache-aware gates, rewritten glm5_next)
PRE_FIX = "0.6.17"  # the last release with `if L == 1:` gates
VERSIONS = (CURRENT, PRE_FIX)
WHEELS_ENV = "MLATUI_VLM_WHEELS"


def wheel_dirs() -> list[Path]:
    dirs = [Path(os.environ[WHEELS_ENV])] if os.environ.get(WHEELS_ENV) else []
    import platformdirs

    return [*dirs, Path(platformdirs.user_cache_dir("mlatui")) / "wheels"]


def wheel(version: str) -> Path:
    name = f"mlx_vlm-{version}-py3-none-any.whl"
    for folder in wheel_dirs():
        if (folder / name).is_file():
            return folder / name
    fetch = f"pip download --no-deps -d {wheel_dirs()[-1]} mlx-vlm=={version}"
    if os.environ.get("CI") or os.environ.get(WHEELS_ENV):
        pytest.fail(f"{name} not found in {', '.join(map(str, wheel_dirs()))}: {fetch}")
    pytest.skip(f"{name} not found; fetch it with: {fetch}")


def unpacked(version: str, into: Path) -> Path:
    """The wheel of `version` unpacked (once) beside the wheel, where its compiled modules are
    kept between runs, or under `into` where that folder is read-only; returns the folder
    holding mlx_vlm/."""
    whl = wheel(version)
    for target in (whl.parent / f"mlx_vlm-{version}-src", into / f"mlx_vlm-{version}"):
        done = target / "UNPACKED"
        if done.is_file():
            return target
        try:
            with zipfile.ZipFile(whl) as archive:
                archive.extractall(target)
            done.write_text(whl.name)
            return target
        except OSError:
            continue
    raise OSError(f"cannot unpack {whl} into {whl.parent} or {into}")


def require_pillow() -> None:
    """mlx-vlm's models/base.py imports Pillow; the dev extra installs it."""
    import importlib.util

    if importlib.util.find_spec("PIL") is None:
        why = "Pillow is not installed (mlx-vlm's models import it): pip install -e '.[dev]'"
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)


def source(version: str, into: Path):
    """The mlx-vlm `version` as a mounted source tree (mlatui.models.vlm.VlmSource)."""
    from mlatui.models import vlm

    folder = unpacked(version, into)
    require_pillow()
    return vlm.source_from_tree(str(folder))


def _toml_tables(prefix: str, table: dict) -> list[str]:
    import json

    lines, nested = [f"[{prefix}]"], []
    for key, value in table.items():
        if isinstance(value, dict):
            nested += _toml_tables(f"{prefix}.{key}", value)
        elif value is not None:
            lines.append(f"{key} = {json.dumps(value)}")
    return [*lines, "", *nested]


def scenario(path: Path, family: str, config: dict, phases: str) -> Path:
    """A random-weight scenario of `family` (e.g. "mlx-vlm:glm5_next") with `config` as its
    [model.config] and `phases` (TOML [[phase]] tables) at `path`."""
    head = f'name = "{family}"\ndescription = "tiny {family}"\nseed = 0\n\n'
    model = f'[model]\nsource = "random"\nfamily = "{family}"\ndtype = "float32"\n\n'
    draft = '[draft]\nsource = "synthetic"\nacceptance = 0.75\n\n'
    body = "\n".join(_toml_tables("model.config", {**config, "model_type": family}))
    path.write_text(head + model + body + "\n" + draft + phases)
    return path
