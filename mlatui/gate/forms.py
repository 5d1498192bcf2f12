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

Hand-written runtimes add paths of their own beside the gate, each chosen in part by the query
count: an `if L == 1:` decode path that returns early, a fast path behind a compound flag
(`fast = native and L > 1 and (T >= min_k or L <= 8)`), a few-rows `elif L <= 8:` inside a
top-k block whose `if L == 1:` only gathers. `read_method` reports each (`WidthPath`); the patch
makes their width bounds follow the arm's decision and counts the calls that leave through them.

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
    ABSORBED_PATH = "absorbed path (a branch of its own, chosen in part by the width)"
    MATERIALISED_PATH = "materialised path (a branch of its own, chosen in part by the width)"
    MIXED_PATH = "path holding both branches (chosen in part by the width)"

    @property
    def is_path(self) -> bool:
        return self in (SiteKind.ABSORBED_PATH, SiteKind.MATERIALISED_PATH, SiteKind.MIXED_PATH)

    INCREMENTAL_POOL = "indexer pools incrementally at any width"


class GateShapeError(ValueError):
    """An `if` guards the absorbed/materialised calls but its test is no known gate form."""

    def __init__(self, line: int, message: str, lines: tuple[int, ...] = ()):
        super().__init__(message)
        self.line = line
        self.lines = lines or (line,)


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
    paths: list[WidthPath] = field(default_factory=list)  # the method's other width paths

    @property
    def line(self) -> int:
        return min(s.lineno for s in self.sites)


def _calls(node: ast.AST) -> set[str]:
    return {
        n.func.attr if isinstance(n.func, ast.Attribute) else getattr(n.func, "id", "")
        for n in ast.walk(node)
        if isinstance(n, ast.Call)
    }


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


class Branch(StrEnum):
    ABSORBED = "absorbed"
    MATERIALISED = "materialised"
    BOTH = "absorbed and materialised"


def _branch_calls(nodes: list[ast.stmt], helpers: dict[str, set[str]]) -> set[str]:
    """What a block computes: "absorbed" (embed_q on the queries), "materialised" (embed_q over
    the cached latent, `transpose=False`), "output" (unembed_out alone); a call of one of the
    class's own methods (`self._few_rows(...)`) counts as what that method computes."""
    found: set[str] = set()
    for n in ast.walk(ast.Module(body=nodes, type_ignores=[])):
        if not isinstance(n, ast.Call) or not isinstance(n.func, ast.Attribute):
            continue
        if n.func.attr == "embed_q":
            transposed = any(k.arg == "transpose" for k in n.keywords)
            found.add("materialised" if transposed else "absorbed")
        elif n.func.attr == "unembed_out":
            found.add("output")
        elif isinstance(n.func.value, ast.Name) and n.func.value.id == "self":
            found |= helpers.get(n.func.attr, set())
    return found


def _branch_of(calls: set[str]) -> Branch | None:
    absorbed, materialised = "absorbed" in calls, "materialised" in calls
    if absorbed and materialised:
        return Branch.BOTH
    if absorbed:
        return Branch.ABSORBED
    return Branch.MATERIALISED if materialised else None


def _gate_member(node: ast.If) -> bool:
    """An `if` of the gate itself: the absorbed side in its body, the materialised side (if any)
    in its `else:`; not a chain whose `else:` holds paths of both kinds."""
    body, orelse = _branch_calls(node.body, {}), _branch_calls(node.orelse, {})
    return bool(body | orelse) and "materialised" not in body and "absorbed" not in orelse


def method_branches(fn: ast.FunctionDef) -> set[str]:
    """What a helper method computes, for the methods that call it (`_branch_calls`)."""
    return _branch_calls(fn.body, {})


def _length_names(fn: ast.FunctionDef) -> set[str]:
    """The query count's names: `B, L, D = x.shape` (index 1 of three), `batch, _, length, _ =
    q.shape` (index 2 of four), and any name compared `== 1`."""
    names: set[str] = set()
    for n in ast.walk(fn):
        if (
            isinstance(n, ast.Assign)
            and isinstance(n.value, ast.Attribute)
            and n.value.attr == "shape"
            and isinstance(n.targets[0], ast.Tuple)
        ):
            elts = n.targets[0].elts
            at = {3: 1, 4: 2}.get(len(elts))
            named = elts[at] if at is not None else None
            if isinstance(named, ast.Name):
                names.add(named.id)
        name = _eq_one(n)
        if name is not None:
            names.add(name)
    return names


@dataclass(frozen=True)
class WidthTest:
    """One comparison of the query count inside a condition: `L <= 8`, `L > 1`, `L == 1`."""

    node: ast.Compare
    length_name: str
    op: str  # "<=", "<", ">", ">=", "=="
    bound: ast.expr

    @property
    def decode_only(self) -> bool:
        """`L == 1` or `L > 1`: tells decode from the rest, chooses no width."""
        return (
            isinstance(self.bound, ast.Constant)
            and self.bound.value == 1
            and self.op in ("==", ">")
        )

    @property
    def absorbs_below(self) -> bool:
        """True for `L <= X` / `L < X` (true while the width is small)."""
        return self.op in ("<=", "<", "==")


_OPS = {ast.LtE: "<=", ast.Lt: "<", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "=="}
_FLIPPED = {"<=": ">=", "<": ">", ">": "<", ">=": "<=", "==": "=="}


def width_tests(test: ast.expr, lengths: set[str]) -> list[WidthTest]:
    """Every comparison of a query-count name with something, in source order."""
    out = []
    for n in ast.walk(test):
        if not isinstance(n, ast.Compare) or len(n.ops) != 1 or type(n.ops[0]) not in _OPS:
            continue
        op = _OPS[type(n.ops[0])]
        left, right = n.left, n.comparators[0]
        if isinstance(left, ast.Name) and left.id in lengths:
            out.append(WidthTest(n, left.id, op, right))
        elif isinstance(right, ast.Name) and right.id in lengths:
            out.append(WidthTest(n, right.id, _FLIPPED[op], left))
    return sorted(out, key=lambda w: (w.node.lineno, w.node.col_offset))


def bound_value(test: WidthTest, constants: dict[str, int]) -> int | None:
    """The largest width a bound admits (`L <= 8`, `L < 9`, `L > 8` all give 8), when the bound
    is a literal or a module-level constant."""
    bound = test.bound
    value: object = None
    if isinstance(bound, ast.Constant):
        value = bound.value
    elif isinstance(bound, ast.Name):
        value = constants.get(bound.id)
    if not isinstance(value, int) or isinstance(value, bool):
        return None
    return value - 1 if test.op in ("<", ">=") else value


@dataclass
class WidthPath:
    """A branch of the method chosen in part by the query count, that is not the gate's own `if`:
    a decode path that returns early, a fast path behind a compound flag, a few-rows path in a
    top-k block, or the `else:` after one."""

    node: ast.If
    test: ast.expr  # the condition as written (the flag's value where a flag decides)
    branch: Branch
    width: list[WidthTest]
    else_of: bool = False  # the path is `node`'s `else:` block, taken when the test is false
    flag_assign: ast.Assign | None = None

    @property
    def body(self) -> list[ast.stmt]:
        return self.node.orelse if self.else_of else self.node.body

    @property
    def line(self) -> int:
        if self.else_of:
            return self.node.orelse[0].lineno - 1
        return self.flag_assign.lineno if self.flag_assign is not None else self.node.lineno

    @property
    def lines(self) -> tuple[int, ...]:
        first = self.node.lineno if not self.else_of else self.line
        flag = () if self.flag_assign is None or self.else_of else (self.flag_assign.lineno,)
        return tuple(sorted({*flag, first}))

    def condition(self) -> str:
        said = ast.unparse(self.test)
        if self.flag_assign is not None:
            said = f"{self.flag_assign.targets[0].id} = {said}"  # type: ignore[attr-defined]
        return f"not ({said})" if self.else_of else said


@dataclass
class MethodReading:
    """Everything one method decides with the query count: its gate (None: it has none), the
    other width paths, and the `L == 1` guards around no MLA call."""

    gate: MlaGate | None
    paths: list[WidthPath]
    guards: list[ast.If]
    lengths: set[str]


Found = tuple[ast.If, GateForm, str, ast.expr, ast.Assign | None, str | None]
Tests = dict[int, tuple[ast.expr, ast.Assign | None]]  # id(if) -> (its condition, the flag set)


def read_method(
    fn: ast.FunctionDef,
    init: ast.FunctionDef | None = None,
    helpers: dict[str, set[str]] | None = None,
) -> MethodReading:
    """The MLA gate, width paths and gather guards of one method. Raises GateShapeError, naming
    the lines and the condition, for an `if` around embed_q/unembed_out that is none of them.
    `helpers`: what the class's other methods compute (`method_branches`)."""
    helpers = {k: v for k, v in (helpers or {}).items() if k != fn.name}
    lengths = _length_names(fn)
    ifs = [n for n in ast.walk(fn) if isinstance(n, ast.If)]
    tests = _conditions(fn, ifs)
    for test, _ in tests.values():
        known = classify_condition(test)
        if known is not None:
            lengths.add(known[1])
    found = _gate_ifs(ifs, tests)
    paths, guards = _paths_and_guards(ifs, tests, {id(f[0]) for f in found}, lengths, helpers)
    _refuse_unrecognised(ifs, tests, found, paths, guards)
    gate = _gate_from(fn, init, found) if found else None
    if gate is not None:
        gate.paths = paths
        gate.guards = guards
    return MethodReading(gate, sorted(paths, key=lambda p: p.line), guards, lengths)


def _conditions(fn: ast.FunctionDef, ifs: list[ast.If]) -> Tests:
    """Each `if`'s condition: the flag's value where it tests a flag (`if absorbed:`)."""
    flags = _flag_assignments(fn)
    out: Tests = {}
    for node in ifs:
        test = node.test
        flag = flags.get(test.id) if isinstance(test, ast.Name) else None
        out[id(node)] = (flag.value, flag) if flag is not None else (test, None)
    return out


def _gate_ifs(ifs: list[ast.If], tests: Tests) -> list[Found]:
    """The `if`s of the gate: those testing one known gate condition (or one flag) that between
    them put the absorbed side in a body and the materialised side in an `else:`."""
    groups: dict[str, list[ast.If]] = {}
    for node in ifs:
        test, flag = tests[id(node)]
        if classify_condition(test) is not None and _gate_member(node):
            key = flag.targets[0].id if flag is not None else ast.dump(test)  # type: ignore[attr-defined]
            groups.setdefault(key, []).append(node)
    found: list[Found] = []
    for members in groups.values():
        bodies = set().union(*(_branch_calls(m.body, {}) for m in members))
        elses = set().union(*(_branch_calls(m.orelse, {}) for m in members))
        if "absorbed" not in bodies or "materialised" not in elses:
            continue
        for m in members:
            test, flag = tests[id(m)]
            known = classify_condition(test)
            assert known is not None
            found.append((m, known[0], known[1], test, flag, known[2]))
    return found


def _paths_and_guards(
    ifs: list[ast.If],
    tests: Tests,
    gate_ifs: set[int],
    lengths: set[str],
    helpers: dict[str, set[str]],
) -> tuple[list[WidthPath], list[ast.If]]:
    """Every other `if` whose condition compares the query count: a path where its body (or
    its `else:` block) computes a branch, a gather guard where `if L == 1:` computes none."""
    paths: list[WidthPath] = []
    guards: list[ast.If] = []
    for node in ifs:
        test, flag = tests[id(node)]
        width = width_tests(test, lengths)
        if id(node) in gate_ifs or not width:
            continue
        body = _branch_of(_branch_calls(node.body, helpers))
        if body is None and len(width) == 1 and _eq_one(test):
            guards.append(node)
        elif body is not None:
            paths.append(WidthPath(node, test, body, width, False, flag))
        elif_chain = len(node.orelse) == 1 and isinstance(node.orelse[0], ast.If)
        other = _branch_of(_branch_calls(node.orelse, helpers)) if not elif_chain else None
        if other is not None:
            paths.append(WidthPath(node, test, other, width, True, flag))
    return paths, guards


def _refuse_unrecognised(
    ifs: list[ast.If],
    tests: Tests,
    found: list[Found],
    paths: list[WidthPath],
    guards: list[ast.If],
) -> None:
    """GateShapeError for the `if`s around embed_q/unembed_out that are no gate, path or guard,
    nor inside one, nor a block enclosing one (`if cache is not None:`)."""
    recognised = {id(n) for n in [*(f[0] for f in found), *(p.node for p in paths), *guards]}
    blocks = [[*f[0].body, *f[0].orelse] for f in found] + [p.body for p in paths]
    inside = {id(n) for body in blocks for n in ast.walk(ast.Module(body=body, type_ignores=[]))}
    unknown = [
        node
        for node in ifs
        if id(node) not in recognised | inside
        and _branch_calls([*node.body, *node.orelse], {})
        and not any(n is not node and id(n) in recognised for n in ast.walk(node))
    ]
    if not unknown:
        return
    node = unknown[0]
    test, flag = tests[id(node)]
    at = ", ".join(str(n.lineno) for n in unknown)
    said = f"`if {ast.unparse(node.test)}:` (line{'s' if len(unknown) > 1 else ''} {at})"
    if flag is not None:
        said += f", the flag set at line {flag.lineno} by `{ast.unparse(test)}`,"
    raise GateShapeError(
        flag.lineno if flag is not None else node.lineno,
        f"{said} guards embed_q/unembed_out but is no known gate form",
        tuple(sorted({n.lineno for n in unknown} | ({flag.lineno} if flag else set()))),
    )


def _gate_from(fn: ast.FunctionDef, init: ast.FunctionDef | None, found: list[Found]) -> MlaGate:
    decisions: dict[str, list[int]] = {}
    for node, _, _, decision, _, _ in found:
        decisions.setdefault(ast.unparse(decision), []).append(node.lineno)
    if len(decisions) > 1:
        said = " / ".join(
            f"`{d}` (line{'s' if len(at) > 1 else ''} {', '.join(map(str, at))})"
            for d, at in sorted(decisions.items(), key=lambda kv: kv[1])
        )
        raise GateShapeError(
            min(n.lineno for n, *_ in found),
            f"the gates of one method test different conditions: {said}",
            tuple(sorted(n.lineno for n, *_ in found)),
        )
    _, form, length, decision, flag, attribute = found[0]
    if attribute is not None and init is not None and not _assigns_attribute(init, attribute):
        raise GateShapeError(
            found[0][0].lineno,
            f"the gate compares with self.{attribute}, which __init__ does not set",
        )
    uses: dict[str, int] = {}
    for n in ast.walk(fn):
        if isinstance(n, ast.Name):
            uses[n.id] = uses.get(n.id, 0) + 1
    return MlaGate(form, length, decision, [f[0] for f in found], flag, attribute, [], uses)


def find_mla_gate(
    fn: ast.FunctionDef,
    init: ast.FunctionDef | None = None,
    helpers: dict[str, set[str]] | None = None,
) -> MlaGate | None:
    """The MLA gate of one method (None: the method has no `if` deciding between the absorbed
    and the materialised branch), with its width paths and gather guards. Raises
    GateShapeError, naming the lines, for a guard whose test is no known form."""
    return read_method(fn, init, helpers).gate


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
