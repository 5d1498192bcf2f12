"""The code's shape, read from its syntax tree (no import, well under a second): every package of
mlatui/ and widgets/ keeps functions short (their argument lists are ruff's PLR0913, at most 6:
what travels together is a typed value), and the events carry one interval type, never flattened
`x_low`/`x_high` fields."""

from __future__ import annotations

import ast
import re
import tomllib
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHORT_PACKAGES = ("mlatui", "widgets")  # mlatui/widgets is a link to widgets/, not followed
MAX_LINES = 60
ONE_INTERVAL_PACKAGE = "mlatui/stream"

Function = ast.FunctionDef | ast.AsyncFunctionDef


def _functions(package: str) -> Iterator[tuple[str, Function]]:
    for path in sorted((ROOT / package).rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                yield path.relative_to(ROOT).as_posix(), node


def _lines(fn: Function) -> int:
    return (fn.end_lineno or fn.lineno) - fn.lineno + 1


def test_functions_are_at_most_60_lines():
    found = [
        f"{path}:{fn.lineno} {fn.name}: {_lines(fn)} lines"
        for package in SHORT_PACKAGES
        for path, fn in _functions(package)
        if _lines(fn) > MAX_LINES
    ]
    assert not found, (
        f"over {MAX_LINES} lines (split the function into steps that say what they do):\n"
        + "\n".join(found)
    )


def test_the_packages_are_ruffs_parameter_check_too():
    lint = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["ruff"]["lint"]
    assert "PLR0913" in lint["select"] and lint["pylint"]["max-args"] == 6
    ignored = {
        glob for glob, rules in lint.get("per-file-ignores", {}).items() if "PLR0913" in rules
    }
    assert not any(glob.startswith(SHORT_PACKAGES) for glob in ignored), ignored


def test_the_shape_check_sees_a_long_function():
    long_body = "\n".join(f"    x{i} = {i}" for i in range(MAX_LINES))
    tree = ast.parse(f"def f(self, a):\n{long_body}\n")
    fn = tree.body[0]
    assert isinstance(fn, ast.FunctionDef)
    assert _lines(fn) == MAX_LINES + 1


def _low_high_pairs(tree: ast.AST) -> list[str]:
    """`Class.name_low/_high` for every class holding both annotated fields."""
    out = []
    for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
        names = {
            s.target.id
            for s in cls.body
            if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)
        }
        out += [
            f"{cls.name}.{n.removesuffix('_low')}_low/_high"
            for n in sorted(names)
            if n.endswith("_low") and n.removesuffix("_low") + "_high" in names
        ]
    return out


def test_the_interval_check_sees_flattened_fields():
    tree = ast.parse("class A:\n    ratio: float\n    ratio_low: float\n    ratio_high: float\n")
    assert _low_high_pairs(tree) == ["A.ratio_low/_high"]


# a phase summary's rows are recorded as flat records of plain values (their keys are every
# recording's own); the events themselves carry Interval
FLAT_ROWS = "mlatui/stream/phase_rows.py"


def test_events_carry_one_interval_type_not_low_and_high_fields():
    found = [
        f"{path.relative_to(ROOT).as_posix()} {pair}"
        for path in sorted((ROOT / ONE_INTERVAL_PACKAGE).rglob("*.py"))
        if path.relative_to(ROOT).as_posix() != FLAT_ROWS
        for pair in _low_high_pairs(ast.parse(path.read_text(encoding="utf-8")))
    ]
    assert not found, "use stream.event_base.Interval for these:\n" + "\n".join(found)


def test_the_run_context_is_frozen_and_accumulates_nothing():
    """Phases hand results to later phases as returned values (mlatui.run.phases.results): the
    context they share is frozen and holds no container that fills up during a run."""
    path = ROOT / "mlatui" / "run" / "phases" / "base.py"
    tree = ast.parse(path.read_text(encoding="utf-8"))
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "RunContext")
    frozen = [
        d
        for d in cls.decorator_list
        if isinstance(d, ast.Call)
        and any(k.arg == "frozen" and getattr(k.value, "value", False) for k in d.keywords)
    ]
    assert frozen, "RunContext must be @dataclass(frozen=True)"
    filled = [
        s.target.id
        for s in cls.body
        if isinstance(s, ast.AnnAssign)
        and isinstance(s.target, ast.Name)
        and "default_factory" in ast.unparse(s.value or ast.Constant(None))
    ]
    assert not filled, f"RunContext fields that accumulate: {filled}"


TOP_LEVEL_WIDGETS = re.compile(r"(?<![.\w])(?:from\s+|import\s+(?:[\w.]+\s*,\s*)*)widgets\b")
OWN_PACKAGE_BY_NAME = re.compile(r"^\s*(?:from|import)\s+mlatui\.widgets\b", re.MULTILINE)


def test_widgets_are_imported_as_mlatui_widgets_and_import_each_other_relatively():
    """widgets/ installs as mlatui.widgets: a `widgets` import would load a second copy of the UI
    from a checkout and fail where the wheel is installed. Inside widgets/ its modules import each
    other relatively (the package does not name where it is mounted, and an import-cycle walk of
    the folder sees those edges)."""
    sources = [
        *(ROOT / "mlatui").rglob("*.py"),  # mlatui/widgets is a link, not followed here
        *(ROOT / "widgets").rglob("*.py"),
        *(ROOT / "tests").rglob("*.py"),
        *(ROOT / "tools").rglob("*.py"),
        ROOT / "conftest.py",
    ]
    top_level = [
        p.relative_to(ROOT).as_posix()
        for p in sorted(sources)
        if p != Path(__file__) and TOP_LEVEL_WIDGETS.search(p.read_text(encoding="utf-8"))
    ]
    assert not top_level, f"import mlatui.widgets, not widgets: {top_level}"
    by_name = [
        p.relative_to(ROOT).as_posix()
        for p in sorted((ROOT / "widgets").rglob("*.py"))
        if OWN_PACKAGE_BY_NAME.search(p.read_text(encoding="utf-8"))
    ]
    assert not by_name, f"import the package's own modules relatively (from . import x): {by_name}"


def test_the_widgets_import_checks_see_both_spellings():
    assert TOP_LEVEL_WIDGETS.search("from widgets.app import MlatuiApp")
    assert TOP_LEVEL_WIDGETS.search('code = "import sys, widgets.app"')
    assert not TOP_LEVEL_WIDGETS.search("from mlatui.widgets.app import MlatuiApp")
    assert not TOP_LEVEL_WIDGETS.search("import mlatui.widgets.app")
    assert not TOP_LEVEL_WIDGETS.search("import sys, mlatui.widgets.app")
    assert OWN_PACKAGE_BY_NAME.search("from mlatui.widgets.palette import theme_colours")
