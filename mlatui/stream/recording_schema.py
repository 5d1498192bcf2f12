"""The typed schema of a recording line, checked on read with msgspec.

Each event dataclass in mlatui/stream/events.py gets a msgspec Struct mirror, made from the dataclass's
own fields (so the two never drift apart), tagged by `type`. A line is decoded in one pass into
its mirror, then copied into the public dataclass. Floats must be finite, integers fit in 64
bits, nesting is bounded; any other shape is a `LineError(field, problem)`, e.g.
`step.ms: expected a number, got "fast"`. Fields added in later schema versions have defaults,
so recordings of schema 1 and 2 decode too; lines of schema < 7 whose intervals were flat
fields are nested first (mlatui.stream.legacy). Nothing here imports mlx or textual.
"""

from __future__ import annotations

import dataclasses
import json
import re
import sys
import types
import typing
from typing import Annotated, Any, Literal, Union

import msgspec

from mlatui.stream.events import EVENT_TYPES, Event, Interval
from mlatui.stream.legacy import FLAT_INTERVALS, is_flat, nest_intervals

FINITE_FLOAT = Annotated[float, msgspec.Meta(ge=-sys.float_info.max, le=sys.float_info.max)]
SCHEMA_VERSION_TYPE = Annotated[int, msgspec.Meta(ge=1)]
SECONDS = Annotated[float, msgspec.Meta(ge=0, le=sys.float_info.max)]  # since the run started
ARM = Literal["stock", "patched"]
COUNT = Annotated[int, msgspec.Meta(ge=0)]
# (event type or "*", field) -> a narrower type than the dataclass's annotation
FIELD_TYPES: dict[tuple[str, str], Any] = {
    ("*", "t"): SECONDS,
    ("header", "schema_version"): SCHEMA_VERSION_TYPE,
    ("header", "geometry"): dict[str, COUNT],
    ("step", "width"): Annotated[int, msgspec.Meta(ge=1)],
    ("step", "context"): COUNT,
    ("step", "arm"): ARM,
    ("spec_step", "arm"): ARM,
    ("decode_result", "arm"): ARM,
}


class IntervalLine(msgspec.Struct, kw_only=True):
    """Interval's mirror: finite ends, a count."""

    median: FINITE_FLOAT
    low: FINITE_FLOAT
    high: FINITE_FLOAT
    n: COUNT


class LineError(ValueError):
    """One line that does not fit the schema: `field` (like `step.ms`) and what is wrong."""

    def __init__(self, field: str, problem: str):
        super().__init__(f"{field}: {problem}")
        self.field = field
        self.problem = problem


def _checked(hint: Any) -> Any:
    """The dataclass annotation with every float made finite and dicts keyed by strings."""
    if hint is float:
        return FINITE_FLOAT
    if hint is Interval:
        return IntervalLine
    if hint is dict:
        return dict[str, Any]
    origin = typing.get_origin(hint)
    if origin in (Union, types.UnionType):
        return Union[tuple(_checked(a) for a in typing.get_args(hint))]  # noqa: UP007
    if origin is tuple:
        args = typing.get_args(hint)
        if len(args) == 2 and args[1] is Ellipsis:
            return types.GenericAlias(tuple, (_checked(args[0]), ...))
    return hint


def _mirror(cls: type[Event]) -> type[msgspec.Struct]:
    hints = typing.get_type_hints(cls)
    fields: list[tuple[str, Any] | tuple[str, Any, Any]] = []
    for f in dataclasses.fields(cls):
        hint = _checked(hints[f.name])
        hint = FIELD_TYPES.get((cls.type, f.name), FIELD_TYPES.get(("*", f.name), hint))
        if f.default is not dataclasses.MISSING:
            fields.append((f.name, hint, f.default))
        elif f.default_factory is not dataclasses.MISSING:
            fields.append((f.name, hint, msgspec.field(default_factory=f.default_factory)))
        else:
            fields.append((f.name, hint))
    return msgspec.defstruct(
        f"{cls.__name__}Line", fields, tag_field="type", tag=cls.type, kw_only=True
    )


MIRRORS: dict[str, type[msgspec.Struct]] = {name: _mirror(cls) for name, cls in EVENT_TYPES.items()}
_FIELDS: dict[str, tuple[str, ...]] = {
    name: tuple(f.name for f in dataclasses.fields(cls)) for name, cls in EVENT_TYPES.items()
}


def _interval_fields(cls: type[Event]) -> tuple[str, ...]:
    hints = typing.get_type_hints(cls)
    return tuple(
        f.name
        for f in dataclasses.fields(cls)
        if hints[f.name] is Interval or Interval in typing.get_args(hints[f.name])
    )


_INTERVAL_FIELDS = {name: _interval_fields(cls) for name, cls in EVENT_TYPES.items()}
_DECODER = msgspec.json.Decoder(Union[tuple(MIRRORS.values())])  # noqa: UP007

_TYPE_WORDS = {
    "float": "a number",
    "int": "an integer",
    "str": "a string",
    "bool": "true or false",
    "array": "a list",
    "object": "an object",
    "null": "null",
}
_EXPECTED = re.compile(r"Expected `(?P<want>[^`]+)`, got `(?P<got>[^`]+)`")
_BOUND = re.compile(r"Expected `(?P<want>[^`]+)` (?P<bound>[<>]=? \S+)$")
_AT = re.compile(r" - at `\$(?P<path>[^`]*)`$")
_STEP = re.compile(r"\.(\w+)|\[(\d+)\]|\[\.\.\.\]")


def _words(type_names: str) -> str:
    return " or ".join(_TYPE_WORDS.get(t.strip(), t.strip()) for t in type_names.split("|"))


def _lookup(line: bytes, path: str) -> Any:
    """The offending value, for the message (only on the error path); ... when unknown."""
    try:
        value = json.loads(line)
        for m in _STEP.finditer(path):
            if m.group(1) is not None:
                value = value[m.group(1)]
            elif m.group(2) is not None:
                value = value[int(m.group(2))]
            else:
                return ...
        return value
    except (ValueError, RecursionError, LookupError, TypeError):
        return ...


def _shown(value: Any) -> str:
    try:
        text = json.dumps(value)
    except (TypeError, ValueError, RecursionError):
        text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


class _Kind(msgspec.Struct):
    type: str = "event"


_KIND_DECODER = msgspec.json.Decoder(_Kind)


def _kind_of(line: bytes) -> str:
    """The line's event type, for the field name ("event" when it has none we know)."""
    try:
        kind = _KIND_DECODER.decode(line).type
    except (msgspec.DecodeError, RecursionError):
        return "event"
    return kind if kind in MIRRORS else "event"


def _field_name(kind: str, path: str) -> str:
    dotted = path.lstrip(".").replace("[...]", "[key]")
    return f"{kind}.{dotted}" if dotted else kind


def _explain(line: bytes, message: str) -> LineError:
    at = _AT.search(message)
    path = at.group("path") if at else ""
    message = message[: at.start()] if at else message
    kind = _kind_of(line)
    if path == ".type":
        return LineError("type", f"unknown event type {_shown(_lookup(line, '.type'))}")
    missing = re.match(r"Object missing required field `(\w+)`", message)
    if missing:
        name = missing.group(1)
        if name == "type":
            return LineError("type", "missing (not an mlatui event)")
        return LineError(_field_name(kind, f"{path}.{name}"), "missing")
    field = _field_name(kind, path) if path else "line"
    expected = _EXPECTED.match(message)
    if expected:
        problem = f"expected {_words(expected.group('want'))}"
        value = _lookup(line, path)
        if expected.group("got") != "null" and value is not ...:
            problem += f", got {_shown(value)}"
        else:
            problem += f", got {_words(expected.group('got'))}"
        return LineError(field, problem)
    bound = _BOUND.match(message)
    if bound:
        value = _lookup(line, path)
        got = f", got {_shown(value)}" if value is not ... else ""
        return LineError(
            field, f"expected {_words(bound.group('want'))} {bound.group('bound')}{got}"
        )
    enum = re.match(r"Invalid enum value (?P<value>.+)$", message)
    if enum:
        return LineError(field, f"unknown value {enum.group('value')}")
    if message.startswith("Integer value out of range"):
        return LineError(field, "integer out of range (at most 64 bits)")
    if message.startswith("Number out of range"):
        return LineError(field, "number out of range (must be finite)")
    if message.startswith("Expected `"):
        return LineError(field, message[0].lower() + message[1:])
    return LineError(field, message[0].lower() + message[1:])


def decode_event(line: bytes | str) -> Event:
    """One JSONL line as its event dataclass; LineError when the JSON does not fit the schema,
    msgspec.DecodeError (a ValueError) when it is not JSON at all."""
    if isinstance(line, str):
        line = line.encode("utf-8", "surrogatepass")
    try:
        mirror = _DECODER.decode(line)
    except msgspec.ValidationError as e:
        nested = _nested(line)
        if nested is None:
            raise _explain(line, str(e)) from None
        line = nested
        try:
            mirror = _DECODER.decode(line)
        except msgspec.ValidationError as e:
            raise _explain(line, str(e)) from None
    except RecursionError:
        raise LineError("line", "nested too deeply") from None
    kind = type(mirror).__struct_config__.tag
    cls = EVENT_TYPES[kind]
    values = {name: getattr(mirror, name) for name in _FIELDS[kind]}
    for name in _INTERVAL_FIELDS[kind]:
        v = values[name]
        if v is not None:
            values[name] = Interval(v.median, v.low, v.high, v.n)
    return cls(**values)


def _nested(line: bytes) -> bytes | None:
    """An older line with flat intervals, rewritten with nested ones; None if it is not one."""
    try:
        value = msgspec.json.decode(line)
    except (msgspec.DecodeError, RecursionError):
        return None
    if not isinstance(value, dict):
        return None
    kind = value.get("type")
    if not isinstance(kind, str) or kind not in FLAT_INTERVALS or not is_flat(kind, value):
        return None
    return msgspec.json.encode(nest_intervals(kind, value))
