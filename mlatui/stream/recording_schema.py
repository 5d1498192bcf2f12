"""Reading a recording's line: one msgspec decoder over the events' tagged union, which checks
each field against its own type (finite floats, counts, 64-bit integers, bounded nesting), and
the rewrite of msgspec's validation messages into one `LineError(field, problem)`, e.g.
`step.ms: expected a number, got "fast"`. Nothing here imports mlx or textual.
"""

from __future__ import annotations

import json
import re
from typing import Any, Union

import msgspec

from mlatui.stream.events import EVENT_TYPES, Event
from mlatui.stream.phase_rows import decode_hook


class LineError(ValueError):
    """One line that does not fit the schema: `field` (like `step.ms`) and what is wrong."""

    def __init__(self, field: str, problem: str):
        super().__init__(f"{field}: {problem}")
        self.field = field
        self.problem = problem


_DECODER = msgspec.json.Decoder(Union[tuple(EVENT_TYPES.values())], dec_hook=decode_hook)  # noqa: UP007

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
    return kind if kind in EVENT_TYPES else "event"


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
    if re.match(r"Expected `str` matching regex", message):  # a name from a fixed set (arms)
        return LineError(field, f"unknown value {_lookup(line, path)!r}")
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
    """One JSONL line as its event; LineError when the JSON does not fit the schema,
    msgspec.DecodeError (a ValueError) when it is not JSON at all."""
    if isinstance(line, str):
        line = line.encode("utf-8", "surrogatepass")
    try:
        event: Event = _DECODER.decode(line)
    except msgspec.ValidationError as e:
        raise _explain(line, str(e)) from None
    except RecursionError:
        raise LineError("line", "nested too deeply") from None
    return event
