"""A headless run's progress on stderr, one line per event that says something (pure: events in,
text out; the stream is any file)."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import Any, TextIO

from mlatui.stream.events import Event
from mlatui.stream.phrases import TOLERANCE_RULE, interval_text, pct_ends


class StderrProgress:
    """Phase, progress and ETA on stderr. Called between steps, never inside a timed region."""

    def __init__(self, stream: TextIO | None = None):
        self.stream = stream or sys.stderr
        self.lock = threading.Lock()
        self.review: Callable[[str], str] = lambda verdict: ""

    def __call__(self, event: Event) -> None:
        e: Any = event  # each branch reads the fields of its own type
        kind = e.type
        with self.lock:
            if kind == "header":
                from mlatui.views.run_meta import l1_words

                self.review = lambda verdict: l1_words(e.settings, verdict)
            if kind == "phase_start":
                print(
                    f"[mlatui] phase {e.index + 1}/{e.total_phases}: {e.phase} ({e.kind}), contexts {list(e.contexts)}",
                    file=self.stream,
                )
            elif kind == "progress":
                eta = f", ETA {e.eta_s:.0f}s" if e.eta_s is not None else ""
                print(f"[mlatui]   {e.phase}: {e.done}/{e.total}{eta}", file=self.stream)
            elif kind == "validity" and not e.valid:
                review = self.review(e.verdict)  # a patch review: what the check means
                print(
                    f"[mlatui]   L=1 check {e.verdict.upper()} at context {e.context}: "
                    + (f"{review}: " if review else "")
                    + f"paired stock/patched {e.diff_pct:+.1f}%"
                    + (f" {pct_ends(e.ratio)}" if e.ratio is not None else "")
                    + f" ({TOLERANCE_RULE.format(tolerance=e.tolerance_pct)})",
                    file=self.stream,
                )
            elif kind == "pooled_validity":
                decided = ", ".join(map(str, e.decided)) or "none"
                print(
                    f"[mlatui]   L=1 check pooled over {len(e.contexts)} contexts: "
                    f"{interval_text(e.ratio)} "
                    f"{e.outcome.upper()}; valid (pooled): {decided}",
                    file=self.stream,
                )
            elif kind == "load_start":
                size = f"{e.total_bytes / 1e6:,.1f} MB in {e.files} files"
                what = f"{e.params / 1e6:,.1f}M random params" if e.params else size
                print(f"[mlatui] loading {e.what} {e.source}: {what}", file=self.stream)
            elif kind == "load_progress" and e.done:
                print(f"[mlatui]   {e.what} loaded at {e.t:.1f}s", file=self.stream)
            elif kind in ("log", "error"):
                level = "error" if kind == "error" else e.level
                print(f"[mlatui] {level}: {e.message}", file=self.stream)
            elif kind == "phase_summary" and e.verdict:
                print(f"[mlatui]   {e.phase}: {e.verdict}", file=self.stream)
