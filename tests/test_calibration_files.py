"""Calibration files are validated on read: what cannot be used is reported with the file's
name and ignored, and the formula is used."""

from __future__ import annotations

import json

import pytest

from mlatui import store as calibration
from mlatui.gate import mla
from mlatui.store import CalibrationWarning
from tests.random_models import build_model

GEOMETRY = mla.Geometry(512, 128, 128, 2)
ENV = {"backend": "cpu", "device_name": "test-cpu", "blas": "openblas"}


@pytest.fixture
def store(tmp_path, monkeypatch):
    monkeypatch.setenv(calibration.CACHE_ENV, str(tmp_path))
    path = calibration.calibration_path(ENV)
    path.parent.mkdir(parents=True)

    def write(data) -> object:
        path.write_text(data if isinstance(data, str) else json.dumps(data))
        return path

    return write


def entry(**changes):
    base = {"crossovers": {"1024": 300, "8192": 400}, "family": "deepseek_v3", "num_heads": 2}
    base.update(changes)
    return base


def test_a_good_entry_loads(store):
    store({GEOMETRY.key: entry(env=ENV)})
    assert calibration.load_crossovers(GEOMETRY, ENV) == {1024: 300, 8192: 400}


@pytest.mark.parametrize(
    "bad,needle",
    [
        (entry(crossovers={"1024": 0}), "crossover 0 at context 1024 is not a positive integer"),
        (entry(crossovers={"1024": -4}), "crossover -4"),
        (entry(crossovers={"1024": 2.5}), "crossover 2.5"),
        (entry(crossovers={"1024": "300"}), "crossover '300'"),
        (entry(crossovers={"1024": True}), "crossover True"),
        (entry(crossovers={"abc": 3}), "context 'abc' is not a positive integer"),
        (entry(crossovers={"-5": 3}), "context '-5'"),
        (entry(crossovers={}), "'crossovers' must be a non-empty table"),
        (entry(crossovers=[1, 2]), "'crossovers' must be a non-empty table"),
        (entry(num_heads=0), "'num_heads' 0"),
        (entry(env={**ENV, "device_name": "other"}), "measured on another device"),
        ([1, 2], "the entry is a list"),
    ],
)
def test_unusable_entries_are_reported_and_ignored(store, bad, needle):
    path = store({GEOMETRY.key: bad})
    with pytest.warns(CalibrationWarning, match=str(path)) as seen:
        assert calibration.load_crossovers(GEOMETRY, ENV) is None
    text = " ".join(str(w.message) for w in seen)
    assert needle in text and "using the formula" in text


@pytest.mark.parametrize("text", ["[1, 2]", "null", "{not json", '"x"'])
def test_unusable_files_are_reported_and_ignored(store, text):
    path = store(text)
    with pytest.warns(CalibrationWarning, match=str(path)):
        assert calibration.load_crossovers(GEOMETRY, ENV) is None


def test_unknown_keys_are_reported_and_the_rest_used(store):
    store({GEOMETRY.key: entry(colour="blue"), "gpu-7": {}, "r1-n1-v1": entry()})
    with pytest.warns(CalibrationWarning) as seen:
        assert calibration.load_crossovers(GEOMETRY, ENV) == {1024: 300, 8192: 400}
    text = " ".join(str(w.message) for w in seen)
    assert "'gpu-7'" in text and "colour" in text and "r1-n1-v1" not in text


def test_a_zero_crossover_falls_back_to_the_formula(tmp_path, monkeypatch):
    """It used to give the patched arm a gate below 1, silently."""
    monkeypatch.setenv(calibration.CACHE_ENV, str(tmp_path))
    model = build_model("deepseek_v3", layers=1)
    geometry = mla.geometry_of(mla.mla_modules(model)[0][1])
    path = calibration.calibration_path()
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({geometry.key: {"crossovers": {"64": 0}}}))
    with pytest.warns(CalibrationWarning, match="not a positive integer"):
        report = mla.patch_model(model, threshold="calibrated")
    assert report.policy == "formula" and report.threshold == 170
