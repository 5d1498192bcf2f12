"""`mlatui scan`: where a runtime's MLA gates and indexer pooling gates are, and in which form.

Reads source only (no import, no mlx), so it works on any tree: an installed mlx-lm or mlx-vlm,
a checkout of a pull request, a copy vendored inside an app.
"""

from __future__ import annotations

import ast
from dataclasses import asdict, dataclass
from enum import StrEnum
from pathlib import Path

from mlatui.gate.forms import (
    GateForm,
    GateShapeError,
    SiteKind,
    find_mla_gate,
    indexer_pool_gates,
)
from mlatui.gate.policy import UNBOUNDED, max_absorbed_queries

HEAD_DIMS = ("kv_lora_rank", "qk_nope_head_dim", "v_head_dim")


class SiteState(StrEnum):
    PRE_FIX = "pre-fix"
    FIXED = "fixed"
    LEFT_ALONE = "left alone"
    NOT_RECOGNISED = "not recognised"


@dataclass(frozen=True)
class Site:
    path: str
    line: int
    cls: str  # Class.method
    kind: SiteKind
    form: str  # a GateForm's text, the test as written, or what was not recognised
    state: SiteState
    threshold: int | None  # max_absorbed_queries(T -> inf) from the family's config defaults
    lines: tuple[int, ...] = ()  # every `if` the decision guards

    def to_dict(self) -> dict[str, object]:
        out = asdict(self)
        out["kind"], out["state"], out["lines"] = (
            self.kind.value,
            self.state.value,
            list(self.lines),
        )
        return out


def _config_defaults(path: Path) -> dict[str, int]:
    """Integer defaults of the head dims in the family's config dataclasses: the module's own
    (mlx-lm) or its folder's config.py (mlx-vlm)."""
    found: dict[str, int] = {}
    for source in (path, path.parent / "config.py"):
        if not source.is_file():
            continue
        try:
            tree = ast.parse(source.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError):
            continue
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.AnnAssign)
                and isinstance(node.target, ast.Name)
                and isinstance(node.value, ast.Constant)
                and isinstance(node.value.value, int)
                and not isinstance(node.value.value, bool)
            ):
                found.setdefault(node.target.id, node.value.value)
    if "head_dim" in found:  # kimi_linear: nope and v default to head_dim
        found.setdefault("qk_nope_head_dim", found["head_dim"])
        found.setdefault("v_head_dim", found["head_dim"])
    return found


def _threshold(path: Path) -> int | None:
    dims = _config_defaults(path)
    if not all(k in dims for k in HEAD_DIMS):
        return None
    value = max_absorbed_queries(*(dims[k] for k in HEAD_DIMS))
    return None if value == UNBOUNDED else value


def scan_file(path: Path, shown: str | None = None) -> list[Site]:
    """Every MLA gate, sparse gather guard and indexer pooling gate in one source file."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (SyntaxError, UnicodeDecodeError, OSError):
        return []
    name = shown or str(path)
    sites: list[Site] = []
    threshold: int | None = None
    threshold_read = False
    for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
        methods = [f for f in cls.body if isinstance(f, ast.FunctionDef)]
        init = next((f for f in methods if f.name == "__init__"), None)
        for fn in methods:
            where = f"{cls.name}.{fn.name}"
            for pool in indexer_pool_gates(fn):
                sites.append(
                    Site(
                        name,
                        pool.lineno,
                        where,
                        SiteKind.INDEXER_POOL,
                        "S == 1",
                        SiteState.PRE_FIX,
                        None,
                    )
                )
            if "Indexer" in cls.name and "accumulate_windows" in {
                n.func.attr
                for n in ast.walk(fn)
                if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
            }:
                sites.append(
                    Site(
                        name,
                        fn.lineno,
                        where,
                        SiteKind.INCREMENTAL_POOL,
                        "pooling cache, any width",
                        SiteState.FIXED,
                        None,
                    )
                )
            try:
                gate = find_mla_gate(fn, init)
            except GateShapeError as e:
                sites.append(
                    Site(
                        name,
                        e.line,
                        where,
                        SiteKind.MLA_GATE,
                        str(e),
                        SiteState.NOT_RECOGNISED,
                        None,
                    )
                )
                continue
            if gate is None:
                continue
            if not threshold_read:
                threshold, threshold_read = _threshold(path), True
            line = gate.flag_assign.lineno if gate.flag_assign is not None else gate.line
            state = SiteState.FIXED if gate.form.fixed else SiteState.PRE_FIX
            text = gate.form.value
            if gate.form is GateForm.THRESHOLD and gate.attribute is None:
                text = f"{gate.form.value}: {ast.unparse(gate.decision)}"
            sites.append(
                Site(
                    name,
                    line,
                    where,
                    SiteKind.MLA_GATE,
                    text,
                    state,
                    threshold,
                    tuple(sorted(s.lineno for s in gate.sites)),
                )
            )
            for guard in gate.guards:
                sites.append(
                    Site(
                        name,
                        guard.lineno,
                        where,
                        SiteKind.SPARSE_GATHER,
                        ast.unparse(guard.test),
                        SiteState.LEFT_ALONE,
                        None,
                    )
                )
    return sorted(sites, key=lambda s: s.line)


def scan_tree(root: Path) -> list[Site]:
    """Every site under `root` (a package folder, a checkout, or one file)."""
    if root.is_file():
        return scan_file(root, str(root))
    out: list[Site] = []
    for path in sorted(root.rglob("*.py")):
        if "__pycache__" in path.parts or "tests" in path.relative_to(root).parts:
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        pooling = "Indexer" in text and ("_pool" in text or "accumulate_windows" in text)
        if "embed_q" not in text and not pooling:
            continue
        out += scan_file(path, str(path.relative_to(root.parent)))
    return out


def installed_roots() -> list[tuple[str, Path]]:
    """The runtimes mlatui can run, where installed: mlx_lm, and mlx_vlm when present. Found
    without importing them (mlx-vlm's package imports a great deal)."""
    import importlib.util

    out = []
    for name in ("mlx_lm", "mlx_vlm"):
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.submodule_search_locations:
            out.append((name, Path(next(iter(spec.submodule_search_locations)))))
    return out
