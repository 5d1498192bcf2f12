"""The tests' tiny random-weight model (fixtures/tiny.toml) with a phase of the test's own."""

from __future__ import annotations

from pathlib import Path

TINY = Path(__file__).parent / "fixtures" / "tiny.toml"


def tiny_with_phase(path: Path, phase: str, acceptance: float | None = None) -> Path:
    """Write, at `path`, tiny.toml's model and draft with `phase` (the TOML keys of one
    [[phase]] table) as the only phase; `acceptance`: the synthetic draft's, when given."""
    text = TINY.read_text().split("[[phase]]")[0]
    if acceptance is not None:
        text = text.replace("acceptance = 0.75", f"acceptance = {acceptance}")
    path.write_text(f"{text}[[phase]]\n{phase}")
    return path
