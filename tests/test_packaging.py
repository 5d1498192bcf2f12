"""The wheel carries mlatui with its widgets, the scenarios, the demo recording, the stylesheet and
the embedded model (setuptools does not discover this layout by itself), and no training code, logs
or test helpers; widgets/ and scenarios/ install inside mlatui (mlatui.widgets, mlatui.scenarios),
so site-packages gets one top-level package.

The wheel is built from a copy of the tree whose large weight files are replaced by empty files of
the same names: what is packaged depends on names only, and the copy builds in seconds."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import NamedTuple

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
    unreached = sorted(set(_modules(wheel)) - _reached(_modules(wheel), ENTRY_MODULES))
    assert not unreached, (
        f"modules the product never imports (move test helpers to tests/): {unreached}"
    )
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    assert "mlatui = mlatui.cli:entry" in zipfile.ZipFile(wheel).read(entry_points).decode()


ENTRY_MODULES = ("mlatui", "mlatui.__main__", "mlatui.cli")


class Source(NamedTuple):
    tree: ast.Module
    is_package: bool


def _modules(wheel: Path) -> dict[str, Source]:
    """Every Python module in the wheel by its dotted name, parsed."""
    with zipfile.ZipFile(wheel) as whl:
        return {
            n.removesuffix(".py").replace("/", ".").removesuffix(".__init__"): Source(
                ast.parse(whl.read(n)), n.endswith("/__init__.py")
            )
            for n in whl.namelist()
            if n.endswith(".py")
        }


def _imported(name: str, source: Source, known: set[str]) -> set[str]:
    """What a module imports, lazily too, and the module names its strings hold (the command
    table's `importlib` targets), resolved to known modules and their packages."""
    package = name.split(".") if source.is_package else name.split(".")[:-1]
    names: list[str] = []
    for node in ast.walk(source.tree):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package[: len(package) - node.level + 1]
                base = ".".join([*up, base] if base else up)
            names += [base, *(f"{base}.{a.name}" for a in node.names)]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            names.append(node.value)
    found = set()
    for n in names:
        while n:
            if n in known:
                found.add(n)
            n = n.rpartition(".")[0]
    return found


def _reached(modules: dict[str, Source], entries: tuple[str, ...]) -> set[str]:
    seen: set[str] = set()
    todo = list(entries)
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo += _imported(name, modules[name], set(modules))
    return seen


def test_the_reach_walk_follows_lazy_relative_and_table_imports():
    def module(code: str, is_package: bool = False) -> Source:
        return Source(ast.parse(code), is_package)

    modules = {
        "p": module("", True),
        "p.cli": module("TABLE = {'a': 'p.a'}\ndef f():\n    from p.ui import app"),
        "p.a": module(""),
        "p.ui": module("from . import theme", True),
        "p.ui.app": module("from .plot import draw"),
        "p.ui.plot": module(""),
        "p.ui.theme": module(""),
        "p.helper": module("import p.a"),
    }
    assert _reached(modules, ("p.cli",)) == set(modules) - {"p.helper"}
