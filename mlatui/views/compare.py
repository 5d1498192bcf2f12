"""Two recorded runs side by side (pure Python, no mlx, no textual): each is replayed through
the streamed reader into its own DashboardState, then matched on shared contexts, widths and
depths; B/A ratios of the medians; what differs between the headers.

Serves "before/after a patch" (same machine, other code) and "this machine vs that one" (same
scenario, other device). The B/A range comes from the CI ends (B low / A high .. B high / A low):
conservative, and it excludes 1 exactly when the two CIs do not overlap. `compare_markdown` is
`mlatui compare --dump`: the comparison as markdown.
"""

from __future__ import annotations

import filecmp
from dataclasses import dataclass
from pathlib import Path

from mlatui.errors import UserError
from mlatui.measure.plans import Setting
from mlatui.stream.events import ARMS, RunHeader
from mlatui.stream.phase_rows import Quantity
from mlatui.stream.recorder import RecordingError
from mlatui.views.dashboard_state import DashboardState
from mlatui.views.mdtable import table
from mlatui.views.run_meta import code_difference, header_fields
from mlatui.views.summary import Check, RunSummary, summarize
from mlatui.views.units import Ci, ci_text, sig
from mlatui.views.verdict_strip import verdict_line

SECTIONS = (
    Quantity.MARGINAL_MS,
    Quantity.STEP_MS,
    Quantity.RATIO,
    Quantity.TOK_S,
    Quantity.VS_PLAIN,
)
NOT_A_DIFFERENCE = {"started"}  # always differs; shown beside each run instead
HINT = "compare takes event recordings (from `mlatui launch`, `mlatui bench SCENARIO --out`, or scenarios/demo.jsonl)"


@dataclass(frozen=True)
class Run:
    label: str  # "A" | "B"
    path: Path
    state: DashboardState
    notes: tuple[str, ...] = ()  # truncated last line, skipped lines

    @property
    def header(self) -> RunHeader:
        if self.state.header is None:  # the reader refuses a file without one; kept for Run(...)
            raise RecordingError(f"{self.path}: no header record", HINT)
        return self.state.header

    @property
    def name(self) -> str:
        return self.path.stem


def _bench_record_error(path: Path) -> UserError | None:
    """A benchmark's record file (`mlatui bench attention` and friends) said as such."""
    from mlatui.stream.recorder import record_kind
    from mlatui.views.bench_report import record_file_line

    kind = record_kind(path)
    if kind is None:
        return None
    return UserError(
        record_file_line(path, kind), f"`mlatui replay --dump {path}` {kind.dump_shows}"
    )


def load_run(label: str, path: str | Path, skip_bad: bool = False) -> Run:
    """Replay a recording at once through the streamed reader into a DashboardState."""
    from mlatui.stream.replay_source import ReplaySource

    path = Path(path)
    try:
        source = ReplaySource(path, speed=1e12, skip_bad=skip_bad)
    except RecordingError as e:
        bench = _bench_record_error(path)
        if bench is not None:
            raise bench from None
        if not e.hint:
            raise RecordingError(e.what, HINT) from None
        raise
    state = DashboardState()
    source.start()
    while not source.finished:
        state.apply_all(source.drain())
    source.stop()
    notes = [*source.warnings]
    if source.scan.skipped_note():
        notes.append(source.scan.skipped_note())
    return Run(label, path, state, tuple(notes))


@dataclass(frozen=True)
class HeaderField:
    key: str
    label: str
    a: str
    b: str

    @property
    def differs(self) -> bool:
        return self.a != self.b and self.key not in NOT_A_DIFFERENCE

    @property
    def value(self) -> str:
        return self.a if self.a == self.b else f"{self.a} / {self.b}"


def header_diff(a: RunHeader, b: RunHeader) -> list[HeaderField]:
    fa = {f.key: f for f in header_fields(a)}
    fb = {f.key: f for f in header_fields(b)}
    keys = list(fa) + [k for k in fb if k not in fa]
    return [
        HeaderField(
            k,
            (fa.get(k) or fb[k]).label,
            fa[k].value if k in fa else "–",
            fb[k].value if k in fb else "–",
        )
        for k in keys
    ]


@dataclass(frozen=True)
class Row:
    """One figure in both runs: `width` is L (sweep) or the draft depth (decode, 0 = plain)."""

    quantity: Quantity
    context: int
    width: int
    arm: str
    a: Ci
    b: Ci
    check_a: Check
    check_b: Check
    draft_kind: str = ""  # decode figures: the kind that drafted (kinds are matched, never mixed)

    @property
    def ratio(self) -> float | None:
        """B/A of the medians (None when A's is not positive: a log ratio means nothing)."""
        return self.b.median / self.a.median if self.a.median > 0 else None

    @property
    def ratio_range(self) -> tuple[float, float] | None:
        a, b = self.a.bounds, self.b.bounds
        if a is None or b is None or a[0] <= 0 or b[0] < 0:
            return None
        return b[0] / a[1], b[1] / a[0]

    @property
    def differs(self) -> bool:
        """The two CIs do not overlap."""
        return self.a.disjoint(self.b)

    @property
    def valid(self) -> bool:
        """Both runs' L = 1 checks valid at this context (else the row is in no verdict)."""
        return self.check_a.usable and self.check_b.usable


@dataclass(frozen=True)
class Comparison:
    a: Run
    b: Run
    header: list[HeaderField]
    rows: list[Row]

    @property
    def runs(self) -> tuple[Run, Run]:
        return self.a, self.b

    @property
    def differing(self) -> list[HeaderField]:
        return [f for f in self.header if f.differs]

    @property
    def likeness(self) -> str:
        """What is alike when no header field differs: the same file, two identical files, one
        run (the same start time) or two runs differing only in their start time."""
        a, b = self.a.path, self.b.path
        if a.resolve() == b.resolve():
            return "nothing: A and B are the same file"
        if filecmp.cmp(a, b, shallow=False):
            return "nothing: the two files are identical"
        started = [f for f in self.header if f.key == "started"]
        if started and not started[0].differs:
            return "nothing: the same run (same start time, same machine, same settings)"
        return "nothing but the start time (same machine, same settings)"

    @property
    def same(self) -> list[HeaderField]:
        return [f for f in self.header if not f.differs and f.key not in NOT_A_DIFFERENCE]

    def section(self, quantity: Quantity) -> list[Row]:
        return [r for r in self.rows if r.quantity == quantity]

    @property
    def shared_contexts(self) -> list[int]:
        return sorted({r.context for r in self.rows if r.quantity in SWEEP})


SWEEP = (Quantity.MARGINAL_MS, Quantity.STEP_MS, Quantity.RATIO)


Key = tuple[Quantity, int, int, str, str]  # quantity, context, width, arm, draft kind


def _keyed(s: RunSummary) -> dict[Key, tuple[Ci, Check]]:
    """The run's figures by key: per sweep context, the latest sweep phase's (what the
    dashboard's figure shows); every decode result measured."""
    latest: dict[int, str] = {}  # context -> the last sweep phase that measured it
    for p in s.phases:
        marginal = {m.context for m in s.marginal if m.phase == p.name}
        latest |= dict.fromkeys({r.context for r in p.sweep} | marginal, p.name)
    out: dict[Key, tuple[Ci, Check]] = {}
    for m in s.marginal:
        for arm, ci in zip(ARMS, (m.stock, m.patched), strict=True):
            if ci is not None and latest[m.context] == m.phase:
                out[(Quantity.MARGINAL_MS, m.context, 2, arm, "")] = (ci, m.check)
    for p in s.phases:
        for r in p.sweep:
            shown = (
                (Quantity.STEP_MS, a, ci) for a, ci in zip(ARMS, (r.stock, r.patched), strict=True)
            )
            for q, arm, ci in [*shown, (Quantity.RATIO, "", r.ratio)]:
                if ci is not None and latest[r.context] == p.name:
                    out[(q, r.context, r.width, arm, "")] = (ci, r.check)
        for row in p.decode:
            d = row.result
            if not d.measured or d.tok_s is None:
                continue
            key = (d.context, d.depth, d.arm, d.draft_kind)
            out[(Quantity.TOK_S, *key)] = (Ci.of(d.tok_s), row.check)
            if d.depth and d.vs_plain is not None:
                out[(Quantity.VS_PLAIN, *key)] = (Ci.of(d.vs_plain), row.check)
    return out


def compare(a: Run, b: Run) -> Comparison:
    ka, kb = _keyed(summarize(a.state)), _keyed(summarize(b.state))
    order = {q: i for i, q in enumerate(SECTIONS)}
    shared = sorted(
        set(ka) & set(kb),
        key=lambda k: (order[k[0]], k[1], k[4], k[2], {"stock": 0}.get(k[3], 1)),
    )
    rows = [Row(*k[:4], ka[k][0], kb[k][0], ka[k][1], kb[k][1], k[4]) for k in shared]
    return Comparison(a, b, header_diff(a.header, b.header), rows)


def compare_files(path_a: str | Path, path_b: str | Path, skip_bad: bool = False) -> Comparison:
    return compare(load_run("A", path_a, skip_bad), load_run("B", path_b, skip_bad))


TITLES = {
    Quantity.MARGINAL_MS: "Marginal cost of a second query (L=2 − L=1), ms — the key figure",
    Quantity.STEP_MS: "Step ms per arm and width L",
    Quantity.RATIO: "stock/patched paired ratio per width L",
    Quantity.TOK_S: "Decode tok/s per arm and depth (0 = plain)",
    Quantity.VS_PLAIN: "Speculative speedup over plain decode per arm and depth",
}
NOTE = (
    "B/A is the ratio of the medians; the range after it comes from the CI ends "
    "[B low / A high, B high / A low] (conservative, not a CI), `≠` where the two CIs do not overlap. "
    "L=1 checks: ✓ valid, ✗ invalid, ? inconclusive, … not decided; a row is in no verdict "
    "unless both are ✓."
)


def ratio_text(row: Row) -> str:
    if row.ratio is None:
        return "–"
    text = f"{sig(row.ratio)}×"
    rng = row.ratio_range
    if rng is not None:  # not a CI: the conservative range its CIs' ends allow
        text += f" [{sig(rng[0])}, {sig(rng[1])}]"
    return text + (" ≠" if row.differs else "")


def checks_text(row: Row) -> str:
    return f"{row.check_a.mark} {row.check_b.mark}"


def width_label(row: Row) -> str:
    if row.quantity in (Quantity.TOK_S, Quantity.VS_PLAIN):
        return Setting(row.draft_kind, row.width).label
    return str(row.width)


def _section(cmp: Comparison, q: Quantity) -> list[str]:
    rows = cmp.section(q)
    if not rows:
        return []
    unit = "×" if q in (Quantity.RATIO, Quantity.VS_PLAIN) else ""
    keyed = q != Quantity.MARGINAL_MS  # its width is always 2
    body = [
        [r.context, *([width_label(r)] if keyed else []), r.arm or "stock/patched"]
        + [ci_text(r.a, unit), ci_text(r.b, unit), ratio_text(r), checks_text(r)]
        for r in rows
    ]
    width = ["L" if q in (Quantity.STEP_MS, Quantity.RATIO) else "depth"] if keyed else []
    head = ["context", *width, "arm", "A [95% CI]", "B [95% CI]", "B/A", "L=1 A B"]
    return [f"## {TITLES[q]}", "", table(head, body), ""]


def compare_markdown(cmp: Comparison) -> str:
    lines = ["# mlatui compare", ""]
    for run in cmp.runs:
        h = run.header
        lines.append(
            f"- **{run.label}** `{run.path}`: {h.model} · {h.device.name} · "
            f"scenario {h.scenario.name} · started {h.started_at}"
        )
        lines += [f"  - note: {n}" for n in run.notes]
    lines.append("")
    if cmp.differing:
        lines += ["## What differs", ""]
        lines += [table(["", "A", "B"], [[f.label, f.a, f.b] for f in cmp.differing]), ""]
    else:
        lines += [f"Headers: {cmp.likeness}.", ""]
    code = code_difference(cmp.a.header, cmp.b.header)
    if code:
        lines += [code, ""]
    same = " · ".join(f"{f.label} {f.value}" for f in cmp.same if f.key != "schema")
    lines += [f"Same in both: {same}", ""]
    lines += ["## Verdicts", ""]
    lines += [f"- {run.label}: {verdict_line(run.state)}" for run in cmp.runs]
    lines.append("")
    if not cmp.shared_contexts:
        ctx = [", ".join(map(str, run.state.contexts())) or "none" for run in cmp.runs]
        lines += [f"No shared sweep contexts (A: {ctx[0]}; B: {ctx[1]}).", ""]
    for q in SECTIONS:
        lines += _section(cmp, q)
    if cmp.rows:
        lines += [NOTE, ""]
    return "\n".join(lines).rstrip() + "\n"
