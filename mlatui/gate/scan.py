"""`mlatui scan`: where a runtime's MLA gates and indexer pooling gates are, and in which form.

Reads source only (no import, no mlx), so it works on any tree: an installed mlx-lm or mlx-vlm,
a checkout of a pull request, a copy vendored inside an app.
"""

from __future__ import annotations

import ast
from dataclasses import asdict, dataclass
from enum import StrEnum
from functools import lru_cache
from pathlib import Path

from mlatui.gate.forms import (
    Branch,
    GateForm,
    GateShapeError,
    MlaGate,
    SiteKind,
    WidthPath,
    bound_value,
    indexer_pool_gates,
    method_branches,
    read_method,
    width_tests,
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
    fixed_at: int | None = None  # the width a literal or module-constant bound absorbs up to

    def to_dict(self) -> dict[str, object]:
        out = asdict(self)
        out["kind"], out["state"], out["lines"] = (
            self.kind.value,
            self.state.value,
            list(self.lines),
        )
        return out


@lru_cache(maxsize=512)
def _parse_once(path: Path, mtime_ns: int, size: int) -> ast.Module | None:
    try:
        return ast.parse(path.read_text(encoding="utf-8"))
    except (SyntaxError, UnicodeDecodeError, OSError):
        return None


def parsed(path: Path) -> ast.Module | None:
    """A source file's syntax tree, None where it does not parse. A gated file is read by its
    scan, its constants and its config defaults, and a sibling by every module importing it:
    each is parsed once while it stays unchanged (same mtime and size). Callers only read it."""
    try:
        stat = path.stat()
    except OSError:
        return None
    return _parse_once(path, stat.st_mtime_ns, stat.st_size)


def _config_defaults(path: Path) -> dict[str, int]:
    """Integer defaults of the head dims in the family's config dataclasses: the module's own
    (mlx-lm) or its folder's config.py (mlx-vlm)."""
    found: dict[str, int] = {}
    for source in (path, path.parent / "config.py"):
        tree = parsed(source) if source.is_file() else None
        if tree is None:
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


def module_constants(path: Path, depth: int = 1) -> dict[str, int]:
    """The integer constants a module defines at its top level (`_ABSORBED_MAX_L = 8`), and
    those it imports by name from a sibling module of the same tree (`from ..linear import
    DECODE_BLOCK_SIZE`)."""
    tree = parsed(path)
    if tree is None:
        return {}
    found: dict[str, int] = {}
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, int)
            and not isinstance(node.value.value, bool)
        ):
            found[node.targets[0].id] = node.value.value
        elif isinstance(node, ast.ImportFrom) and node.level and node.module and depth:
            folder = path.parent
            for _ in range(node.level - 1):
                folder = folder.parent
            sibling = folder.joinpath(*node.module.split(".")).with_suffix(".py")
            if sibling.is_file():
                theirs = module_constants(sibling, depth - 1)
                for alias in node.names:
                    if alias.name in theirs:
                        found[alias.asname or alias.name] = theirs[alias.name]
    return found


@dataclass
class _FileContext:
    name: str
    constants: dict[str, int]
    threshold: int | None


def _gate_bound(gate: MlaGate, lengths: set[str], constants: dict[str, int]) -> int | None:
    """The width a gate absorbs up to, where its bound is a literal or module constant."""
    for test in width_tests(gate.decision, lengths):
        if not test.decode_only and test.absorbs_below:
            return bound_value(test, constants)
    return None


def _path_site(path: WidthPath, where: str, fixed_method: bool, ctx: _FileContext) -> Site:
    kind = {
        Branch.ABSORBED: SiteKind.ABSORBED_PATH,
        Branch.MATERIALISED: SiteKind.MATERIALISED_PATH,
        Branch.BOTH: SiteKind.MIXED_PATH,
    }[path.branch]
    bounds = [w for w in path.width if not w.decode_only]
    if bounds:
        state = SiteState.FIXED
    else:
        state = SiteState.LEFT_ALONE if fixed_method else SiteState.PRE_FIX
    fixed_at = bound_value(bounds[0], ctx.constants) if bounds else None
    return Site(
        ctx.name,
        path.line,
        where,
        kind,
        path.condition(),
        state,
        ctx.threshold if bounds else None,
        path.lines,
        fixed_at,
    )


def _method_sites(
    fn: ast.FunctionDef,
    where: str,
    init: ast.FunctionDef | None,
    helpers: dict[str, set[str]],
    ctx: _FileContext,
) -> list[Site]:
    try:
        reading = read_method(fn, init, helpers)
    except GateShapeError as e:
        return [
            Site(ctx.name, e.line, where, SiteKind.MLA_GATE, str(e), SiteState.NOT_RECOGNISED,
                 None, e.lines)
        ]  # fmt: skip
    gate, sites = reading.gate, []
    fixed_method = (gate is not None and gate.form.fixed) or any(
        not w.decode_only for p in reading.paths for w in p.width
    )
    if gate is not None:
        line = gate.flag_assign.lineno if gate.flag_assign is not None else gate.line
        text = gate.form.value
        if gate.form is GateForm.THRESHOLD and gate.attribute is None:
            text = f"{gate.form.value}: {ast.unparse(gate.decision)}"
        sites.append(
            Site(
                ctx.name,
                line,
                where,
                SiteKind.MLA_GATE,
                text,
                SiteState.FIXED if gate.form.fixed else SiteState.PRE_FIX,
                ctx.threshold,
                tuple(sorted(s.lineno for s in gate.sites)),
                _gate_bound(gate, reading.lengths, ctx.constants),
            )
        )
    sites += [_path_site(p, where, fixed_method, ctx) for p in reading.paths]
    for guard in reading.guards:
        sites.append(
            Site(
                ctx.name,
                guard.lineno,
                where,
                SiteKind.SPARSE_GATHER,
                ast.unparse(guard.test),
                SiteState.LEFT_ALONE,
                None,
            )
        )
    return sites


def _pool_sites(cls: ast.ClassDef, fn: ast.FunctionDef, where: str, name: str) -> list[Site]:
    sites = [
        Site(name, pool.lineno, where, SiteKind.INDEXER_POOL, "S == 1", SiteState.PRE_FIX, None)
        for pool in indexer_pool_gates(fn)
    ]
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
    return sites


def scan_file(path: Path, shown: str | None = None) -> list[Site]:
    """Every MLA gate, width path, sparse gather guard and indexer pooling gate in one source
    file. `shown` is the path the sites carry (default: the path as given)."""
    tree = parsed(path)
    if tree is None:
        return []
    ctx: _FileContext | None = None
    sites: list[Site] = []
    for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
        methods = [f for f in cls.body if isinstance(f, ast.FunctionDef)]
        init = next((f for f in methods if f.name == "__init__"), None)
        helpers = {f.name: method_branches(f) for f in methods}
        for fn in methods:
            where = f"{cls.name}.{fn.name}"
            sites += _pool_sites(cls, fn, where, shown or str(path))
            if not any(helpers.values()):
                continue
            if ctx is None:
                ctx = _FileContext(shown or str(path), module_constants(path), _threshold(path))
            sites += _method_sites(fn, where, init, helpers, ctx)
    return sorted(sites, key=lambda s: s.line)


def scan_tree(root: Path) -> list[Site]:
    """Every site under `root` (a package folder, a checkout, or one file); each site's path is
    relative to `root` (a file's own name where `root` is the file)."""
    if root.is_file():
        return scan_file(root, root.name)
    out: list[Site] = []
    for path in sorted(root.rglob("*.py")):
        if "__pycache__" in path.parts or "tests" in path.relative_to(root).parts:
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        pooling = "Indexer" in text and ("_pool" in text or "accumulate_windows" in text)
        if "embed_q" not in text and not pooling:
            continue
        out += scan_file(path, str(path.relative_to(root)))
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
