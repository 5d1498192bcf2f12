"""Import modules of a package's source tree under a private name, without running its `__init__`s.

A runtime's package `__init__` usually imports everything it ships (mlx-vlm's pulls in
transformers, opencv, mlx-audio, datasets, fastapi), while one model file needs only mlx and its
sibling modules. Mounting the tree's folder under a private top-level name makes
`<alias>.models.glm5_next.language` import that one file and, through its relative imports
(`..base`, `..cache`, `...turboquant`), only the files it names. Every package folder becomes a
bare package: its `__init__.py` is not executed, so nothing it would import is loaded.

Two trees of one runtime (an installed version and a PR checkout, or two releases) coexist in one
process: each has its own alias, its own module objects and its own classes. Source files load
through the standard `SourceFileLoader`, so `inspect.getsource` (the gate patch) reads them.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import re
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from types import ModuleType

ALIAS_PREFIX = "_mlatui_src_"


class SourceTreeError(ImportError):
    """A source tree cannot be mounted or a module of it is missing (one line)."""


@dataclass(frozen=True)
class SourceTree:
    """A package folder (`root`, e.g. `.../site-packages/mlx_vlm`) mounted as `alias`."""

    root: Path
    alias: str
    label: str = ""  # what mount() was told the tree is, e.g. its version

    def module(self, dotted: str) -> ModuleType:
        """Import `<alias>.<dotted>` (e.g. "models.deepseek_v3.language") from the tree."""
        name = f"{self.alias}.{dotted}" if dotted else self.alias
        if _mounted.get(self.alias) != self:
            raise SourceTreeError(f"{self.root} is not mounted (mount it again)")
        try:
            return importlib.import_module(name)
        except ModuleNotFoundError as e:
            if e.name is not None and self.owns(e.name):
                rel = e.name[len(self.alias) + 1 :].replace(".", "/")
                raise SourceTreeError(f"{self.root}: has no module {rel or '.'} (.py)") from e
            raise

    def has(self, dotted: str) -> bool:
        """Whether the tree has the module or package `dotted` (nothing is imported)."""
        return _locate(self.root, dotted.split(".")) is not None

    def owns(self, module_name: str) -> bool:
        return module_name == self.alias or module_name.startswith(self.alias + ".")

    def relative(self, module_name: str) -> str:
        """The dotted name inside the tree: `<alias>.models.x` gives "models.x"."""
        if not self.owns(module_name):
            raise ValueError(f"{module_name} is not a module of {self.alias}")
        return module_name[len(self.alias) + 1 :]

    def loaded(self) -> list[str]:
        """The tree's modules imported so far."""
        return sorted(n for n in sys.modules if self.owns(n))


def _locate(root: Path, parts: Sequence[str]) -> tuple[Path, bool] | None:
    """(path, is_package) of a module inside `root`, or None."""
    if not parts or any(not p.isidentifier() for p in parts):
        return None
    folder = root.joinpath(*parts)
    if folder.is_dir():
        return folder, True
    file = root.joinpath(*parts[:-1], parts[-1] + ".py")
    return (file, False) if file.is_file() else None


class _BarePackage(importlib.abc.Loader):
    """A package whose `__init__.py` is not executed: only its `__path__` is set."""

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return None

    def exec_module(self, module: ModuleType) -> None:
        return None


class _TreeFinder(importlib.abc.MetaPathFinder):
    def __init__(self, tree: SourceTree):
        self.tree = tree

    def find_spec(
        self, fullname: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        tree = self.tree
        if not tree.owns(fullname):
            return None
        parts = fullname.split(".")[1:]
        if not parts:  # the alias itself: the tree's root folder
            return _package_spec(fullname, tree.root)
        found = _locate(tree.root, parts)
        if found is None:
            return None
        where, is_package = found
        if is_package:
            return _package_spec(fullname, where)
        return importlib.util.spec_from_file_location(fullname, where)


def _package_spec(name: str, folder: Path) -> importlib.machinery.ModuleSpec:
    spec = importlib.machinery.ModuleSpec(name, _BarePackage(), is_package=True)
    spec.submodule_search_locations = [str(folder)]
    return spec


_mounted: dict[str, SourceTree] = {}
_lock = threading.Lock()


def alias_for(root: Path, label: str = "") -> str:
    """A private, stable top-level name for `root`: the package's name, a label (e.g. a
    version) and a hash of the folder's absolute path."""
    digest = hashlib.sha1(str(root).encode()).hexdigest()[:10]
    words = "_".join(w for w in (root.name, label) if w)
    return ALIAS_PREFIX + re.sub(r"\W", "_", words) + "_" + digest


def mount(root: str | Path, label: str = "") -> SourceTree:
    """Mount the package folder `root` under a private name (idempotent per folder).

    `root` is the package itself (the folder holding `models/`), not the repository around it."""
    folder = Path(root).expanduser().resolve()
    if not folder.is_dir():
        raise SourceTreeError(f"{root}: no such folder (give a package folder, e.g. .../mlx_vlm)")
    if not any(folder.glob("*.py")) and not any(folder.glob("*/*.py")):
        raise SourceTreeError(f"{root}: no Python files in it (give a package folder)")
    alias = alias_for(folder, label)
    with _lock:
        tree = _mounted.get(alias)
        if tree is None:
            tree = SourceTree(folder, alias, label)
            sys.meta_path.insert(0, _TreeFinder(tree))
            _mounted[alias] = tree
    return tree


def tree_of(module_name: str) -> SourceTree | None:
    """The mounted tree a module (e.g. a class's `__module__`) was imported from."""
    top = module_name.split(".", 1)[0]
    return _mounted.get(top)


def runtime_of(module_name: str) -> tuple[str, str, str | None]:
    """(runtime, version, folder) of the package a module (e.g. a class's `__module__`) comes
    from: a mounted tree's package name, label and folder; else the installed distribution's
    name and version ("?" when unknown) and None."""
    tree = tree_of(module_name)
    if tree is not None:
        return tree.root.name.replace("_", "-"), tree.label or "?", str(tree.root)
    runtime = module_name.split(".", 1)[0].replace("_", "-")
    try:
        return runtime, metadata.version(runtime), None
    except metadata.PackageNotFoundError:
        return runtime, "?", None


def tree_version(package_dir: Path) -> str:
    """The `__version__` a package folder's _version.py or version.py writes ("?": neither)."""
    for name in ("_version.py", "version.py"):
        file = package_dir / name
        text = file.read_text() if file.is_file() else ""
        found = re.search(r"__version__\s*=\s*['\"]([^'\"]+)['\"]", text)
        if found:
            return found.group(1)
    return "?"
