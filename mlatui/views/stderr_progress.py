"""A headless run's progress on stderr, one line per event that says something (pure: events in,
text out; the stream is any file)."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import TextIO

from mlatui.stream.events import (
    ErrorEvent,
    Event,
    LoadProgress,
    LoadStart,
    LogMessage,
    PhaseStart,
    PhaseSummary,
    PooledValidity,
    Progress,
    RunHeader,
    Validity,
)
from mlatui.stream.phrases import TOLERANCE_RULE, interval_text, pct_ends


class StderrProgress:
    """Phase, progress and ETA on stderr. Called between steps, never inside a timed region."""

    def __init__(self, stream: TextIO | None = None):
        self.stream = stream or sys.stderr
        self.lock = threading.Lock()
        self.review: Callable[[str], str] = lambda verdict: ""

    def __call__(self, event: Event) -> None:
        with self.lock:
            line = self._line(event)
            if line is not None:
                print(line, file=self.stream)

    def _line(self, e: Event) -> str | None:
        match e:
            case RunHeader():
                from mlatui.views.run_meta import l1_words

                settings = e.settings
                self.review = lambda verdict: l1_words(settings, verdict)
            case PhaseStart():
                return (
                    f"[mlatui] phase {e.index + 1}/{e.total_phases}: {e.phase} ({e.kind}), "
                    f"contexts {list(e.contexts)}"
                )
            case Progress():
                eta = f", ETA {e.eta_s:.0f}s" if e.eta_s is not None else ""
                return f"[mlatui]   {e.phase}: {e.done}/{e.total}{eta}"
            case Validity(valid=False):
                review = self.review(e.verdict)  # a patch review: what the check means
                return (
                    f"[mlatui]   L=1 check {e.verdict.upper()} at context {e.context}: "
                    + (f"{review}: " if review else "")
                    + f"paired stock/patched {e.diff_pct:+.1f}%"
                    + (f" {pct_ends(e.ratio)}" if e.ratio is not None else "")
                    + f" ({TOLERANCE_RULE.format(tolerance=e.tolerance_pct)})"
                )
            case PooledValidity():
                decided = ", ".join(map(str, e.decided)) or "none"
                return (
                    f"[mlatui]   L=1 check pooled over {len(e.contexts)} contexts: "
                    f"{interval_text(e.ratio)} {e.outcome.upper()}; valid (pooled): {decided}"
                )
            case LoadStart():
                size = f"{e.total_bytes / 1e6:,.1f} MB in {e.files} files"
                what = f"{e.params / 1e6:,.1f}M random params" if e.params else size
                return f"[mlatui] loading {e.what} {e.source}: {what}"
            case LoadProgress(done=True):
                return f"[mlatui]   {e.what} loaded at {e.t:.1f}s"
            case LogMessage():
                return f"[mlatui] {e.level}: {e.message}"
            case ErrorEvent():
                return f"[mlatui] error: {e.message}"
            case PhaseSummary() if e.verdict:
                return f"[mlatui]   {e.phase}: {e.verdict}"
        return None
