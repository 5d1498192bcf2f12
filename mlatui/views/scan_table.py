"""`mlatui scan`'s printer: one markdown table per scanned tree, and a count of what it found."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from mlatui.gate.scan import Site, SiteState
from mlatui.views.mdtable import table


def threshold_cell(site: Site) -> str:
    """The formula's L* (T->inf) for the geometry, beside a literal or constant bound."""
    formula = "-" if site.threshold is None else str(site.threshold)
    if site.fixed_at is None:
        return formula
    if site.threshold is None:
        return f"fixed at {site.fixed_at}"
    return f"fixed at {site.fixed_at}; formula {formula}"


def scan_table(label: str, root: Path, sites: list[Site]) -> str:
    """`root` is absolute; the header names it once, after `label` where they differ."""
    head = f"## {label}" if Path(label).expanduser() == root else f"## {label} ({root})"
    shown = root.name if root.is_dir() else None
    if not sites:
        return f"{head}\n\nno MLA gate or indexer pooling gate found\n"
    rows = [
        (
            f"{shown}/{s.path}:{s.line}" if shown else f"{s.path}:{s.line}",
            s.cls,
            s.kind.value,
            s.form,
            s.state.value,
            threshold_cell(s),
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
            f"{len(sites)} site{'' if len(sites) == 1 else 's'}: {said}",
            "",
        ]
    )
