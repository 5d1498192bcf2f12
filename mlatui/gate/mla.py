"""The MLA gate's patch: each attention instance's gate rewritten from the runtime's own source,
with counters.

MLA caches a rank-r latent per token. A step with L new queries can either *absorb* the
up-projection into the queries and attend against the latent (cost ~ L), or *materialise*
full K/V from every cached latent (cost ~ T). Pre-fix runtimes absorb only when L == 1; fixed
ones compare L with a threshold (gate/forms.py lists the forms). The patch re-derives each gated
method from the installed source with that test replaced by one decision, `_mlatui_gate`, which
asks the arm's policy and counts the branch; the installed policy answers with the installed
condition itself, so an arm can run the runtime exactly as it is and still be counted.

mlatui's own absorbed MLA attention, built with `mx.compile`: the compiled arm.

The same math as the runtime's absorbed branch (the query absorbed into the latent through
`embed_q`, scores against the cached latent plus the rope scores, softmax, values read from the
latent and brought out through `unembed_out`, then `o_proj`), in two compiled pieces around the
cache update: the projections (one trace per width; the cache offset is an array input, so a
growing cache does not retrace) and the attention (traced shapeless per width and mask, so any
cache length reuses it). Backend-neutral: CPU, CUDA and Metal run the same code, no hand-written
kernels. The gate is the formula's; the branch is counted by the arm's BranchCounters like every
gated call; a call of one query runs the runtime's own L = 1 branch, as the other arm does, so
the run's L = 1 check keeps comparing identical code. Supported: the DeepSeek-V3 form of MLA attention (`__call__(x, mask, cache)`, `q_proj`
or the q LoRA, `kv_a_proj_with_mqa`, `embed_q`/`unembed_out`, no indexer), which deepseek_v3,
kimi, glm4_moe_lite, longcat_flash and kimi_linear's MLA layers share; any other fails closed.
"""

from __future__ import annotations

import ast
import copy
import inspect
import sys
import textwrap
import threading
import types
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import mlx.core as mx
import mlx.nn as nn

from mlatui.config.arm_settings import Threshold
from mlatui.gate.forms import (
    GATE_MARKERS,
    Branch,
    GateForm,
    GateShapeError,
    MlaGate,
    WidthPath,
    find_mla_gate,
    latent_name,
    method_branches,
)
from mlatui.gate.policy import (  # noqa: F401 (the gate's names, as callers of the patch use them)
    STOCK_POLICY,
    UNBOUNDED,
    CalibratedPolicy,
    FixedPolicy,
    ForcedPolicy,
    FormulaPolicy,
    GatePolicy,
    Geometry,
    InstalledPolicy,
    as_policy,
    max_absorbed_queries,
)

ABSORBED_FLAG = "_mlatui_absorbed"
INSTALLED_WANTED = "_mlatui_installed_wanted"


class PatchError(RuntimeError):
    """The installed runtime's attention has no gate mlatui recognises (fails closed)."""


def geometry_of(attn: nn.Module) -> Geometry:
    return Geometry(
        int(attn.kv_lora_rank),
        int(attn.qk_nope_head_dim),
        int(attn.v_head_dim),
        int(
            getattr(attn, "num_heads", None) or attn.num_attention_heads
        ),  # longcat: num_attention_heads
    )


@dataclass
class BranchCounters:
    """Attention calls per branch, keyed by L. Shared by every MLA module of one model."""

    absorbed: Counter[int] = field(default_factory=Counter)
    materialised: Counter[int] = field(default_factory=Counter)

    def record(self, length: int, absorbed: bool) -> None:
        (self.absorbed if absorbed else self.materialised)[length] += 1

    def reset(self) -> None:
        self.absorbed.clear()
        self.materialised.clear()

    def snapshot(self) -> dict[str, dict[int, int]]:
        return {"absorbed": dict(self.absorbed), "materialised": dict(self.materialised)}

    def total(self) -> tuple[int, int]:
        return sum(self.absorbed.values()), sum(self.materialised.values())


class _GateState:
    """Per-instance gate; lives in the module's __dict__, so it is never a parameter."""

    def __init__(self, geometry: Geometry, policy: GatePolicy, counters: BranchCounters):
        self.geometry = geometry
        self.policy = policy
        self.counters = counters


def _method_gate(
    cls: type, name: str
) -> tuple[types.FunctionType, ast.Module, MlaGate, str, int] | None:
    """The method `name` of `cls` (as the installed source writes it) and its MLA gate."""
    where = f"{cls.__module__}.{cls.__qualname__}.{name}"
    method = getattr(cls, name, None)
    if not isinstance(method, types.FunctionType):
        return None
    try:
        source = textwrap.dedent(inspect.getsource(method))
        filename = inspect.getsourcefile(method) or f"<{where}>"
        first_line = inspect.getsourcelines(method)[1]
    except (OSError, TypeError) as e:
        raise PatchError(f"cannot read the source of {where}: {e}") from e
    tree = ast.parse(source)
    fn = tree.body[0]
    if not isinstance(fn, ast.FunctionDef):
        return None
    try:
        gate = find_mla_gate(fn, _init_ast(cls), _helper_branches(cls))
    except GateShapeError as e:
        raise PatchError(f"{filename}:{first_line + e.line - 1}: {where}: {e}") from None
    if gate is None:
        return None
    if fn.decorator_list:
        raise PatchError(
            f"{filename}:{first_line}: {where} is not a plain method; cannot derive a patch"
        )
    return method, tree, gate, filename, first_line


def _init_ast(cls: type) -> ast.FunctionDef | None:
    try:
        init = next(vars(c)["__init__"] for c in cls.__mro__ if "__init__" in vars(c))
        fn = ast.parse(textwrap.dedent(inspect.getsource(init))).body[0]
    except (OSError, TypeError, SyntaxError):
        return None
    return fn if isinstance(fn, ast.FunctionDef) else None


def _helper_branches(cls: type) -> dict[str, set[str]]:
    """What each plain method of `cls` (and its runtime bases) computes: a path that returns
    `self._few_rows(...)` takes the branch `_few_rows` holds."""
    out: dict[str, set[str]] = {}
    for c in cls.__mro__:
        if c.__module__.startswith(("mlx.", "builtins")):
            continue
        for name, value in vars(c).items():
            if name in out or not isinstance(value, types.FunctionType):
                continue
            try:
                fn = ast.parse(textwrap.dedent(inspect.getsource(value))).body[0]
            except (OSError, TypeError, SyntaxError):
                continue
            if isinstance(fn, ast.FunctionDef):
                out[name] = method_branches(fn)
    return out


def gate_forms(cls: type) -> dict[str, GateForm]:
    """Method name -> the form of its MLA gate, as the installed source writes it."""
    found = {}
    for name in _gated_method_names(cls):
        got = _method_gate(cls, name)
        if got is not None:
            found[name] = got[2].form
    return found


def _gated_method_names(cls: type) -> list[str]:
    """`__call__`, then every other plain method the class defines itself (mlx-vlm's glm5_next
    attends in `_attend`)."""
    own = [n for n, v in vars(cls).items() if isinstance(v, types.FunctionType) and n != "__call__"]
    return ["__call__", *own]


def _rewrite(cls: type, name: str) -> tuple[types.FunctionType, GateForm] | None:
    """`cls.<name>` from the installed source with its MLA gate made a decision of
    `self._mlatui_gate(L, latent, mask, <the installed condition>)`. Everything else is the
    installed code, unchanged; the installed arm's policy returns the installed condition."""
    got = _method_gate(cls, name)
    if got is None:
        return None
    original, tree, gate, filename, first_line = got
    where = f"{cls.__module__}.{cls.__qualname__}.{name}"
    fn = tree.body[0]
    assert isinstance(fn, ast.FunctionDef)
    latent = latent_name(gate)
    if latent is None:
        raise PatchError(
            f"{filename}:{first_line + gate.line - 1}: {where}: MLA gate found but its latent "
            "variable (the argument of embed_q(..., transpose=False)) is not recognised"
        )
    params = {a.arg for a in fn.args.args}
    mask_target = "mask" if "mask" in params else "_mlatui_unused_mask"
    mask_arg = "mask" if "mask" in params else "None"
    flag = gate.flag_assign.targets[0].id if gate.flag_assign is not None else ABSORBED_FLAG  # type: ignore[attr-defined]
    decide = ast.parse(
        f"{flag}, {mask_target} = self._mlatui_gate({gate.length_name}, {latent}, {mask_arg}, _mlatui_installed)"
    ).body[0]
    # the installed condition is evaluated only for the installed policy: the other policies
    # decide on their own, and this runs inside every timed step
    wanted = ast.Attribute(ast.Name("self", ast.Load()), INSTALLED_WANTED, ast.Load())
    installed = ast.IfExp(wanted, copy.deepcopy(gate.decision), ast.Constant(False))
    for n in ast.walk(decide):
        if isinstance(n, ast.Call):
            n.args[-1] = installed
    if gate.flag_assign is not None:
        parent, index = _parent_of(fn, gate.flag_assign)
        parent[index] = decide
    else:
        for site in gate.sites:
            site.test = ast.Name(id=ABSORBED_FLAG, ctx=ast.Load())
        first = min(gate.sites, key=lambda s: (s.lineno, s.col_offset))
        parent, index = _parent_of(fn, first)
        parent.insert(index, decide)
    _decide_paths(gate, latent)
    ast.fix_missing_locations(tree)
    ast.increment_lineno(tree, first_line - 1)
    code = compile(tree, filename, "exec")
    fcode = next(
        c for c in code.co_consts if isinstance(c, types.CodeType) and c.co_name == fn.name
    )
    if fcode.co_freevars:
        raise PatchError(f"{where} uses closures (e.g. super()); cannot derive a patch")
    module = sys.modules[original.__module__]
    patched = types.FunctionType(fcode, module.__dict__, name, original.__defaults__)
    patched.__kwdefaults__ = original.__kwdefaults__
    patched.__qualname__ = f"{cls.__qualname__}.{name}"
    return patched, gate.form


def _wants_call(length: str, latent: str, installed: ast.expr) -> ast.expr:
    call = ast.parse(f"self._mlatui_wants({length}, {latent}, None)", mode="eval").body
    assert isinstance(call, ast.Call)
    wanted = ast.Attribute(ast.Name("self", ast.Load()), INSTALLED_WANTED, ast.Load())
    call.args[-1] = ast.IfExp(wanted, installed, ast.Constant(False))
    return call


def _decide_paths(gate: MlaGate, latent: str) -> None:
    """The method's other width paths follow the arm's decision too: each width bound in their
    conditions (`L <= 8`, `L > 16`; not `L == 1` or `L > 1`, which tell decode from the rest)
    becomes the policy's answer for this call, and a path that returns before the gate counts
    the call where it returns. The installed policy answers with the bound as written."""
    gate_line = gate.flag_assign.lineno if gate.flag_assign is not None else gate.line
    replaced: dict[int, ast.expr] = {}
    for path in gate.paths:
        for test in path.width:
            if test.decode_only or id(test.node) in replaced:
                continue
            if test.absorbs_below:
                new: ast.expr = _wants_call(test.length_name, latent, copy.deepcopy(test.node))
            else:
                absorbing = ast.UnaryOp(ast.Not(), copy.deepcopy(test.node))
                new = ast.UnaryOp(ast.Not(), _wants_call(test.length_name, latent, absorbing))
            replaced[id(test.node)] = ast.copy_location(new, test.node)
    counted: set[int] = set()  # a return inside two paths (one nested in the other) counts once
    for path in gate.paths:
        if path.line < gate_line:
            _count_returns(path, gate.length_name, counted)
    for path in gate.paths:
        _substitute(path.flag_assign if path.flag_assign is not None else path.node, replaced)


def _substitute(holder: ast.AST, replaced: dict[int, ast.expr]) -> None:
    """Put the replacements in place inside `holder` (of an `if`, only its condition: the
    branches are other paths')."""
    if isinstance(holder, ast.If):
        holder.test = replaced.get(id(holder.test), holder.test)
        holder = holder.test
    for parent in ast.walk(holder):
        for name, value in ast.iter_fields(parent):
            if isinstance(value, ast.expr) and id(value) in replaced:
                setattr(parent, name, replaced[id(value)])
            elif isinstance(value, list):
                value[:] = [replaced.get(id(v), v) for v in value]


def _count_returns(path: WidthPath, length: str, counted: set[int]) -> None:
    """Before each `return` of a path, count the call on the branch the path took there: the
    last embed_q before it tells (on the queries: absorbed; over the latent: materialised)."""
    calls = sorted(
        (n.lineno, n.col_offset, any(k.arg == "transpose" for k in n.keywords))
        for stmt in path.body
        for n in ast.walk(stmt)
        if isinstance(n, ast.Call)
        and isinstance(n.func, ast.Attribute)
        and n.func.attr == "embed_q"
    )
    for block in _blocks(path.body):
        for index in reversed(range(len(block))):
            ret = block[index]
            if not isinstance(ret, ast.Return) or id(ret) in counted:
                continue
            counted.add(id(ret))
            before = [c for c in calls if (c[0], c[1]) < (ret.lineno, ret.col_offset)]
            absorbed = not before[-1][2] if before else path.branch is Branch.ABSORBED
            count = ast.parse(f"self._mlatui_count({length}, {absorbed})").body[0]
            block.insert(index, ast.copy_location(count, ret))


def _blocks(body: list[ast.stmt]) -> list[list[ast.stmt]]:
    """`body` and every statement list nested in it, not entering nested functions."""
    out = [body]
    for stmt in body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        for name in ("body", "orelse", "finalbody"):
            inner = getattr(stmt, name, None)
            if isinstance(inner, list) and inner and isinstance(inner[0], ast.stmt):
                out += _blocks(inner)
        for handler in getattr(stmt, "handlers", []):
            out += _blocks(handler.body)
    return out


def _parent_of(root: ast.AST, target: ast.stmt) -> tuple[list[ast.stmt], int]:
    for node in ast.walk(root):
        for name in ("body", "orelse", "finalbody"):
            stmts = getattr(node, name, None)
            if isinstance(stmts, list) and target in stmts:
                return stmts, stmts.index(target)
    raise PatchError("internal: gate statement has no parent block")


def _gate(self: nn.Module, length: int, latent: Any, mask: Any, installed: Any) -> tuple[bool, Any]:
    state: _GateState = self.__dict__["_mlatui_gate_state"]
    arr = latent[0] if isinstance(latent, tuple) else latent
    cache_len = arr.shape[-2]
    absorbed = state.policy.decide(state.geometry, length, cache_len, bool(installed))
    state.counters.record(length, absorbed)
    if absorbed and isinstance(mask, str):
        # mistral4 passes the string "causal" at L > 1; the absorbed branch needs an array.
        from mlx_lm.models.base import create_causal_mask

        mask = create_causal_mask(length, cache_len - length)
    return absorbed, mask


def _wants(self: nn.Module, length: int, latent: Any, installed: Any) -> bool:
    """The arm's decision for a width path's bound; counted where the call leaves the method."""
    state: _GateState = self.__dict__["_mlatui_gate_state"]
    arr = latent[0] if isinstance(latent, tuple) else latent
    return state.policy.decide(state.geometry, length, arr.shape[-2], bool(installed))


def _count(self: nn.Module, length: int, absorbed: bool) -> None:
    self.__dict__["_mlatui_gate_state"].counters.record(length, absorbed)


_patched_classes: dict[type, type] = {}
_lock = threading.Lock()


def gated_class(cls: type) -> type:
    """A subclass of `cls` whose gated methods are the installed ones with a decided gate
    (cached per class)."""
    with _lock:
        if cls not in _patched_classes:
            methods: dict[str, Any] = {}
            forms: dict[str, GateForm] = {}
            for name in _gated_method_names(cls):
                got = _rewrite(cls, name)
                if got is not None:
                    methods[name], forms[name] = got
            if not methods:
                where = f"{cls.__module__}.{cls.__qualname__}"
                code = getattr(vars(cls).get("__call__"), "__code__", None)
                at = f"{code.co_filename}:{code.co_firstlineno}: " if code is not None else ""
                raise PatchError(
                    f"{at}{where}: no MLA gate (an `if` on the query count around embed_q/"
                    "unembed_out: `L == 1`, `L <= self.<threshold>` or `L <= max_absorbed_queries(...)`) "
                    "was found; mlatui cannot gate this runtime's attention"
                )
            _patched_classes[cls] = type(
                cls.__name__,
                (cls,),
                {
                    **methods,
                    "_mlatui_gate": _gate,
                    "_mlatui_wants": _wants,
                    "_mlatui_count": _count,
                    "__module__": cls.__module__,
                    "__qualname__": cls.__qualname__,
                    "_mlatui_stock_class": cls,
                    "_mlatui_gate_forms": forms,
                },
            )
        return _patched_classes[cls]


_compiled_classes: dict[type, type] = {}


def compiled_class(stock: type) -> type:
    """The gated class of `stock` whose absorbed calls of two or more queries run mlatui's
    compiled attention: the arm's policy decides as in every gated call and the branch is
    counted; a materialised call, and every L = 1 call, runs the gated runtime code (so the L = 1
    check still compares identical code in both arms). Fails closed where the class is not of
    the form it supports."""
    with _lock:
        if stock in _compiled_classes:
            return _compiled_classes[stock]
    why = unsupported(stock)
    if why is not None:
        code = getattr(vars(stock).get("__call__"), "__code__", None)
        at = f"{code.co_filename}:{code.co_firstlineno}: " if code is not None else ""
        raise PatchError(
            f"{at}the compiled arm runs DeepSeek-V3-form MLA attention only: {why}; "
            "use the formula gate for this model"
        )
    gated = gated_class(stock)

    def __call__(self: nn.Module, x: Any, mask: Any = None, cache: Any = None) -> Any:
        state: _GateState = self.__dict__["_mlatui_gate_state"]
        length = x.shape[1]
        cache_len = (cache.offset if cache is not None else 0) + length
        if length == 1 or not state.policy.decide(state.geometry, length, cache_len, False):
            return gated.__call__(self, x, mask, cache)
        state.counters.record(length, True)
        if isinstance(mask, str):
            from mlx_lm.models.base import create_causal_mask

            mask = create_causal_mask(length, cache_len - length)
        return compiled_for(self)(x, mask, cache)

    __call__.__qualname__ = f"{stock.__qualname__}.__call__"
    with _lock:
        return _compiled_classes.setdefault(
            stock,
            type(
                stock.__name__,
                (gated,),
                {
                    "__call__": __call__,
                    "__module__": stock.__module__,
                    "__qualname__": stock.__qualname__,
                },
            ),
        )


def installed_form(cls: type) -> GateForm:
    """How the installed source of `cls` gates its MLA branch (fixed if any method is)."""
    forms = gated_class(getattr(cls, "_mlatui_stock_class", cls))._mlatui_gate_forms  # type: ignore[attr-defined]
    return next((f for f in forms.values() if f.fixed), GateForm.PRE_FIX)


def is_mla_attention(module: nn.Module) -> bool:
    """A runtime's MLA attention (mlx-lm's, mlx-vlm's, a source tree's); mlatui's own sparse
    layers gate themselves (run/arms.py sparse_layers)."""
    return (
        not type(module).__module__.startswith("mlatui.")
        and all(isinstance(module.get(m), nn.Module) for m in GATE_MARKERS)
        and all(hasattr(module, a) for a in ("kv_lora_rank", "qk_nope_head_dim", "v_head_dim"))
    )


def mla_modules(model: nn.Module) -> list[tuple[str, nn.Module]]:
    return [(name, m) for name, m in model.named_modules() if is_mla_attention(m)]


@dataclass
class PatchReport:
    policy: str
    modules: list[str]
    classes: list[str]
    geometry: Geometry
    threshold: int
    counters: BranchCounters
    indexer: str | None = None  # sparse layers' pooling: patched | stock (None: no sparse layer)
    forms: dict[str, str] = field(default_factory=dict)  # class -> its installed gate's form

    @property
    def installed_fixed(self) -> bool:
        """The installed code already gates on a threshold (the fix is upstream)."""
        return any(GateForm(f).fixed for f in self.forms.values())

    def summary(self) -> str:
        g = self.geometry
        indexer = f" indexer={self.indexer}" if self.indexer else ""
        forms = sorted(set(self.forms.values()))
        installed = f" installed gate: {', '.join(forms)}" if forms else ""
        return (
            f"{len(self.modules)} MLA modules ({', '.join(self.classes)}) gate={self.policy}{indexer} "
            f"r/n/v={g.kv_lora_rank}/{g.qk_nope_head_dim}/{g.v_head_dim} "
            + (
                "always absorbed (d >= 2r)"
                if self.threshold == UNBOUNDED
                else f"max_absorbed_queries(T->inf)={self.threshold}"
            )
            + installed
        )


def patch_model(
    model: nn.Module, threshold: Threshold | GatePolicy | str | int = "formula"
) -> PatchReport:
    """Gate this instance's MLA attention on the threshold policy. Other instances and mlx-lm's
    classes stay stock."""
    policy = as_policy(threshold)
    found = mla_modules(model)
    if not found:
        raise PatchError(
            f"{type(model).__module__}: no MLA attention with an absorbed path was found in this model"
        )
    counters = BranchCounters()
    classes: list[str] = []
    forms: dict[str, str] = {}
    for _, attn in found:
        stock_cls = getattr(type(attn), "_mlatui_stock_class", type(attn))
        cls = compiled_class(stock_cls) if policy.compiled else gated_class(stock_cls)
        geometry = geometry_of(attn)
        policy.bind(geometry)
        attn.__class__ = cls
        attn.__dict__["_mlatui_gate_state"] = _GateState(geometry, policy, counters)
        attn.__dict__[INSTALLED_WANTED] = isinstance(policy, InstalledPolicy)
        if stock_cls.__name__ not in classes:
            classes.append(stock_cls.__name__)
            forms[stock_cls.__name__] = installed_form(stock_cls).value
    geometry = geometry_of(found[0][1])
    return PatchReport(
        policy.name_for(geometry),
        [n for n, _ in found],
        classes,
        geometry,
        policy.limit(geometry, None),
        counters,
        forms=forms,
    )


def model_gate_forms(model: nn.Module) -> dict[str, GateForm]:
    """Class -> installed gate form of every MLA attention class in `model` (nothing patched)."""
    out: dict[str, GateForm] = {}
    for _, attn in mla_modules(model):
        cls = getattr(type(attn), "_mlatui_stock_class", type(attn))
        out.setdefault(cls.__name__, installed_form(cls))
    return out


def branch_counters(model: nn.Module) -> BranchCounters | None:
    for _, m in mla_modules(model):
        state = m.__dict__.get("_mlatui_gate_state")
        if state is not None:
            counters: BranchCounters = state.counters
            return counters
    return None


M = TypeVar("M", bound=nn.Module)


def twin(model: M) -> M:
    """A structurally separate copy of `model` that shares every array (no weight is copied)."""

    def clone(obj: Any) -> Any:
        if isinstance(obj, nn.Module):
            new = obj.__class__.__new__(obj.__class__)
            for k, v in obj.__dict__.items():
                new.__dict__[k] = v.copy() if isinstance(v, (set, Counter)) else v
            new.__dict__.pop("_mlatui_gate_state", None)
            new.__dict__.pop(INSTALLED_WANTED, None)
            new.__dict__.pop(COMPILED_KEY, None)
            for k, v in obj.items():
                dict.__setitem__(new, k, clone(v))
            stock = getattr(type(obj), "_mlatui_stock_class", None)
            if stock is not None:
                new.__class__ = stock
            return new
        if isinstance(obj, list):
            return [clone(v) for v in obj]
        if isinstance(obj, tuple):
            return tuple(clone(v) for v in obj)
        if isinstance(obj, dict):
            return {k: clone(v) for k, v in obj.items()}
        return obj

    copy: M = clone(model)
    return copy


# ---- the compiled arm: mlatui's own absorbed attention -------------------------------------------

COMPILED_KEY = "_mlatui_compiled"  # where a module keeps its compiled pieces

NEEDED = ("kv_a_proj_with_mqa", "kv_a_layernorm", "embed_q", "unembed_out", "o_proj")


def unsupported(cls: type) -> str | None:
    """Why `cls` (a runtime's MLA attention class) has no compiled absorbed path (None: it has)."""
    where = f"{cls.__module__}.{cls.__qualname__}"
    params = list(inspect.signature(cls.__call__).parameters)
    if params[:4] != ["self", "x", "mask", "cache"]:
        return f"{where}.__call__{tuple(params[1:])} is not (x, mask, cache)"
    init = next(vars(c)["__init__"] for c in cls.__mro__ if "__init__" in vars(c))
    source = inspect.getsource(init)
    missing = [n for n in NEEDED if f"self.{n} =" not in source]
    if missing:
        return f"{where} has no {', '.join(missing)}"
    if "self.indexer =" in source:
        return f"{where} is a sparse (indexer) layer"
    return None


class CompiledAbsorbed:
    """One attention module's compiled pieces (they read its weights as constants)."""

    def __init__(self, attn: nn.Module):
        self.attn = attn
        self.heads = int(getattr(attn, "num_heads", 0) or attn.num_attention_heads)
        self.nope, self.rope_dim = int(attn.qk_nope_head_dim), int(attn.qk_rope_head_dim)
        self.rank = int(attn.kv_lora_rank)
        self.project = mx.compile(self._project)
        self.attend: dict[tuple[int, bool], Callable[..., mx.array]] = {}

    def _project(self, x: mx.array, offset: mx.array) -> tuple[mx.array, ...]:
        a = self.attn
        B, L, _ = x.shape
        if getattr(a, "q_lora_rank", None) is None:
            q = a.q_proj(x)
        else:
            q = a.q_b_proj(a.q_a_layernorm(a.q_a_proj(x)))
        # (B, L, H * (nope + rope)) -> (B, H, L, nope + rope)
        q = q.reshape(B, L, self.heads, self.nope + self.rope_dim).transpose(0, 2, 1, 3)
        q_scale = getattr(a, "mla_scale_q_lora", None)
        if q_scale is not None:
            q = q * q_scale
        q_nope, q_pe = mx.split(q, [self.nope], axis=-1)
        compressed, k_pe = mx.split(a.kv_a_proj_with_mqa(x), [self.rank], axis=-1)
        k_pe = k_pe.reshape(B, L, 1, self.rope_dim).transpose(0, 2, 1, 3)  # (B, 1, L, rope)
        latent = a.kv_a_layernorm(compressed)
        kv_scale = getattr(a, "mla_scale_kv_lora", None)
        if kv_scale is not None:
            latent = latent * kv_scale
        rope = getattr(a, "rope", None)
        if rope is not None:
            q_pe, k_pe = rope(q_pe, offset), rope(k_pe, offset)
        latent = mx.expand_dims(latent, axis=1)  # (B, 1, L, r)
        return a.embed_q(q_nope), q_pe, latent, k_pe  # absorbed query: (B, H, L, r)

    def _attend(
        self, q_latent: mx.array, q_pe: mx.array, latent: mx.array, k_pe: mx.array, *mask: mx.array
    ) -> mx.array:
        a = self.attn
        B, _, L, _ = q_latent.shape
        scores = (q_pe * a.scale) @ k_pe.swapaxes(-1, -2)  # (B, H, L, T)
        if mask:
            scores = mx.where(mask[0], scores, mx.array(mx.finfo(scores.dtype).min, scores.dtype))
        scores = (q_latent * a.scale) @ latent.swapaxes(-1, -2) + scores
        weights = mx.softmax(scores, axis=-1, precise=True)
        out = a.unembed_out(weights @ latent)  # (B, H, L, r) -> (B, H, L, v)
        projected: mx.array = a.o_proj(out.transpose(0, 2, 1, 3).reshape(B, L, -1))  # (B, L, H * v)
        return projected

    def __call__(self, x: mx.array, mask: mx.array | None, cache: Any) -> mx.array:
        offset = cache.offset if cache is not None else 0
        q_latent, q_pe, latent, k_pe = self.project(x, mx.array(offset, dtype=mx.int32))
        if cache is not None:
            latent, k_pe = cache.update_and_fetch(latent, k_pe)
        key = (x.shape[1], mask is not None)
        if key not in self.attend:
            self.attend[key] = mx.compile(self._attend, shapeless=True)
        extra = (mask,) if mask is not None else ()
        return self.attend[key](q_latent, q_pe, latent, k_pe, *extra)


def compiled_for(attn: nn.Module) -> CompiledAbsorbed:
    """The module's compiled pieces, built on first use (per instance: twins build their own)."""
    found = attn.__dict__.get(COMPILED_KEY)
    if found is None:
        found = attn.__dict__[COMPILED_KEY] = CompiledAbsorbed(attn)
    return found
