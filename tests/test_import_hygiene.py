"""mlatui's core never pulls in textual; widgets and replay never pull in mlx."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import ui_events

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = Path(__file__).parent / "fixtures" / "ui_tiny_run.jsonl"
CORE = ["mlatui", "mlatui.cli"]  # and every other module of mlatui but its widgets (walked)
WALK = (
    "import importlib, pkgutil, mlatui\n"
    "mods = [m.name for m in pkgutil.walk_packages(mlatui.__path__, 'mlatui.')]\n"
    "mods = [m for m in mods if not m.endswith('__main__')]  # that one runs the CLI\n"
    "mods = [m for m in mods if not m.startswith('mlatui.widgets')]  # the UI: textual's own\n"
)


def run_py(code: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env, timeout=120
    )


def test_core_does_not_import_textual():
    mods = ", ".join(repr(m) for m in CORE)
    code = WALK + f"import sys\nfor m in [{mods}, *mods]: importlib.import_module(m)\n"
    code += "import mlatui.cli as c; c.build_parser()\n"
    code += "print(len(mods), 'textual' in sys.modules, 'mlx.core' in sys.modules)"
    out = run_py(code)
    assert out.returncode == 0, out.stderr
    count, textual, mlx = out.stdout.split()
    assert int(count) > 80  # every module was imported, engine side included
    assert (textual, mlx) == ("False", "True")


def test_widgets_do_not_import_mlx():
    code = "import sys, mlatui.widgets.app, mlatui.widgets.render, mlatui.widgets.panes, mlatui.widgets.help, mlatui.commands.replay, mlatui.commands.demo, mlatui.commands.launch\nprint('mlx' in sys.modules, 'textual' in sys.modules)"
    out = run_py(code)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "True"]


def no_mlx_env(tmp_path) -> dict:
    broken = tmp_path / "nomlx" / "mlx"
    broken.mkdir(parents=True)
    (broken / "__init__.py").write_text(
        "raise ImportError('mlx is not installed on this machine (test)')\n"
    )
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(broken.parent), *filter(None, [env.get("PYTHONPATH")])]
    )
    return env


def test_replay_runs_where_mlx_cannot_be_imported(tmp_path):
    env = no_mlx_env(tmp_path)
    assert "mlx is not installed" in run_py("import mlx", env).stderr  # the trap works
    out = subprocess.run(
        [sys.executable, "-m", "mlatui", "replay", str(FIXTURE), "--dump"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    n = len(FIXTURE.read_text().splitlines())
    assert f"replayed {n} events through the dashboard; status completed" in out.stdout
    assert "Marginal cost" in out.stdout


def test_bad_recording_gets_one_line_error(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(ui_events.header().to_json() + "\n[1, 2]\n")
    out = subprocess.run(
        [sys.executable, "-m", "mlatui", "replay", str(bad)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == [
        f"mlatui: error: {bad}:2: line: expected an object, got [1, 2] — fix or delete that line, or "
        "replay with --skip-bad to leave bad lines out"
    ]


PURE = [
    "mlatui.measure.acceptance",
    "mlatui.run.phases.decode_verdict",
    "mlatui.measure.estimates",
    "mlatui.measure.sampler",
    "mlatui.gate.policy",
]
PURE_PACKAGES = ["mlatui.views", "mlatui.stream", "mlatui.config"]


def test_pure_modules_import_without_mlx(tmp_path):
    """Statistics, acceptance, verdicts and printers are pure Python: they run (and are tested)
    where mlx cannot even be imported."""
    env = no_mlx_env(tmp_path)
    code = "import importlib, pkgutil, sys\nmods = " + repr(PURE) + "\n"
    for pkg in PURE_PACKAGES:
        code += f"p = importlib.import_module({pkg!r})\n"
        code += "mods += [m.name for m in pkgutil.walk_packages(p.__path__, p.__name__ + '.')]\n"
    code += "for m in mods: importlib.import_module(m)\nprint(len(mods), 'mlx' in sys.modules)"
    out = run_py(code, env)
    assert out.returncode == 0, out.stderr
    count, mlx = out.stdout.split()
    assert int(count) > 30
    assert mlx == "False"
