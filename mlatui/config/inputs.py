"""Scenario files as every command reads them (`bench`, `launch`, `bench observer`): one path,
so a directory, a FIFO, bytes that are not UTF-8 or a table of the wrong shape get the same
one-line error everywhere, before anything loads."""

from __future__ import annotations

import tomllib
from pathlib import Path

from mlatui.config.checks import SHAPE_HINT
from mlatui.config.model_config_types import check_config_types
from mlatui.config.scenario import Scenario, parse_scenario, shipped
from mlatui.errors import UserError

MAX_SCENARIO_BYTES = 1 << 20  # the shipped ones are a few KB
MAX_DEPTH = 32
INT64 = (-(2**63), 2**63 - 1)
SHIPPED_HINT = "pass a TOML file such as scenarios/default.toml (shipped: default, glm47-flash, deepseek-v3, glm53-flash-sparse)"


def _read_text(path: Path) -> str:
    if not path.exists():
        raise UserError(f"{path}: no such scenario file", SHIPPED_HINT)
    if path.is_dir():
        raise UserError(f"{path}: is a directory, not a scenario file", SHIPPED_HINT)
    if not path.is_file():
        raise UserError(f"{path}: not a regular file (a FIFO or a device?)", SHIPPED_HINT)
    try:
        size = path.stat().st_size
        if size > MAX_SCENARIO_BYTES:
            raise UserError(
                f"{path}: {size:,} bytes is not a scenario (they are a few KB)", SHIPPED_HINT
            )
        data = path.read_bytes()
    except OSError as e:
        raise UserError(f"{path}: cannot read it ({e.strerror})", "check its permissions") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise UserError(
            f"{path}: not UTF-8 text (byte {e.start}: {e.reason})", "save it as UTF-8 TOML"
        ) from None


def _check_integers(path: Path, value: object, key: str = "", depth: int = 0) -> None:
    """TOML integers are 64-bit; tomllib reads any size, and a huge one would be taken as a
    context or a count."""
    if depth > MAX_DEPTH:
        raise UserError(f"{path}: nested too deeply to be a scenario", SHAPE_HINT)
    if isinstance(value, dict):
        for k, v in value.items():
            _check_integers(path, v, f"{key}.{k}" if key else str(k), depth + 1)
    elif isinstance(value, list):
        for v in value:
            _check_integers(path, v, key, depth + 1)
    elif (
        isinstance(value, int) and not isinstance(value, bool) and not INT64[0] <= value <= INT64[1]
    ):
        raise UserError(
            f"{path}: '{key}' = {str(value)[:24]}… is beyond a 64-bit integer (TOML's limit)",
            SHAPE_HINT,
        )


def read_scenario(path: str | Path | None) -> Scenario:
    """The scenario at `path` (None: the shipped default), or a UserError in one line."""
    where = Path(path) if path is not None else shipped("default")
    text = _read_text(where)
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise UserError(f"{where}: invalid TOML ({e})", SHAPE_HINT) from None
    except RecursionError:
        raise UserError(f"{where}: nested too deeply to be a scenario", SHAPE_HINT) from None
    except ValueError as e:  # e.g. an integer of thousands of digits
        raise UserError(f"{where}: invalid TOML ({e})", SHAPE_HINT) from None
    _check_integers(where, raw)
    scenario = parse_scenario(where, raw)
    _check_config_types(where, scenario)
    return scenario


def _check_config_types(where: Path, scenario: Scenario) -> None:
    """[model.config] and [draft.config] against their family's declared types, before any
    build."""
    model = scenario.model
    model_type = model.config.get("model_type") or model.family
    check_config_types(f"{where} [model.config]", model_type, model.config)
    draft = scenario.draft.config or {}
    check_config_types(f"{where} [draft.config]", draft.get("model_type"), draft)
