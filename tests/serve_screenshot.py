"""The README's browser screenshot: `python -m tests.serve_screenshot [OUT.png]` serves the demo
(`mlatui serve`), opens it in a headless Chromium and saves the page once the replay has ended
and its notice has left (default docs/serve-chromium.png)."""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from browser import Chromium, chromium_binary  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
NOTICE_S = 6  # Textual's notification timeout is 5 s


def main(out: Path) -> None:
    binary = chromium_binary()
    if binary is None:
        sys.exit("no chromium on PATH (apt-get install -y chromium)")
    server = subprocess.Popen(
        [sys.executable, "-m", "mlatui", "serve", "--port", "0", "--speed", "30"],
        stdout=subprocess.PIPE,
        text=True,
    )
    browser = None
    try:
        url = re.search(r"http://\S+", server.stdout.readline())
        assert url, "serve printed no URL"
        browser = Chromium(binary, Path(tempfile.mkdtemp(prefix="mlatui-chromium-")))
        page = browser.open_page(url.group(0))
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            screen = browser.screen(page)
            if screen and "run completed" in screen["text"]:
                break
            time.sleep(0.25)
        time.sleep(NOTICE_S)
        browser.screenshot(page, out)
        print(f"wrote {out}")
    finally:
        if browser is not None:
            browser.close()
        server.terminate()
        server.wait(timeout=10)


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "docs" / "serve-chromium.png")
