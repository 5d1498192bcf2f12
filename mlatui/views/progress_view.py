"""A run's progress as text (pure): the header's progress and loading text, from RunProgress
(widgets only style it), and a headless run's progress on stderr, one line per event that says
something (`StderrProgress`: events in, text out; the stream is any file), and what `+` offers
once a live run has ended with undecided L = 1 checks (`more_offer`: more rounds of L = 1 quads at
those contexts on the arms still loaded, mlatui.measure.plans, the engine's rule too, and how long
they would take on this run's own measured costs).

`now_s` is the run's clock: the replay position in a replay (recorded time, never the wall
clock), the engine's time since its start in a live run.
"""

from __future__ import annotations

import math
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TextIO

from mlatui.measure.plans import MORE_ROUNDS, last_pass, more_phase, undecided_checks
from mlatui.measure.progress import Eta, LoadView, RunProgress
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
from mlatui.views.dashboard_state import DashboardState
from mlatui.views.units import bytes_text, fmt_context


@dataclass(frozen=True)
class ProgressText:
    elapsed: str  # "elapsed 1m02s"
    eta: str  # "ETA 40s phase · 2m10s run (1m50s–4m30s, + up to 24 extra rounds)"
    eta_short: str  # "ETA 2m10s"
    stalled: str  # "stalled: no step for 42 s" or ""


def duration(s: float | None) -> str:
    if s is None or s != s or s < 0:
        return "–"
    s = int(round(s))
    if s >= 3600:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s"


def size_of(n: float, of: float) -> str:
    """`1.2/3.4 GB`: `n` of `of` in the unit `bytes_text` gives `of`."""
    unit = bytes_text(of).split()[-1]
    scale = {"GB": 1e9, "MB": 1e6, "kB": 1e3}.get(unit, 1.0)
    digits = 0 if unit == "B" else 1
    return f"{n / scale:.{digits}f}/{of / scale:.{digits}f} {unit}"


def _range(e: Eta) -> str:
    lo, hi = duration(e.low), duration(e.high)
    spread = lo != hi and (e.high - e.low) > max(5.0, 0.1 * e.mid)
    parts = [f"{lo}–{hi}"] if spread else []
    if e.extra_rounds:
        parts.append(f"+ up to {e.extra_rounds} extra rounds")
    if e.partial:
        parts.append("+ phases not yet estimated")
    return f" ({', '.join(parts)})" if parts else ""


def progress_text(p: RunProgress, now_s: float | None, running: bool) -> ProgressText:
    elapsed = f"elapsed {duration(now_s)}" if now_s is not None else ""
    if not running:
        return ProgressText(elapsed, "", "", "")
    phase, run = p.eta(now_s)
    if run is None or phase is None:
        eta = short = "ETA measuring…"
    else:
        short = f"ETA {duration(run.mid)}"
        same = abs(phase.mid - run.mid) < 1.0
        head = short if same else f"ETA {duration(phase.mid)} phase · {duration(run.mid)} run"
        eta = head + _range(run)
    quiet = p.stalled_s(now_s)
    stalled = f"stalled: no step for {duration(quiet)}" if quiet is not None else ""
    return ProgressText(elapsed, eta, short, stalled)


def loading_text(load: LoadView, now_s: float | None) -> str:
    """`loading model: 1.2/3.4 GB (2/5 files) 12 s`; `~` marks bytes estimated from outside
    the loader; random builds say what they build."""
    took = f" {duration(max(0.0, (now_s if now_s is not None else load.last_t) - load.started_t))}"
    if load.random_build:
        return (
            f"building random weights for the {load.what} ({load.params / 1e6:,.1f}M params){took}"
        )
    est = "~" if load.measure and load.measure != "exact" else ""
    if load.total_bytes:
        done = min(load.bytes_read, load.total_bytes)
        files = f" ({load.files_read}/{load.files} files)" if load.files else ""
        amount = f"{est}{size_of(done, load.total_bytes)}"
    else:
        files = ""
        amount = f"{est}{bytes_text(load.bytes_read)} read" if load.bytes_read else "fetching"
    return f"loading {load.what}: {amount}{files}{took}"


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


@dataclass(frozen=True)
class MoreOffer:
    contexts: tuple[int, ...]
    rounds: int
    seconds: float  # on the run's own costs; inf when it has none at these contexts yet

    @property
    def text(self) -> str:
        return (
            f"+ to measure {self.rounds} more rounds of the undecided contexts "
            f"({', '.join(map(fmt_context, self.contexts))}, {self.time_text})"
        )

    @property
    def short(self) -> str:
        return f"+ {self.rounds} more L=1 rounds ({self.time_text})"

    @property
    def time_text(self) -> str:
        return f"~{self.seconds:.0f} s" if math.isfinite(self.seconds) else "time unknown"


def more_offer(state: DashboardState) -> MoreOffer | None:
    """What `+` would measure now (a DashboardState of a run that completed), or None."""
    if state.status != "completed" or state.header is None:
        return None
    checks = undecided_checks(state.validity, state.phase_kinds, last_pass(state.header.settings))
    contexts = tuple(sorted({v.context for v in checks}))
    if not contexts:
        return None
    phases = [more_phase("more", c) for c in contexts]
    settle = state.header.settings.settles
    return MoreOffer(contexts, MORE_ROUNDS, state.progress.forecast_s(phases, settle=settle))
