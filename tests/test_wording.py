"""Product text has no history: README, docs, scenarios, the build and CI settings and the code's
comments and docstrings say why, never when (a work period's or a ticket's number)."""

from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# spelled so that this file does not match itself
WHEN = re.compile(r"\b(sess" r"ions?|iss" r"ues?) ?#?\d", re.I)


def _prose(path: Path) -> list[tuple[int, str]]:
    """(line, text) of what a reader reads: a page's lines, a Python file's comments and
    triple-quoted strings (file paths and other code are not prose)."""
    text = path.read_text(encoding="utf-8")
    if path.suffix != ".py":
        return list(enumerate(text.splitlines(), 1))
    found = []
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.COMMENT or (
            tok.type == tokenize.STRING and tok.string.lstrip("rbuRBU").startswith(('"""', "'''"))
        ):
            found += [(tok.start[0] + i, line) for i, line in enumerate(tok.string.splitlines())]
    return found


def _texts() -> list[Path]:
    found = [
        ROOT / "README.md",
        *(ROOT / "docs").rglob("*.md"),
        *(ROOT / "scenarios").glob("*.toml"),
        # the suite's and the build's own settings and CI script
        ROOT / "conftest.py",
        ROOT / "pyproject.toml",
        ROOT / ".ci" / "run",
    ]
    for folder in ("mlatui", "widgets", "tests", "tools"):
        found += [p for p in (ROOT / folder).rglob("*") if p.suffix in (".py", ".tcss", ".toml")]
    return sorted(found)


def test_no_page_or_comment_says_when():
    hits = [
        f"{path.relative_to(ROOT)}:{n}: {line.strip()[:100]}"
        for path in _texts()
        for n, line in _prose(path)
        if WHEN.search(line)
    ]
    assert hits == []


def test_the_check_reads_comments_and_docstrings_but_not_code(tmp_path):
    bad = 'x = "docs/issue10/run.jsonl"  # as in session 4\n"""Since issue 12."""\n'
    (tmp_path / "m.py").write_text(bad)
    assert [n for n, line in _prose(tmp_path / "m.py") if WHEN.search(line)] == [1, 2]
    (tmp_path / "m.py").write_text('x = "docs/issue10/run.jsonl"\n')
    assert [n for n, line in _prose(tmp_path / "m.py") if WHEN.search(line)] == []
