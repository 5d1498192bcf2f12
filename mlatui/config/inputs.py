"""A scenario file as every command reads it (`bench`, `launch`, `bench observer`, the bench
targets): a directory, a FIFO, bytes that are not UTF-8, TOML that does not parse or an integer
beyond 64 bits get the same one-line error everywhere, before anything loads."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from mlatui.config.checks import SHAPE_HINT, ScenarioError

MAX_SCENARIO_BYTES = 1 << 20  # the shipped ones are a few KB
MAX_DEPTH = 32
INT64 = (-(2**63), 2**63 - 1)
SHIPPED_HINT = "pass a TOML file such as scenarios/default.toml (shipped: default, glm47-flash, deepseek-v3, glm53-flash-sparse)"


def _read_text(path: Path) -> str:
    if not path.exists():
        raise ScenarioError(f"{path}: no such scenario file", SHIPPED_HINT)
    if path.is_dir():
        raise ScenarioError(f"{path}: is a directory, not a scenario file", SHIPPED_HINT)
    if not path.is_file():
        raise ScenarioError(f"{path}: not a regular file (a FIFO or a device?)", SHIPPED_HINT)
    try:
        size = path.stat().st_size
        if size > MAX_SCENARIO_BYTES:
            what = f"{path}: {size:,} bytes is not a scenario (they are a few KB)"
            raise ScenarioError(what, SHIPPED_HINT)
        data = path.read_bytes()
    except OSError as e:
        raise ScenarioError(
            f"{path}: cannot read it ({e.strerror})", "check its permissions"
        ) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        what = f"{path}: not UTF-8 text (byte {e.start}: {e.reason})"
        raise ScenarioError(what, "save it as UTF-8 TOML") from None


def _check_integers(path: Path, value: object, key: str = "", depth: int = 0) -> None:
    """TOML integers are 64-bit; tomllib reads any size, and a huge one would be taken as a
    context or a count."""
    if depth > MAX_DEPTH:
        raise ScenarioError(f"{path}: nested too deeply to be a scenario", SHAPE_HINT)
    if isinstance(value, dict):
        for k, v in value.items():
            _check_integers(path, v, f"{key}.{k}" if key else str(k), depth + 1)
    elif isinstance(value, list):
        for v in value:
            _check_integers(path, v, key, depth + 1)
    elif isinstance(value, int) and not INT64[0] <= value <= INT64[1]:
        what = f"{path}: '{key}' = {str(value)[:24]}… is beyond a 64-bit integer (TOML's limit)"
        raise ScenarioError(what, SHAPE_HINT)


def read_toml(path: Path) -> dict[str, Any]:
    """The TOML table in the file at `path`, or a ScenarioError in one line."""
    text = _read_text(path)
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ScenarioError(f"{path}: invalid TOML ({e})", SHAPE_HINT) from None
    except RecursionError:
        raise ScenarioError(f"{path}: nested too deeply to be a scenario", SHAPE_HINT) from None
    except ValueError as e:  # e.g. an integer of thousands of digits
        raise ScenarioError(f"{path}: invalid TOML ({e})", SHAPE_HINT) from None
    _check_integers(path, raw)
    return raw
