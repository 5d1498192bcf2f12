"""No function or class in mlatui/, widgets/ or tools/ that nothing names: a dead one is deleted,
not kept "for later". Names reached by convention rather than by name are listed. Only the package,
the training tools and the tests count as users: a script kept in docs/ does not keep code alive."""

from __future__ import annotations

import ast
import re
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Textual calls these by name; the CLI finds configure/run in each command module; DashboardState
# dispatches `_on_<event type>`; argparse, dataclasses and pickling call the dunders.
BY_CONVENTION = re.compile(
    r"^(__\w+__|on_\w+|_on_\w+|action_\w+|watch_\w+|compose|render\w*|check_action|main|"
    r"configure|run|get_system_commands|get_content_height)$"
)


def unreferenced(root: Path = ROOT) -> list[str]:
    sources = [p for d in ("mlatui", "widgets", "tools") for p in sorted((root / d).rglob("*.py"))]
    sources = [p for p in sources if "tests" not in p.relative_to(root).parts]
    others = [*root.glob("tests/*.py"), *root.glob("tools/**/tests/*.py")]
    texts = {p: p.read_text() for p in [*sources, *others]}
    names = Counter(re.findall(r"\w+", "\n".join(texts.values())))
    dead = []
    for path in sources:
        for node in ast.walk(ast.parse(texts[path])):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            if not BY_CONVENTION.match(node.name) and names[node.name] <= 1:
                dead.append(f"{path.relative_to(root)}:{node.lineno} {node.name}")
    return dead


def test_every_function_and_class_is_named_somewhere_else():
    assert unreferenced() == []


def test_the_check_sees_a_dead_function(tmp_path):
    body = "def used():\n    return 1\n\n\ndef never_called_anywhere_xyz():\n    return used()\n"
    (tmp_path / "mlatui").mkdir()
    (tmp_path / "mlatui" / "m.py").write_text(body)
    assert unreferenced(tmp_path) == ["mlatui/m.py:5 never_called_anywhere_xyz"]
