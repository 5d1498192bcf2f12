"""The static checkers the suite runs (mypy, lint-imports, ruff), each once, started in the
background as soon as collection ends so that they overlap the other tests (mypy from cold takes
about a minute); `tests/test_static_checks.py` waits for them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
# where the conftest keeps the processes it started
STASH_KEY = pytest.StashKey[dict[str, "subprocess.Popen[str]"]]()


def commands() -> dict[str, list[str]]:
    return {
        "mypy": [sys.executable, "-m", "mypy", "--no-error-summary", "--no-pretty"],
        # what a Mac's run of the suite sees (typeshed and psutil's stubs differ there: no
        # os.sched_*, no Process.io_counters); its own cache, so the two runs keep theirs warm
        "mypy --platform darwin": [
            sys.executable,
            "-m",
            "mypy",
            "--no-error-summary",
            "--no-pretty",
            "--platform",
            "darwin",
            "--cache-dir",
            str(ROOT / ".mypy_cache" / "darwin"),
        ],  # fmt: skip
        "lint-imports": [str(BIN / "lint-imports"), "--no-cache"],
        "ruff": [str(BIN / "ruff"), "check", "--no-cache", "."],
    }


def start(root: Path = ROOT) -> dict[str, subprocess.Popen[str]]:
    # mypy's cache under the checkout: a warm run takes seconds
    env = {**os.environ, "MYPY_CACHE_DIR": str(root / ".mypy_cache"), "PYTHONPATH": str(root)}
    return {
        name: subprocess.Popen(
            cmd,
            cwd=root,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for name, cmd in commands().items()
    }
