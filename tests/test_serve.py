"""`mlatui serve`: a recording's dashboard in a real headless Chromium (textual-serve), the
verdict read off the page's terminal; and what it refuses before serving anything."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from browser import Chromium, chromium_binary

from mlatui.cli import main
from mlatui.commands.demo import demo_recording
from mlatui.stream.recorder import iter_recording
from mlatui.views.dashboard_state import DashboardState
from mlatui.views.verdict_strip import verdict_parts

ROOT = Path(__file__).resolve().parents[1]
URL_LINE = re.compile(r"^mlatui: serving demo\.jsonl at (http://127\.0\.0\.1:(\d+)) \(")


def demo_verdict_forms() -> list[tuple[str, ...]]:
    """Every part of the demo's verdict strip, each in all the forms a width may choose."""
    state = DashboardState()
    for _, event in iter_recording(demo_recording()):
        state.apply(event)
    parts = verdict_parts(state)
    assert parts, "the demo recording has a verdict"
    return [p.forms for p in parts]


@pytest.mark.system
def test_the_demo_served_shows_its_verdict_in_a_real_browser(tmp_path):
    binary = chromium_binary()
    if binary is None:
        if os.environ.get("CI"):
            pytest.fail("no chromium on PATH: `apt-get install -y chromium` (.ci/run does)")
        pytest.skip("no chromium on PATH (apt-get install -y chromium)")
    server = subprocess.Popen(
        [sys.executable, "-m", "mlatui", "serve", "--port", "0", "--speed", "1000"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    browser = None
    try:
        line = server.stdout.readline()
        found = URL_LINE.match(line)
        assert found, f"serve's first line names the URL on the loopback: {line!r}"
        browser = Chromium(binary, tmp_path / "profile")
        page = browser.open_page(found.group(1))
        expected = demo_verdict_forms()
        screen, deadline = None, time.monotonic() + 25
        while time.monotonic() < deadline:
            screen = browser.screen(page)
            if screen and "run completed" in screen["text"]:
                break
            time.sleep(0.25)
        assert screen is not None, "the page made no terminal"
        text = screen["text"]
        assert "run completed" in text, f"the replay did not reach its end in the page:\n{text}"
        assert re.search(r"^ ?verdict ", text, re.M), f"no verdict strip in the page:\n{text}"
        missing = [forms[0] for forms in expected if not any(f in text for f in forms)]
        assert not missing, f"verdict parts not in the page: {missing}\n{text}"
    finally:
        if browser is not None:
            browser.close()
        server.terminate()
        server.wait(timeout=10)
    assert server.returncode in (0, -15), server.stderr.read()


def test_serve_refuses_a_taken_port_a_missing_file_and_a_live_run(capsys):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["serve", "--port", str(port)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"mlatui: error: cannot listen on 127.0.0.1:{port}") and "--port" in err
    assert main(["serve", str(ROOT / "nothere.jsonl")]) == 2
    assert "no such recording" in capsys.readouterr().err
    assert main(["serve", str(ROOT / "README.md")]) == 2  # not a recording: one line, no server
    assert "README.md:1" in capsys.readouterr().err
    assert main(["serve", "--live"]) == 2  # serve has no way to run the engine
    assert "unrecognized arguments: --live" in capsys.readouterr().err
