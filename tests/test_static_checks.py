"""The type checker, the import contracts and the linter are part of the suite: mypy over mlatui/,
widgets/ and tools/ ([tool.mypy] in pyproject.toml: strict on the lower layers), once for this
platform and once as on macOS (`--platform darwin`: a Linux run catches what fails on a Mac),
lint-imports ([tool.importlinter]: packages import downwards only, only the commands open the
Textual app, widgets never import mlx or the engine side) and ruff must find nothing. They run
once, in the background from the end of collection (tests/conftest.py)."""

from __future__ import annotations

import tomllib

import static_checks

TIMEOUT_S = 600


def test_mypy_lint_imports_and_ruff_find_nothing(request):
    procs = request.config.stash.get(static_checks.STASH_KEY, None) or static_checks.start()
    outputs = {name: proc.communicate(timeout=TIMEOUT_S)[0] for name, proc in procs.items()}
    failures = [
        f"{name} (exit {proc.returncode}):\n{outputs[name]}"
        for name, proc in procs.items()
        if proc.returncode != 0
    ]
    assert not failures, "\n".join(failures)
    contracts = tomllib.loads((static_checks.ROOT / "pyproject.toml").read_text())["tool"][
        "importlinter"
    ]["contracts"]
    assert f"Contracts: {len(contracts)} kept, 0 broken." in outputs["lint-imports"]
