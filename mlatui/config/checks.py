"""A scenario's errors, one line each: the file, the key path (`phase[1].contexts[0]`), what is
expected and what was found. Type and range errors come from msgspec's validation of the schema
(mlatui.config.scenario), said again in the words of the schema's own types.

A scenario file is read the same way by every command (`bench`, `launch`, `bench observer`, the
bench targets): a directory, a FIFO, bytes that are not UTF-8, TOML that does not parse or an
integer beyond 64 bits get the same one-line error everywhere, before anything loads."""

from __future__ import annotations

import copy
import functools
import json
import math
import operator
import re
import tomllib
from pathlib import Path
from typing import Any

import msgspec
from msgspec import inspect

from mlatui.errors import UserError

SHAPE_HINT = "compare it with scenarios/default.toml"


class ScenarioError(UserError, ValueError):
    """A scenario that cannot run, said in one line before anything loads."""


def fail(where: object, key: str, what: str, hint: str = "") -> ScenarioError:
    return ScenarioError(f"{where}: {key}: {what}" if key else f"{where}: {what}", hint)


def one_of(
    where: object, key: str, allowed: tuple[str, ...], got: object, what: str = "one of"
) -> ScenarioError:
    return fail(where, key, f"expected {what} {', '.join(allowed)}, got {toml_text(got)}")


def toml_text(value: Any) -> str:
    """A value as the file spells it (a string quoted, true/false, inf), at most 40 characters."""
    if isinstance(value, bool):
        text = str(value).lower()
    elif isinstance(value, float) and not math.isfinite(value):
        text = str(value)
    else:
        text = json.dumps(value, default=str)
    return text if len(text) <= 40 else text[:39] + "…"


def _words(t: inspect.Type, plural: bool = False) -> str:
    """What a schema type accepts, in words: `an integer >= 16`, `one of sweep, tune`."""
    if isinstance(t, inspect.Metadata):
        named = (t.extra or {}).get("one_of")  # an enum's values a file may name
        return "one of " + ", ".join(named) if named else _words(t.type, plural)
    if isinstance(t, inspect.UnionType):
        return " or ".join(
            _words(u, plural) for u in t.types if not isinstance(u, inspect.NoneType)
        )
    if isinstance(t, (inspect.EnumType, inspect.LiteralType)):
        values = [v.value for v in t.cls] if isinstance(t, inspect.EnumType) else t.values
        return "one of " + ", ".join(str(v) for v in values)
    if isinstance(t, (inspect.IntType, inspect.FloatType)):
        noun = ("integer" if isinstance(t, inspect.IntType) else "number") + ("s" if plural else "")
        article = "" if plural else ("an " if noun[0] == "i" else "a ")
        return article + noun + _bounds(t)
    if isinstance(t, inspect.DictType) and not isinstance(t.value_type, inspect.AnyType):
        return f"a table whose values are each {_words(t.value_type)}"
    if isinstance(t, (inspect.ListType, inspect.VarTupleType)):
        some = "a non-empty array" if t.min_length else "an array"
        if isinstance(t.item_type, inspect.AnyType):
            return some
        each = _words(t.item_type, plural=True)
        return f"{some}, each {each}" if each.startswith("one of") else f"{some} of {each}"
    simple = {
        inspect.BoolType: "true or false",
        inspect.DictType: "tables" if plural else "a table",
        inspect.StrType: "strings"
        if plural
        else "a non-empty string"
        if _filled(t)
        else "a string",
        inspect.StructType: "tables" if plural else "a table",
        inspect.TupleType: "pairs" if plural else "a pair",
    }
    return simple.get(type(t), "a value")


def _filled(t: inspect.Type) -> bool:
    return isinstance(t, inspect.StrType) and bool(t.min_length or t.pattern)


def _bounds(t: inspect.IntType | inspect.FloatType) -> str:
    low, high = t.ge if t.ge is not None else t.gt, t.le if t.le is not None else t.lt
    if low is not None and high is not None:
        return f" in [{_n(low)}, {_n(high)}{']' if t.lt is None else ')'}"
    if low is not None:
        return f" {'>=' if t.gt is None else '>'} {_n(low)}"
    return f" {'<=' if t.lt is None else '<'} {_n(high)}" if high is not None else ""


def _n(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


def _step(t: inspect.Type, segment: str) -> tuple[inspect.Type, str | None]:
    """The type one path segment (`.name`, `[3]`) leads to, and its field's description."""
    while isinstance(t, (inspect.Metadata, inspect.UnionType)):
        if isinstance(t, inspect.Metadata):
            t = t.type
        else:
            t = next(u for u in t.types if not isinstance(u, inspect.NoneType))
    if isinstance(t, inspect.StructType) and segment.startswith("."):
        f = next((f for f in t.fields if f.encode_name == segment[1:]), None)
        if f is None:
            return inspect.AnyType(), None
        kinds = f.type.types if isinstance(f.type, inspect.UnionType) else (f.type,)
        meta = next((k for k in kinds if isinstance(k, inspect.Metadata)), None)
        return f.type, (meta.extra_json_schema or {}).get("description") if meta else None
    if isinstance(t, (inspect.ListType, inspect.VarTupleType)):
        return t.item_type, None
    if isinstance(t, inspect.DictType):
        return t.value_type, None
    if isinstance(t, inspect.TupleType):
        return t.item_types[int(segment[1:-1])], None
    return inspect.AnyType(), None


SEGMENT = re.compile(r"\.[^.\[]+|\[\d+\]|\[\.\.\.\]")


def _walk(schema: type, raw: Any, path: str) -> tuple[str, inspect.Type, Any, str | None]:
    """(the key path as the file spells it, the schema type there, the value found, a hint)."""
    t: inspect.Type = inspect.type_info(schema)
    value, shown, hint, trail = raw, "", None, list[str | int]()
    for segment in SEGMENT.findall(path):
        if segment == "[...]":  # a value in a table: msgspec does not say which key
            key = _failing_key(schema, raw, trail, value, path)
            if key is None:
                break
            segment = f".{key}"
        t, described = _step(t, segment)
        hint = described or hint
        if segment.startswith(".") and isinstance(value, dict):
            value, shown = value.get(segment[1:]), f"{shown}{segment}"
            trail.append(segment[1:])
            continue
        shown += segment
        i = int(segment[1:-1])
        value = value[i] if isinstance(value, list) and i < len(value) else None
        trail.append(i)
    return shown.lstrip("."), t, value, hint


def _failing_key(
    schema: type, raw: Any, trail: list[str | int], table: Any, path: str
) -> str | None:
    """The key of the table entry that fails at `path` on its own (the file with only that
    entry in the table), the first in the table's order, as msgspec checks them."""
    if not trail or not isinstance(table, dict):
        return None
    for key, entry in table.items():
        trial = copy.deepcopy(raw)
        functools.reduce(operator.getitem, trail[:-1], trial)[trail[-1]] = {key: entry}
        try:
            msgspec.convert(trial, schema)
        except msgspec.ValidationError as e:
            if str(e).endswith(f"`${path}`"):
                return str(key)
    return None


def validation_error(
    where: object, schema: type, raw: Any, e: msgspec.ValidationError, prefix: str = ""
) -> ScenarioError:
    """msgspec's `Expected `int` >= 16 - at `$.phase[0].contexts[0]`` as
    `FILE: phase[0].contexts[0]: expected an integer >= 16, got 8 — HINT` (`prefix`: where
    `raw` sits in the file, e.g. model.config)."""
    text, _, at = str(e).partition(" - at `")
    shown, t, value, hint = _walk(schema, raw, at.rstrip("`").removeprefix("$"))
    shown = ".".join(k for k in (prefix, shown) if k)
    field = re.match(r"Object (contains unknown|missing required) field `(.+)`", text)
    if field and field.group(1) == "contains unknown":
        allowed = ", ".join(f.encode_name for f in _fields(t))
        return fail(where, shown, f"unknown key '{field.group(2)}'", f"allowed: {allowed}")
    if field:
        inner, described = _step(t, "." + field.group(2))
        what = f"'{field.group(2)}' is required ({_words(inner)})"
        return fail(where, shown, what, described or SHAPE_HINT)
    if text.startswith(("Expected", "Invalid enum value")):
        text = f"expected {_words(t)}, got {toml_text(value)}"
    return fail(where, shown, text, hint or SHAPE_HINT)


def _fields(t: inspect.Type) -> tuple[inspect.Field, ...]:
    while isinstance(t, (inspect.Metadata, inspect.UnionType)):
        t = t.type if isinstance(t, inspect.Metadata) else t.types[0]
    return t.fields if isinstance(t, inspect.StructType) else ()


# ---- reading the file ---------------------------------------------------------------------------

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
