"""A headless Chromium driven over the DevTools protocol on a pipe (no Playwright, no port):
open a page and read what its terminal (xterm.js, as textual-serve draws it) shows.

xterm.js paints on a canvas, so the page's DOM holds no text; a script that runs before the
page's own keeps each xterm.js Terminal it creates, and the text is read from the terminal's
screen through its public buffer API (what its renderer paints)."""

from __future__ import annotations

import json
import os
import select
import shutil
import subprocess
import time
from pathlib import Path

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)

# xterm.js's public Terminal sets `this._core` in its constructor: a setter on Object.prototype
# sees every object that does so, and keeps those that are terminals (they have loadAddon)
KEEP_TERMINALS = """
window.__terminals = [];
Object.defineProperty(Object.prototype, "_core", {
  configurable: true,
  set(value) {
    Object.defineProperty(this, "_core", {value, writable: true, configurable: true});
    if (typeof this.loadAddon === "function") window.__terminals.push(this);
  },
});
"""

SCREEN_TEXT = """(() => {
  const t = window.__terminals[0];
  if (!t) return null;
  const b = t.buffer.active, rows = [];
  for (let y = 0; y < t.rows; y++) {
    const line = b.getLine(b.viewportY + y);
    rows.push(line ? line.translateToString(true) : "");
  }
  return JSON.stringify({cols: t.cols, rows: t.rows, text: rows.join("\\n")});
})()"""


def chromium_binary() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


class Chromium:
    """One headless browser; `send` is one DevTools call, answered or raising."""

    def __init__(self, binary: str, profile: Path, width: int = 1400, height: int = 900):
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()

        def wire_pipes() -> None:  # the protocol's pipe is fds 3 (commands) and 4 (replies)
            os.dup2(to_browser_r, 3)
            os.dup2(from_browser_w, 4)

        self.proc = subprocess.Popen(
            [
                binary,
                *FLAGS,
                "--remote-debugging-pipe",
                f"--user-data-dir={profile}",
                f"--window-size={width},{height}",
                "about:blank",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=wire_pipes,
            close_fds=False,
        )
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._next_id = 0
        self._buffer = b""

    def send(
        self,
        method: str,
        params: dict | None = None,
        session: str | None = None,
        timeout_s: float = 20.0,
    ) -> dict:
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout_s
        while True:
            reply = self._read(deadline)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})

    def _read(self, deadline: float) -> dict:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._from_browser], [], [], left)[0]:
                raise TimeoutError("chromium did not answer")
            chunk = os.read(self._from_browser, 1 << 16)
            if not chunk:
                raise RuntimeError(f"chromium exited ({self.proc.poll()})")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def open_page(self, url: str) -> str:
        """A new tab on `url`, with the terminal keeper in place before the page's scripts."""
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})
        sid = session["sessionId"]
        self.send("Page.enable", session=sid)
        self.send("Page.addScriptToEvaluateOnNewDocument", {"source": KEEP_TERMINALS}, sid)
        self.send("Page.navigate", {"url": url}, sid)
        return sid

    def evaluate(self, session: str, expression: str):
        result = self.send(
            "Runtime.evaluate", {"expression": expression, "returnByValue": True}, session
        )
        return result.get("result", {}).get("value")

    def screen(self, session: str) -> dict | None:
        """{cols, rows, text} of the page's first terminal, None before it exists."""
        value = self.evaluate(session, SCREEN_TEXT)
        return json.loads(value) if value else None

    def screenshot(self, session: str, path: Path) -> None:
        import base64

        data = self.send("Page.captureScreenshot", {"format": "png"}, session)["data"]
        path.write_bytes(base64.b64decode(data))

    def close(self) -> None:
        try:
            self.send("Browser.close", timeout_s=5)
        except (RuntimeError, TimeoutError, OSError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._to_browser)
        os.close(self._from_browser)
