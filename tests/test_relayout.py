"""docs/experiments/relayout.py, the package move: a second run changes nothing, and a flat
module it has no mapping for stops it before anything moves."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = Path("docs") / "experiments" / "relayout.py"


def relayout(root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(root / SCRIPT), *args],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_tree_is_already_laid_out():
    out = relayout(ROOT, "--check")
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout == ""


def test_an_unmapped_flat_module_fails_loudly(tmp_path):
    shutil.copytree(ROOT / "mlatui", tmp_path / "mlatui", ignore=shutil.ignore_patterns("embedded"))
    (tmp_path / SCRIPT).parent.mkdir(parents=True)
    shutil.copy(ROOT / SCRIPT, tmp_path / SCRIPT)
    (tmp_path / "mlatui" / "newcomer.py").write_text('"""Added by another branch."""\n')
    (tmp_path / "mlatui" / "other.py").write_text('"""And another."""\n')
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*.py"))
    out = relayout(tmp_path)
    assert out.returncode == 2
    assert "mlatui.newcomer, mlatui.other" in out.stderr
    assert out.stderr.startswith("relayout: error: no mapping for these flat modules")
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*.py")) == before
