"""Source trees mounted under private names: no package __init__ runs, relative imports resolve
inside the tree, two copies of one package coexist, the gate patch can read the source."""

import inspect
import sys

import pytest

from mlatui.models import source_tree


def unmount(tree: source_tree.SourceTree) -> None:
    """Forget the tree: its finder and every module imported from it (classes already built from
    them keep working; a later mount imports fresh copies)."""
    with source_tree._lock:
        source_tree._mounted.pop(tree.alias, None)
        sys.meta_path[:] = [
            f
            for f in sys.meta_path
            if not (isinstance(f, source_tree._TreeFinder) and f.tree == tree)
        ]
        for name in tree.loaded():
            del sys.modules[name]


def is_tree_module(module_name: str) -> bool:
    return (
        module_name.startswith(source_tree.ALIAS_PREFIX)
        and source_tree.tree_of(module_name) is not None
    )


def _tree(root, version: int):
    """A package like mlx-vlm's: every __init__ would fail if run; a model file imports its
    siblings two levels up."""
    pkg = root / "runtime"
    (pkg / "models" / "fam").mkdir(parents=True)
    (pkg / "__init__.py").write_text("raise ImportError('the top-level __init__ ran')\n")
    (pkg / "models" / "__init__.py").write_text("raise ImportError('models/__init__ ran')\n")
    (pkg / "models" / "fam" / "__init__.py").write_text("import a_dependency_nobody_has\n")
    (pkg / "version.py").write_text(f"VERSION = {version}\n")
    (pkg / "models" / "base.py").write_text("from ..version import VERSION\nSCALE = 10 * VERSION\n")
    (pkg / "models" / "fam" / "language.py").write_text(
        "from ..base import SCALE\n"
        "from ...version import VERSION\n\n\n"
        "class Attention:\n"
        "    def __call__(self, L):\n"
        "        return L * SCALE\n"
    )
    return pkg


@pytest.fixture
def two_trees(tmp_path):
    a = source_tree.mount(_tree(tmp_path / "a", 1), "v1")
    b = source_tree.mount(_tree(tmp_path / "b", 2), "v2")
    yield a, b
    unmount(a)
    unmount(b)


def test_a_model_file_loads_without_any_package_init(two_trees):
    tree, _ = two_trees
    language = tree.module("models.fam.language")
    assert language.Attention()(3) == 30
    assert language.VERSION == 1
    assert "a_dependency_nobody_has" not in sys.modules
    assert language.__name__ == f"{tree.alias}.models.fam.language"
    assert tree.alias.startswith(source_tree.ALIAS_PREFIX) and "runtime_v1" in tree.alias
    assert tree.loaded() == sorted(
        f"{tree.alias}{s}"
        for s in ("", ".models", ".models.base", ".models.fam", ".models.fam.language", ".version")
    )


def test_two_copies_of_one_package_coexist(two_trees):
    a, b = two_trees
    la, lb = a.module("models.fam.language"), b.module("models.fam.language")
    assert la.Attention is not lb.Attention
    assert (la.Attention()(1), lb.Attention()(1)) == (10, 20)
    assert source_tree.tree_of(la.Attention.__module__) == a
    assert source_tree.tree_of(lb.__name__) == b
    assert is_tree_module(la.__name__) and not is_tree_module("mlx.core")
    assert a.relative(la.__name__) == "models.fam.language"


def test_the_source_of_a_tree_class_is_readable(two_trees):
    tree, _ = two_trees
    cls = tree.module("models.fam.language").Attention
    assert "return L * SCALE" in inspect.getsource(cls.__call__)
    assert inspect.getsourcefile(cls).endswith("runtime/models/fam/language.py")


def test_mounting_is_idempotent_and_unmount_forgets(tmp_path):
    pkg = _tree(tmp_path, 3)
    tree = source_tree.mount(pkg, "v3")
    assert source_tree.mount(pkg, "v3") is tree
    first = tree.module("models.base")
    unmount(tree)
    assert tree.loaded() == [] and source_tree.tree_of(tree.alias) is None
    with pytest.raises(source_tree.SourceTreeError, match="not mounted"):
        tree.module("models.base")
    again = source_tree.mount(pkg, "v3")
    assert again.module("models.base") is not first
    unmount(again)


def test_missing_modules_and_folders_are_one_line_errors(two_trees, tmp_path):
    tree, _ = two_trees
    assert tree.has("models.fam.language") and tree.has("models") and not tree.has("models.nope")
    with pytest.raises(source_tree.SourceTreeError) as e:
        tree.module("models.nope.language")
    assert "has no module models/nope" in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(source_tree.SourceTreeError, match="no such folder"):
        source_tree.mount(tmp_path / "absent")
    (tmp_path / "empty").mkdir()
    with pytest.raises(source_tree.SourceTreeError, match="no Python files"):
        source_tree.mount(tmp_path / "empty")


def test_the_runtime_of_a_module_names_tree_or_distribution(two_trees):
    tree, _ = two_trees
    language = tree.module("models.fam.language")
    assert source_tree.runtime_of(language.__name__) == ("runtime", "v1", str(tree.root))
    name, version, folder = source_tree.runtime_of("mlx_lm.models.deepseek_v3")
    assert (name, folder) == ("mlx-lm", None) and version[0].isdigit()
