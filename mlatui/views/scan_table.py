"""`mlatui scan`'s printer: one markdown table per scanned tree, and a count of what it found."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from mlatui.gate.scan import Site, SiteState
from mlatui.views.mdtable import table


def scan_table(label: str, root: Path, sites: list[Site]) -> str:
    head = f"## {label} ({root})"
    if not sites:
        return f"{head}\n\nno MLA gate or indexer pooling gate found\n"
    rows = [
        (
            f"{s.path}:{s.line}",
            s.cls,
            s.kind.value,
            s.form,
            s.state.value,
            "-" if s.threshold is None else str(s.threshold),
        )
        for s in sites
    ]
    counts = Counter(s.state for s in sites)
    said = ", ".join(f"{counts[state]} {state.value}" for state in SiteState if counts[state])
    return "\n".join(
        [
            head,
            "",
            table(("site", "class", "kind", "form", "state", "threshold (T->inf)"), rows),
            "",
            f"{len(sites)} sites: {said}",
            "",
        ]
    )
