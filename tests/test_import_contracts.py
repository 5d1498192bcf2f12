"""The import-linter contracts in pyproject.toml catch what they exist to catch (that the tree keeps
them is checked once, with mypy and ruff, in test_static_checks.py)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LINT = Path(sys.executable).with_name("lint-imports")


def lint(cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(cwd))
    return subprocess.run(
        [str(LINT), "--no-cache"], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


def test_an_upward_import_breaks_the_layers(tmp_path):
    for name in ("mlatui", "widgets"):  # mlatui/widgets stays the link to ../widgets
        shutil.copytree(
            ROOT / name, tmp_path / name, symlinks=True, ignore=shutil.ignore_patterns("embedded")
        )
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    gate = tmp_path / "mlatui" / "gate" / "policy.py"
    gate.write_text(gate.read_text() + "\n\ndef _upward():\n    from mlatui.run import engine\n")
    widget = tmp_path / "widgets" / "help.py"
    widget.write_text(widget.read_text() + "\n\ndef _mlx():\n    import mlx.core\n")
    out = lint(tmp_path)
    assert out.returncode != 0
    assert "mlatui.gate is not allowed to import mlatui.run" in out.stdout
    assert "mlatui.widgets.help -> mlx" in out.stdout
