"""The shapes an MLA gate takes in runtime source, recognised from the AST.

MLA attention has an absorbed branch (queries through `embed_q`, the output through
`unembed_out`, attention against the cached latent) and a materialised one (K and V expanded
from every cached latent). Which one runs is an `if` that guards those calls. Runtimes write it
three ways:

- pre-fix: `if L == 1:` (mlx-lm up to 0.32, mlx-vlm up to 0.6);
- threshold form: `if L <= self._max_absorbed:`, the attribute computed once from the head
  dims (the upstream mlx-lm fix);
- cache-aware form: `absorbed = L == 1 or L <= max_absorbed_queries(*dims, latent_length(kv))`
  then `if absorbed:` (mlx-vlm 0.7).

Pure Python, no mlx: `mlatui scan` reads source trees with it, the patch rewrites with it.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from enum import StrEnum

GATE_MARKERS = ("embed_q", "unembed_out")
THRESHOLD_HELPER = "max_absorbed_queries"


class GateForm(StrEnum):
    PRE_FIX = "pre-fix"
    THRESHOLD = "fixed (threshold form)"
    CACHE_AWARE = "fixed (cache-aware form)"

    @property
    def fixed(self) -> bool:
        return self is not GateForm.PRE_FIX


class SiteKind(StrEnum):
    MLA_GATE = "MLA gate"
    INDEXER_POOL = "indexer pool gate"
    SPARSE_GATHER = "L == 1 guard left alone (a correctness guard, e.g. the sparse gather)"
    INCREMENTAL_POOL = "indexer pools incrementally at any width"


class GateShapeError(ValueError):
    """An `if` guards the absorbed/materialised calls but its test is no known gate form."""

    def __init__(self, line: int, message: str):
        super().__init__(message)
        self.line = line


@dataclass
class MlaGate:
    """One method's MLA gate: its form, the installed decision as an expression, and the
    statements that consult it."""

    form: GateForm
    length_name: str
    decision: ast.expr  # the installed condition, evaluated once per call
    sites: list[ast.If]  # the `if`s guarding embed_q / unembed_out
    flag_assign: ast.Assign | None = None  # the cache-aware form's `absorbed = ...`
    attribute: str | None = None  # the threshold form's `self.<attribute>`
    guards: list[ast.If] = field(default_factory=list)  # other `if L == 1:` left alone
    uses: dict[str, int] = field(default_factory=dict)  # name -> times the method reads it

    @property
    def line(self) -> int:
        return min(s.lineno for s in self.sites)


def _calls(node: ast.AST) -> set[str]:
    return {
        n.func.attr if isinstance(n.func, ast.Attribute) else getattr(n.func, "id", "")
        for n in ast.walk(node)
        if isinstance(n, ast.Call)
    }


def _guards_markers(node: ast.If) -> bool:
    return bool(
        _calls(ast.Module(body=[*node.body, *node.orelse], type_ignores=[])) & set(GATE_MARKERS)
    )


def _eq_one(node: ast.AST) -> str | None:
    """`NAME == 1` -> NAME."""
    if (
        isinstance(node, ast.Compare)
        and isinstance(node.left, ast.Name)
        and len(node.ops) == 1
        and isinstance(node.ops[0], ast.Eq)
        and isinstance(node.comparators[0], ast.Constant)
        and node.comparators[0].value == 1
    ):
        return node.left.id
    return None


def _le_bound(node: ast.AST) -> tuple[str, ast.expr] | None:
    """`NAME <= BOUND` -> (NAME, BOUND)."""
    if (
        isinstance(node, ast.Compare)
        and isinstance(node.left, ast.Name)
        and len(node.ops) == 1
        and isinstance(node.ops[0], (ast.LtE, ast.Lt))
    ):
        return node.left.id, node.comparators[0]
    return None


def _self_attribute(node: ast.AST) -> str | None:
    if (
        isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "self"
    ):
        return node.attr
    return None


def classify_condition(test: ast.expr) -> tuple[GateForm, str, str | None] | None:
    """(form, length name, threshold attribute) of a gate condition; None when unknown."""
    name = _eq_one(test)
    if name is not None:
        return GateForm.PRE_FIX, name, None
    bound = _le_bound(test)
    if bound is not None:
        length, limit = bound
        if THRESHOLD_HELPER in _calls(limit):
            cache_aware = isinstance(limit, ast.Call) and _helper_cache_aware(limit)
            return (GateForm.CACHE_AWARE if cache_aware else GateForm.THRESHOLD), length, None
        return GateForm.THRESHOLD, length, _self_attribute(limit)
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or):
        parts = [classify_condition(v) for v in test.values]
        if all(p is not None for p in parts):
            known = [p for p in parts if p is not None]
            lengths = {p[1] for p in known}
            fixed = [p for p in known if p[0].fixed]
            if len(lengths) == 1 and fixed:
                return fixed[0][0], known[0][1], fixed[0][2]
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        # `length <= DECODE_BLOCK_SIZE and not self.training`: one part decides the branch
        known = [p for p in (classify_condition(v) for v in test.values) if p is not None]
        if len(known) == 1:
            return known[0]
    return None


def _helper_cache_aware(call: ast.Call) -> bool:
    """`max_absorbed_queries(r, n, v, T)` or `(*dims, T)`: given the cache length."""
    positional = [a for a in call.args if not isinstance(a, ast.Starred)]
    starred = any(isinstance(a, ast.Starred) for a in call.args)
    return (
        len(positional) >= 4
        or (starred and len(positional) >= 1)
        or any(k.arg == "cache_len" for k in call.keywords)
    )


def _flag_assignments(fn: ast.FunctionDef) -> dict[str, ast.Assign]:
    out: dict[str, ast.Assign] = {}
    for n in ast.walk(fn):
        if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name):
            out.setdefault(n.targets[0].id, n)
    return out


def find_mla_gate(fn: ast.FunctionDef, init: ast.FunctionDef | None = None) -> MlaGate | None:
    """The MLA gate of one method (None: the method has no `if` guarding embed_q/unembed_out).
    Raises GateShapeError, naming the line, for a guard whose test is no known form."""
    guarding = [n for n in ast.walk(fn) if isinstance(n, ast.If) and _guards_markers(n)]
    flags = _flag_assignments(fn)
    found: list[tuple[ast.If, GateForm, str, ast.expr, ast.Assign | None, str | None]] = []
    unknown: list[tuple[ast.If, int, str]] = []
    for node in guarding:
        test = node.test
        if isinstance(test, ast.Name) and test.id in flags:
            assign = flags[test.id]
            known = classify_condition(assign.value)
            if known is not None:
                found.append((node, known[0], known[1], assign.value, assign, known[2]))
            else:
                unknown.append(
                    (
                        node,
                        assign.lineno,
                        f"the flag {test.id!r} guarding embed_q/unembed_out is set by "
                        f"`{ast.unparse(assign.value)}`, which is no known gate form",
                    )
                )
            continue
        known = classify_condition(test)
        if known is not None:
            found.append((node, known[0], known[1], test, None, known[2]))
            continue
        inner = [n for n in ast.walk(node) if n is not node and n in guarding]
        if inner:  # an enclosing block (`if cache is not None:`), not the gate itself
            continue
        unknown.append(
            (
                node,
                node.lineno,
                f"`if {ast.unparse(test)}:` guards embed_q/unembed_out but is no known gate form",
            )
        )
    within = {id(n) for f in found for n in ast.walk(f[0]) if n is not f[0]}
    for node, line, message in unknown:
        if id(node) not in within:  # a choice inside one branch of a known gate is not the gate
            raise GateShapeError(line, message)
    if not found:
        return None
    decisions = {ast.dump(d) for _, _, _, d, _, _ in found}
    if len(decisions) > 1:
        raise GateShapeError(
            found[0][0].lineno,
            "the gates of one method test different conditions: "
            + " / ".join(sorted({ast.unparse(d) for _, _, _, d, _, _ in found})),
        )
    _, form, length, decision, flag, attribute = found[0]
    if attribute is not None and init is not None and not _assigns_attribute(init, attribute):
        raise GateShapeError(
            found[0][0].lineno,
            f"the gate compares with self.{attribute}, which __init__ does not set",
        )
    guards = [
        n
        for n in ast.walk(fn)
        if isinstance(n, ast.If) and n not in guarding and _eq_one(n.test) == length
    ]
    uses: dict[str, int] = {}
    for n in ast.walk(fn):
        if isinstance(n, ast.Name):
            uses[n.id] = uses.get(n.id, 0) + 1
    return MlaGate(form, length, decision, [f[0] for f in found], flag, attribute, guards, uses)


def _assigns_attribute(init: ast.FunctionDef, attribute: str) -> bool:
    return any(
        isinstance(n, (ast.Assign, ast.AnnAssign))
        and any(
            _self_attribute(t) == attribute
            for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
        )
        for n in ast.walk(init)
    )


def latent_name(gate: MlaGate) -> str | None:
    """The cached latent's variable: the argument of `embed_q(latent, transpose=False)`, which
    the materialised branch expands (its last-but-one axis is the cache length). Where several
    are expanded (mlx-vlm's glm5_next expands only the new tokens when a projected cache
    matches), the one the method reads most is the whole cache it attends over."""
    found: list[str] = []
    for site in gate.sites:
        for n in ast.walk(site):
            if (
                isinstance(n, ast.Call)
                and isinstance(n.func, ast.Attribute)
                and n.func.attr == "embed_q"
                and any(k.arg == "transpose" for k in n.keywords)
                and n.args
                and isinstance(n.args[0], ast.Name)
                and n.args[0].id not in found
            ):
                found.append(n.args[0].id)
    return max(found, key=lambda name: gate.uses.get(name, 0), default=None)


def indexer_pool_gates(fn: ast.FunctionDef) -> list[ast.If]:
    """`if S == 1 and ... cache._pool ...:` — incremental pooling allowed for one new token only."""
    out = []
    for n in ast.walk(fn):
        if not isinstance(n, ast.If):
            continue
        parts = n.test.values if isinstance(n.test, ast.BoolOp) else [n.test]
        if any(_eq_one(p) for p in parts) and "_pool" in ast.unparse(n.test):
            out.append(n)
    return out
