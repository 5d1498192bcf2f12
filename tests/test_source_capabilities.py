"""Sources say what they can do (playback, live); the app asks that, never their class."""

from __future__ import annotations

import re
from pathlib import Path

from mlatui.stream.replay_source import FollowSource
from mlatui.stream.sources import LiveSource, ProcessSource, ReplaySource

ROOT = Path(__file__).resolve().parent.parent
RECORDING = ROOT / "tests" / "fixtures" / "ui_tiny_run.jsonl"


def test_a_replay_has_playback_and_is_not_live():
    src = ReplaySource(RECORDING)
    assert src.playback is src and not src.live
    src.playback.seek_to(src.playback.duration_s)
    assert src.playback.position_s == src.duration_s


def test_a_run_as_it_goes_is_live_without_playback():
    for cls in (LiveSource, ProcessSource, FollowSource):
        assert cls.live is True and cls.playback is None, cls.__name__


def test_the_app_never_asks_a_source_for_its_class():
    pattern = re.compile(r"isinstance\([^)]*,\s*\(?\s*(Replay|Live|Process|Follow)Source")
    found = [
        f"{path.relative_to(ROOT)}:{n}"
        for path in sorted((ROOT / "widgets").rglob("*.py"))
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if pattern.search(line)
    ]
    assert not found, found
