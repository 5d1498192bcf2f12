"""Timed steps kept apart by phase, width and context, for the arm panes' bar charts.

A series never mixes phases, widths or contexts: each (phase, arm, width, context) keeps its own
samples in arrival order, and both arms are drawn on one linear scale from 0 (plain data here,
widgets.stepchart draws it).
"""

from __future__ import annotations

import statistics
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

# (phase, arm, context, width) -> the sampler's median over rounds, or None before its estimate
OverRounds = Callable[[str, str, int, int], float | None]

SAMPLES_PER_KEY = 256
WIDTH_PRIORITY = (2, 1)  # the key figure's widths first when rows are short


@dataclass
class StepSeries:
    samples: dict[tuple[str, str, int, int], deque] = field(default_factory=dict)
    phase_order: list[str] = field(default_factory=list)
    last: dict[str, tuple[int, int]] = field(default_factory=dict)  # phase -> (context, seq)
    seq: int = 0

    def add(self, phase: str, arm: str, width: int, context: int, ms: float) -> None:
        key = (phase, arm, width, context)
        if key not in self.samples:
            self.samples[key] = deque(maxlen=SAMPLES_PER_KEY)
            if phase not in self.phase_order:
                self.phase_order.append(phase)
        self.samples[key].append(ms)
        self.seq += 1
        self.last[phase] = (context, self.seq)

    def latest_phase(self) -> str | None:
        if not self.last:
            return None
        return max(self.last, key=lambda p: self.last[p][1])


@dataclass(frozen=True)
class Segment:
    context: int
    samples: tuple[float, ...]
    greyed: bool  # the context's L = 1 check in this phase is not valid


@dataclass(frozen=True)
class Panel:
    width: int
    segments: tuple[Segment, ...]


@dataclass(frozen=True)
class StepChart:
    phase: str
    contexts: tuple[int, ...]
    scale_ms: float  # the top of the linear scale both arms share (from 0)
    panels: dict[str, tuple[Panel, ...]]  # arm -> one panel per width, widths ascending
    latest_context: int
    medians: dict[str, dict[int, float]]  # arm -> width -> median ms at latest_context
    over_rounds: bool = False  # the medians are a sweep's estimates (median over rounds)

    @property
    def widths(self) -> tuple[int, ...]:
        return tuple(sorted({p.width for ps in self.panels.values() for p in ps}))


def priority_widths(widths: tuple[int, ...], rows: int) -> tuple[int, ...]:
    """The widths to draw when only `rows` panels fit: L=2, then L=1, then the others, shown
    in ascending order."""
    ranked = [w for w in WIDTH_PRIORITY if w in widths] + [
        w for w in widths if w not in WIDTH_PRIORITY
    ]
    return tuple(sorted(ranked[: max(0, rows)]))


def step_chart(
    series: StepSeries,
    arms,
    greyed,
    over_rounds: OverRounds | None = None,
    swept: Callable[[str], bool] = lambda phase: True,
) -> StepChart | None:
    """The latest phase with timed steps; `greyed(context, phase)` says whether its L = 1
    check failed there. The medians are `over_rounds`' (the figures the tables and exports
    show, only those) once the context has any, else the raw samples' (a live context);
    `swept(phase)`: a sweep's, medians over rounds."""
    phase = series.latest_phase()
    if phase is None:
        return None
    keys = [k for k in series.samples if k[0] == phase]
    contexts = tuple(sorted({k[3] for k in keys}))
    widths = sorted({k[2] for k in keys})
    top = max((max(series.samples[k]) for k in keys if series.samples[k]), default=0.0)
    panels, medians = {}, {}
    latest = series.last[phase][0]
    for arm in arms:
        arm_panels = []
        for w in widths:
            segs = tuple(
                Segment(c, tuple(series.samples.get((phase, arm, w, c), ())), greyed(c, phase))
                for c in contexts
            )
            arm_panels.append(Panel(w, segs))
        panels[arm] = tuple(arm_panels)
        medians[arm] = {
            w: statistics.median(s)
            for w in widths
            if (s := series.samples.get((phase, arm, w, latest)))
        }
    if over_rounds is not None:
        estimated = {
            a: {w: over_rounds(phase, a, latest, w) for w in ms} for a, ms in medians.items()
        }
        kept = {a: {w: m for w, m in ms.items() if m is not None} for a, ms in estimated.items()}
        if any(kept.values()):
            return StepChart(phase, contexts, top, panels, latest, kept, swept(phase))
    return StepChart(phase, contexts, top, panels, latest, medians)
