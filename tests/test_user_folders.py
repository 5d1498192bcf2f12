"""The suite keeps out of the user's folders (conftest.py's user_folders_in_tmp): recordings, crash
logs and mlatui's cache of per-device figures go to this session's temporary folder, while the
mlx-vlm wheels are still looked up in the real user cache where CI puts them."""

from __future__ import annotations

from pathlib import Path

import platformdirs
import pytest
import vlm_sources

from mlatui.config.outputs import runs_dir
from mlatui.store import cache_dir


def test_recordings_logs_and_the_cache_stay_in_the_session_folder(
    tmp_path_factory: pytest.TempPathFactory,
):
    session = tmp_path_factory.getbasetemp()
    # the harness bias, bandwidth probes and crossovers all live under cache_dir()
    for folder in (runs_dir(), Path(platformdirs.user_state_dir("mlatui")), cache_dir()):
        assert folder.is_relative_to(session), f"{folder} is outside {session}"


def test_the_mlx_vlm_wheels_are_looked_up_in_the_real_user_cache(monkeypatch):
    monkeypatch.delenv(vlm_sources.WHEELS_ENV, raising=False)
    assert vlm_sources.wheel_dirs() == [Path(platformdirs.user_cache_dir("mlatui")) / "wheels"]
    assert not vlm_sources.wheel_dirs()[0].is_relative_to(cache_dir())
