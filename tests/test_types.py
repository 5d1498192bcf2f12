"""The type checker is part of the suite: mypy over mlatui/ and widgets/ ([tool.mypy] in
pyproject.toml: strict on the lower layers) must find nothing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_mypy_finds_no_errors():
    # the cache under the checkout: a warm run takes seconds, a cold one about a minute
    env = {**os.environ, "MYPY_CACHE_DIR": str(ROOT / ".mypy_cache")}
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-error-summary", "--no-pretty"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, f"mypy found errors:\n{proc.stdout}{proc.stderr}"
