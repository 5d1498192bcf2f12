"""The wheel carries mlatui with its widgets, the scenarios, the demo recording, the stylesheet and
the embedded model (setuptools does not discover this layout by itself), and no training code, logs
or test helpers; widgets/ and scenarios/ install inside mlatui (mlatui.widgets, mlatui.scenarios),
so site-packages gets one top-level package.

The wheel is built from a copy of the tree whose large weight files are replaced by empty files of
the same names: what is packaged depends on names only, and the copy builds in seconds."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGED = ("mlatui", "widgets", "scenarios", "tools")
LARGE_BYTES = 1 << 20


def _lean_copy(dest: Path) -> Path:
    def copy(src: str, dst: str) -> None:
        if Path(src).stat().st_size > LARGE_BYTES:
            Path(dst).write_bytes(b"")
        else:
            shutil.copy2(src, dst)

    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info", ".mypy_cache")
    for name in PACKAGED:
        shutil.copytree(ROOT / name, dest / name, True, ignore, copy)  # mlatui/widgets stays a link
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, dest / name)
    return dest


def test_wheel_contents(tmp_path):
    src = _lean_copy(tmp_path / "src")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(src), "--no-deps", "-q", "-w", str(tmp_path)],
        check=True,
        capture_output=True,
    )
    wheel = next(tmp_path.glob("mlatui-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    for required in (
        "mlatui/cli.py",
        "mlatui/run/engine.py",
        "mlatui/commands/launch.py",
        "mlatui/commands/bench_attention.py",
        "mlatui/models/mlatui_mla.py",
        "mlatui/scenarios/default.toml",
        "mlatui/scenarios/glm47-flash.toml",
        "mlatui/scenarios/deepseek-v3.toml",
        "mlatui/scenarios/glm53-flash-sparse.toml",
        "mlatui/scenarios/demo.jsonl",
        "mlatui/models/embedded/model/config.json",
        "mlatui/models/embedded/draft/model.safetensors",
        "mlatui/models/embedded/MANIFEST.json",
        "mlatui/widgets/app.py",
        "mlatui/widgets/app.tcss",
        "mlatui/widgets/compare.tcss",
    ):
        assert required in names, f"{required} missing from {wheel.name}"
    assert any(
        n.startswith("mlatui/models/embedded/model/") and n.endswith(".safetensors") for n in names
    )
    inits = [*(ROOT / "mlatui").rglob("__init__.py"), *(ROOT / "widgets").rglob("__init__.py")]
    for init in inits:
        package = init.relative_to(ROOT).as_posix()  # a package left out of pyproject's list
        package = package if package.startswith("mlatui/") else f"mlatui/{package}"
        assert package in names, f"{package} missing: add it to [tool.setuptools] packages"
    top_level = {n.split("/", 1)[0] for n in names if not n.split("/", 1)[0].endswith(".dist-info")}
    assert top_level == {"mlatui"}, f"top-level packages besides mlatui: {top_level - {'mlatui'}}"
    assert not any("training" in n or n.endswith("_log.jsonl") for n in names)
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    assert "mlatui = mlatui.cli:entry" in zipfile.ZipFile(wheel).read(entry_points).decode()
