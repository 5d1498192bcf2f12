"""`mlatui compare --dump`: the comparison as markdown (pure Python)."""

from __future__ import annotations

from mlatui.measure.plans import Setting
from mlatui.views.compare import SECTIONS, Comparison, Row
from mlatui.views.mdtable import table
from mlatui.views.rounding import ci_text, sig
from mlatui.views.run_meta import code_difference
from mlatui.views.run_tables import Quantity
from mlatui.views.verdict_strip import verdict_line

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
            f"- **{run.label}** `{run.path}`: {h.model} · {h.device.get('name', '?')} · "
            f"scenario {h.scenario.get('name', '?')} · started {h.started_at}"
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
