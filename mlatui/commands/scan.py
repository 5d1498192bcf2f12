"""`mlatui scan [PATH ...]`: find the MLA gates and indexer pooling gates in runtime source."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mlatui.gate.scan import Site

HELP = (
    "find the MLA gates (L == 1 or a threshold around embed_q/unembed_out) and indexer pooling "
    "gates in the installed mlx-lm/mlx-vlm or in any source tree, with each family's threshold"
)


FAIL_STATES = ("pre-fix", "not-recognised")
FOUND_EXIT = 1


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "paths",
        nargs="*",
        metavar="PATH",
        help="source trees or files to scan (default: the installed mlx_lm, and mlx_vlm when present)",
    )
    parser.add_argument("--json", action="store_true", help="print JSON lines instead of a table")
    parser.add_argument(
        "--fail-on",
        action="append",
        choices=FAIL_STATES,
        default=[],
        metavar="STATE",
        help=f"exit {FOUND_EXIT} (after printing everything) when a site in STATE is found: "
        "pre-fix (an MLA gate, width path or indexer pooling gate still in the pre-fix form) or "
        "not-recognised; repeatable. Without it scan exits 0 whatever it found; bad input is 2",
    )


def _family_threshold(path: Path) -> int | None:
    """The threshold from mlatui's copy of the family's real config, where it has one: the
    module (mlx-lm) or folder (mlx-vlm) names the family."""
    from mlatui.gate.policy import UNBOUNDED, max_absorbed_queries
    from mlatui.models import families

    for name in (path.stem, path.parent.name):
        if name not in families.FAMILIES:
            continue
        try:
            config = families.config_for(name, "full")
        except KeyError:
            return None
        text = families.text_config(config)
        try:
            value = max_absorbed_queries(
                int(text["kv_lora_rank"]),
                int(text.get("qk_nope_head_dim") or text["head_dim"]),
                int(text.get("v_head_dim") or text["head_dim"]),
            )
        except (KeyError, TypeError, ValueError):
            return None
        return None if value == UNBOUNDED else value
    return None


def run(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from mlatui.errors import UserError
    from mlatui.gate.scan import SiteState, installed_roots, scan_tree
    from mlatui.views.scan_table import scan_table

    if args.paths:
        roots = []
        for raw in args.paths:
            path = Path(raw).expanduser()
            if not path.exists():
                raise UserError(f"{raw}: no such file or folder", "give a source tree or .py file")
            roots.append((raw, path))
    else:
        roots = installed_roots()
        if not roots:
            raise UserError("neither mlx_lm nor mlx_vlm is installed", "pass a PATH to scan")
    failing = {
        {"pre-fix": SiteState.PRE_FIX, "not-recognised": SiteState.NOT_RECOGNISED}[state]
        for state in args.fail_on
    }
    found: list[Site] = []
    for label, root in roots:
        root = root.resolve()
        folder = root.parent if root.is_file() else root
        sites = [
            replace(s, threshold=_family_threshold(folder / s.path))
            if s.threshold is None and _wants_threshold(s)
            else s
            for s in scan_tree(root)
        ]
        if args.json:
            for s in sites:
                print(json.dumps({"root": str(root), **s.to_dict()}))
        else:
            print(scan_table(label, root, sites))
        found += [s for s in sites if s.state in failing]
    if not found:
        return 0
    states = ", ".join(sorted({s.state.value for s in found}))
    first = found[0]
    print(
        f"mlatui scan: {len(found)} {states} site{'' if len(found) == 1 else 's'} "
        f"(first: {first.path}:{first.line} {first.cls}); exit {FOUND_EXIT} for --fail-on",
        file=sys.stderr,
    )
    return FOUND_EXIT


def _wants_threshold(site: Site) -> bool:
    """A recognised gate, or a path bounded by a width other than 1."""
    from mlatui.gate.forms import SiteKind
    from mlatui.gate.scan import SiteState

    if site.state is SiteState.NOT_RECOGNISED:
        return False
    return site.kind is SiteKind.MLA_GATE or (site.kind.is_path and site.state is SiteState.FIXED)
