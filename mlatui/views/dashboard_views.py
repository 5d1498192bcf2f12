"""The per-arm and per-phase views DashboardState keeps, and how each phase kind is shown
(pure Python).

`VIEWS` is the printers' and the fold's one lookup by kind: a kind's rules
(`mlatui.config.phase_kind`) say what it measures; its view, which table presents it and how the
dashboard folds its steps. A kind shown like an existing one is one line there.

Timed steps for the arm panes' bar charts (`StepSeries`) never mix phases, widths or contexts:
each (phase, arm, width, context) keeps its own samples in arrival order, and both arms are
drawn on one linear scale from 0 (plain data here, widgets.stepchart draws it)."""

from __future__ import annotations

import statistics
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum

from mlatui.config.phase_kind import PhaseKind
from mlatui.measure.acceptance import AcceptanceCounts, VerifyStep
from mlatui.measure.plans import PLAIN, Setting
from mlatui.stream.events import SpeedupBound

SERIES_POINTS = 240  # per-arm verify-ms history kept for the plot


class Table(StrEnum):
    """A phase's table in `bench`'s summary, the export and `replay --dump`."""

    SWEEP = "sweep"  # per context and width: both arms' step ms, the paired ratio, Δ2
    DECODE = "decode"  # per context, arm and setting: tok/s, acceptance, the verify step
    ROWS = "rows"  # the phase summary's own rows (the indexer's parts)
    NONE = "none"  # no table of its own (`+`: its checks join the L = 1 table)


@dataclass(frozen=True)
class KindView:
    table: Table
    layer_steps: bool = False  # its steps time one layer, not the model: its own pane


VIEWS: dict[PhaseKind, KindView] = {
    PhaseKind.SWEEP: KindView(Table.SWEEP),
    PhaseKind.DECODE: KindView(Table.DECODE),
    PhaseKind.TUNE: KindView(Table.DECODE),
    PhaseKind.INDEXER: KindView(Table.ROWS, layer_steps=True),
    PhaseKind.MORE: KindView(Table.NONE),
}
UNKNOWN_VIEW = KindView(Table.ROWS)


def view_of(kind: str | None) -> KindView:
    """How a kind as recorded is shown (a kind this tool does not know: its summary's rows)."""
    known = PhaseKind.of(kind)
    return VIEWS[known] if known is not None else UNKNOWN_VIEW


@dataclass(frozen=True)
class TextRepeat:
    """How much a setting's emitted text repeats itself (mlatui.measure.acceptance): the
    distinct-4-gram share within its blocks (pooled) and across them; `looping` when the
    looping-text guard fired on the result (live: would fire on the blocks so far)."""

    within: float | None
    across: float | None
    looping: bool
    live: bool  # from the timed blocks so far; the setting's DecodeResult replaces it


@dataclass
class ArmView:
    """One arm's column: acceptance (per draft kind and depth, never mixed), throughput and
    gate branch counts. Settings key the figures: a draft kind at a depth, or plain decode
    (PLAIN). A decode phase starts them afresh; a new context its live figures."""

    results: dict = field(default_factory=dict)  # Setting -> its measured DecodeResult
    counts: dict = field(default_factory=dict)  # Setting -> AcceptanceCounts, this phase (live)
    setting: Setting | None = None  # the setting of the latest speculative block
    counts_context: int | None = None  # counts are per context too: a new one starts afresh
    rules: dict = field(default_factory=dict)  # Setting -> the acceptance rule its blocks used
    temperature: float = 0.0
    texts: dict = field(default_factory=dict)  # Setting -> [timed blocks' tokens], this context
    repeats: dict = field(default_factory=dict)  # Setting -> TextRepeat of its result, this context
    spec_live: dict = field(default_factory=dict)  # Setting -> [tokens, ms], this context
    spec_bound: dict = field(default_factory=dict)  # Setting -> SpeedupBound: rejected, not run
    absorbed_calls: int = 0
    materialised_calls: int = 0

    def start_phase(self) -> None:
        """A decode phase: its own results and live figures."""
        self.results, self.spec_live, self.counts, self.setting = {}, {}, {}, None
        self.spec_bound, self.texts, self.repeats = {}, {}, {}

    def start_context(self, context: int, texts: bool = True) -> None:
        self.counts, self.spec_live, self.spec_bound = {}, {}, {}
        self.counts_context = context
        if texts:
            self.texts, self.repeats = {}, {}

    @property
    def plain_tok_s(self) -> float | None:
        r = self.results.get(PLAIN)
        return r.tok_s.median if r is not None and r.tok_s is not None else None

    @property
    def spec_result(self) -> dict[Setting, float | None]:
        """Setting -> the measured tok/s of each speculative result."""
        return {
            st: r.tok_s.median if r.tok_s is not None else None
            for st, r in self.results.items()
            if st.depth > 0
        }

    def tok_s_by_setting(self) -> dict[Setting, tuple[float, bool]]:
        """setting -> (tok/s, is_live_estimate), in the run's order of kinds, then by depth:
        measured results win over the running estimate."""
        out = {
            st: (tokens / ms * 1e3, True)
            for st, (tokens, ms) in self.spec_live.items()
            if ms > 0 and st.depth > 0
        }
        out.update({st: (v, False) for st, v in self.spec_result.items()})
        kinds = list(dict.fromkeys(st.kind for st in [*self.spec_live, *self.spec_result]))
        return dict(sorted(out.items(), key=lambda kv: (kinds.index(kv[0].kind), kv[0].depth)))

    def decode_lines(self) -> list[tuple[Setting, tuple[float, bool] | None, SpeedupBound | None]]:
        """Every speculative setting shown, in the run's order of kinds, then by depth: its
        (tok/s, is_live) when measured or running, else its bound when rejected by bound (no
        tok/s: its blocks never ran)."""
        measured = self.tok_s_by_setting()
        kinds = list(
            dict.fromkeys(st.kind for st in [*self.spec_live, *self.spec_result, *self.spec_bound])
        )
        shown = {st for st in [*measured, *self.spec_bound] if st.depth > 0}
        order = sorted(shown, key=lambda st: (kinds.index(st.kind), st.depth))
        return [
            (st, measured.get(st), None if st in measured else self.spec_bound.get(st))
            for st in order
        ]

    @property
    def plain_live(self) -> float | None:
        tokens, ms = self.spec_live.get(PLAIN, (0, 0.0))
        return tokens / ms * 1e3 if ms > 0 else None

    def add_steps(self, setting: Setting, steps: list[VerifyStep]) -> None:
        counts = self.counts.setdefault(setting, AcceptanceCounts(setting.depth))
        for step in steps:
            counts.add(step)
        self.setting = setting


@dataclass
class PhaseView:
    name: str = ""
    kind: str = ""
    index: int = 0
    total_phases: int = 0
    done: int = 0
    total: int = 0


def _median(xs: list[float]) -> float | None:
    return statistics.median(xs) if xs else None


def pressure(used: float, limit: float | None) -> str:
    """ok | high | critical for a used/limit pair (colours follow it)."""
    if not limit:
        return "ok"
    f = used / limit
    return "critical" if f >= 0.9 else "high" if f >= 0.75 else "ok"


# (phase, arm, context, width) -> the sampler's median over rounds, or None before its estimate
OverRounds = Callable[[str, str, int, int], float | None]

SAMPLES_PER_KEY = 256
WIDTH_PRIORITY = (2, 1)  # the key figure's widths first when rows are short


@dataclass
class StepSeries:
    samples: dict[tuple[str, str, int, int], deque] = field(default_factory=dict)
    last: dict[str, tuple[int, int]] = field(default_factory=dict)  # phase -> (context, seq)
    seq: int = 0

    def add(self, phase: str, arm: str, width: int, context: int, ms: float) -> None:
        key = (phase, arm, width, context)
        if key not in self.samples:
            self.samples[key] = deque(maxlen=SAMPLES_PER_KEY)
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
