"""The header's typed records read every kept recording as it was written: its settings and
distributed world decode and encode to the same keys in the same order (a setting a recording
lacks stays absent), and a stored harness bias is keyed by the same string the header's plain
values gave (so biases stored before the settings were typed still match)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from mlatui.store import bias_key
from mlatui.stream.recording_schema import decode_event
from tests.replay_dumps import PATTERNS

ROOT = Path(__file__).resolve().parent.parent


def _headers() -> list[tuple[str, str]]:
    """(name, first line) of every kept recording (tests.replay_dumps' PATTERNS)."""
    out = []
    for path in sorted(p for pattern in PATTERNS for p in ROOT.glob(pattern)):
        name = path.relative_to(ROOT).as_posix()
        raw = gzip.open(path, "rt") if name.endswith(".gz") else path.open()
        with raw as f:
            first = f.readline()
        if json.loads(first).get("type") == "header":
            out.append((name, first))
    return out


HEADERS = _headers()


def _key_as_plain_values(scenario: str, settings: dict, model: str) -> str:
    """How the key was built from the header's settings as a dict."""
    parts = [
        scenario,
        model,
        f"fill={settings.get('fill', 'prefill')}",
        f"threads={settings.get('arm_threads', '')}",
        f"settle={settings.get('settle', True)}",
        f"random={bool(settings.get('random_weights'))}",
    ]
    return " | ".join(parts)


@pytest.mark.parametrize(("name", "line"), HEADERS, ids=[n.rsplit("/", 1)[-1] for n, _ in HEADERS])
def test_a_kept_header_reads_and_writes_its_own_settings(name, line):
    raw = json.loads(line)
    header = decode_event(line)
    again = json.loads(header.to_json())
    for field in ("settings", "distributed"):
        assert list(again[field]) == list(raw[field]), (name, field)
        assert again[field] == raw[field], (name, field)
    scenario = raw["scenario"]["name"]
    assert bias_key(scenario, header.settings, "m") == _key_as_plain_values(
        scenario, raw["settings"], "m"
    )


def test_the_kept_recordings_cover_old_and_new_settings():
    """Some kept headers lack settings a run records today (settle, draft_kinds): the test above
    reads those as the plain values did."""
    settings = [json.loads(line)["settings"] for _, line in HEADERS]
    assert len(HEADERS) >= 30
    assert any("settle" not in s for s in settings) and any(
        "draft_kinds" not in s for s in settings
    )
    assert any("arms" in s and "runtime" in s for s in settings)
