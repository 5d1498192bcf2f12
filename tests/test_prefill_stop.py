"""One stop signal ends a run within seconds even inside a long prefill: the prefill checks the
stop flag between its chunks, so the step in progress is one chunk, not the whole context (a
tiny model's prefill of 16K tokens takes ~45 s on the 2-core CPU; one chunk ~1-3 s)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mlatui.stream.events import RunEnd, Step
from mlatui.stream.recorder import read_recording

TINY = Path(__file__).parent / "fixtures" / "tiny.toml"
# far below the whole prefill's ~45 s, far above one chunk's few seconds on a loaded host
STOPPED_WITHIN_S = 15.0


@pytest.mark.system
def test_one_sigterm_ends_a_long_prefill_within_seconds_and_keeps_a_readable_recording(tmp_path):
    out = tmp_path / "run.jsonl"
    argv = ["bench", str(TINY), "--random-weights", "--contexts", "16384", "--phases", "sweep"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "mlatui", *argv, "--out", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 90
        while '"type":"phase_start"' not in (out.read_text() if out.exists() else ""):
            assert proc.poll() is None and time.monotonic() < deadline, "the run did not start"
            time.sleep(0.05)
        time.sleep(1.0)  # inside the prefill, which the phase starts with
        proc.send_signal(signal.SIGTERM)
        sent = time.monotonic()
        _, err = proc.communicate(timeout=60)
        took_s = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + signal.SIGTERM and "Traceback" not in err
    assert "stopped by SIGTERM" in err
    assert took_s < STOPPED_WITHIN_S, f"{took_s:.1f} s from SIGTERM to exit"
    recording = read_recording(out)  # readable: header, events, run_end
    assert not any(isinstance(e, Step) for e in recording.events)  # stopped inside the prefill
    end = recording.events[-1]
    assert isinstance(end, RunEnd) and end.status == "interrupted"
