"""One interval type in every event: nested on write and on read."""

from __future__ import annotations

import json

import msgspec
import pytest

from mlatui.stream.events import EVENT_TYPES, Interval, Validity
from mlatui.stream.recording_schema import LineError, decode_event


def _validity(ratio: Interval | None) -> Validity:
    return Validity(1.0, "sweep", 512, 10.0, 10.1, -1.0, 2.0, True, "valid", ratio, 6)


def test_no_event_carries_a_flat_interval():
    for cls in EVENT_TYPES.values():
        names = {f.name for f in msgspec.structs.fields(cls)}
        flat = {n for n in names if n.endswith(("_low", "_high"))}
        assert not flat, f"{cls.__name__}: {sorted(flat)}"


def test_an_interval_is_written_nested_and_read_back():
    v = _validity(Interval(0.99, 0.985, 0.995, 12))
    line = v.to_json()
    assert json.loads(line)["ratio"] == {"median": 0.99, "low": 0.985, "high": 0.995, "n": 12}
    assert decode_event(line) == v
    assert decode_event(_validity(None).to_json()) == _validity(None)


def test_a_flat_interval_is_not_an_interval():
    """Intervals are nested records: flat `ratio`/`ratio_low`/`ratio_high` fields do not read."""
    line = json.loads(_validity(None).to_json())
    line |= {"ratio": 1.01, "ratio_low": 0.99, "ratio_high": 1.03, "rounds": 6}
    with pytest.raises(LineError) as e:
        decode_event(json.dumps(line))
    assert e.value.field == "validity.ratio" and "expected an object" in e.value.problem


@pytest.mark.parametrize(
    ("ratio", "field", "problem"),
    [
        ({"median": "x", "low": 0.9, "high": 1.1, "n": 3}, "validity.ratio.median", "a number"),
        ({"median": 1.0, "low": 1e999, "high": 1.1, "n": 3}, "validity.ratio.low", "finite"),
        ({"median": 1.0, "low": 0.9, "high": 1.1, "n": -1}, "validity.ratio.n", ">= 0"),
        ({"median": 1.0, "low": 0.9, "high": 1.1}, "validity.ratio.n", "missing"),
    ],
)
def test_a_bad_interval_is_named_by_its_field(ratio, field, problem):
    line = json.loads(_validity(None).to_json()) | {"ratio": ratio}
    with pytest.raises(LineError) as e:
        decode_event(json.dumps(line).replace("Infinity", "1e999"))
    assert e.value.field == field and problem in e.value.problem
