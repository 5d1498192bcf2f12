"""One interval type in every event: nested on write, older flat fields nested on read."""

from __future__ import annotations

import dataclasses
import json

import pytest

from mlatui.stream.events import EVENT_TYPES, DecodeResult, Interval, PooledValidity, Validity
from mlatui.stream.recording_schema import LineError, decode_event


def _validity(ratio: Interval | None) -> Validity:
    return Validity(1.0, "sweep", 512, 10.0, 10.1, -1.0, 2.0, True, "valid", ratio, 6)


def test_no_event_carries_a_flat_interval():
    for cls in EVENT_TYPES.values():
        names = {f.name for f in dataclasses.fields(cls)}
        flat = {n for n in names if n.endswith(("_low", "_high"))}
        assert not flat, f"{cls.__name__}: {sorted(flat)}"


def test_an_interval_is_written_nested_and_read_back():
    v = _validity(Interval(0.99, 0.985, 0.995, 12))
    line = v.to_json()
    assert json.loads(line)["ratio"] == {"median": 0.99, "low": 0.985, "high": 0.995, "n": 12}
    assert decode_event(line) == v
    assert decode_event(_validity(None).to_json()) == _validity(None)


def test_an_older_flat_validity_reads_as_an_interval():
    line = json.loads(_validity(None).to_json())
    line |= {"ratio": 1.01, "ratio_low": 0.99, "ratio_high": 1.03, "rounds": 6}
    v = decode_event(json.dumps(line))
    assert isinstance(v, Validity) and v.ratio == Interval(1.01, 0.99, 1.03, 6)
    pooled = {"type": "pooled_validity", "t": 2.0, "phase": "sweep", "contexts": [512, 1024]}
    pooled |= {"rounds": 9, "quads": 14, "ratio": 1.002, "ratio_low": 0.99, "ratio_high": 1.01}
    pooled |= {"tolerance_pct": 2.0, "outcome": "valid", "estimator": "e", "ci_method": "m"}
    p = decode_event(json.dumps(pooled))
    assert isinstance(p, PooledValidity) and p.ratio == Interval(1.002, 0.99, 1.01, 14)


def test_an_older_decode_result_keeps_what_it_recorded():
    base = {"type": "decode_result", "t": 1.0, "phase": "decode", "arm": "stock", "context": 512}
    base |= {"depth": 2, "tokens": 64, "seconds": 1.0, "rounds": 4}
    measured = decode_event(
        json.dumps(base | {"tok_s": 50.0, "tok_s_low": 48.0, "tok_s_high": 52.0, "vs_plain": 1.2})
    )
    assert isinstance(measured, DecodeResult)
    assert measured.tok_s == Interval(50.0, 48.0, 52.0, 4)
    # schema 1 kept the median alone: an interval that says it is not known
    assert measured.vs_plain == Interval(1.2, 1.2, 1.2, 0) and not measured.vs_plain.known
    rejected = decode_event(
        json.dumps(
            base | {"tok_s": None, "vs_plain": None, "vs_plain_high": 0.7, "measured": False}
        )
    )
    assert isinstance(rejected, DecodeResult)
    assert rejected.tok_s is None and rejected.vs_plain is None


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
