"""The wheel carries both packages, the scenarios, the demo recording, the stylesheet and the
embedded model (setuptools does not discover this layout by itself)."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_wheel_contents(tmp_path):
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps", "-q", "-w", str(tmp_path)],
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
        "mlatui/training/train.py",
        "mlatui/scenarios/default.toml",
        "mlatui/scenarios/glm47-flash.toml",
        "mlatui/scenarios/deepseek-v3.toml",
        "mlatui/scenarios/glm53-flash-sparse.toml",
        "mlatui/scenarios/demo.jsonl",
        "mlatui/models/embedded/model/config.json",
        "mlatui/models/embedded/draft/model.safetensors",
        "mlatui/models/embedded/MANIFEST.json",
        "widgets/app.py",
        "widgets/app.tcss",
    ):
        assert required in names, f"{required} missing from {wheel.name}"
    assert any(
        n.startswith("mlatui/models/embedded/model/") and n.endswith(".safetensors") for n in names
    )
    assert not any(n.startswith("tests/") for n in names)
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    assert "mlatui = mlatui.cli:entry" in zipfile.ZipFile(wheel).read(entry_points).decode()
