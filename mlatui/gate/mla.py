"""The MLA gate's patch: each attention instance's gate rewritten from mlx-lm, with counters.

MLA caches a rank-r latent per token. A step with L new queries can either *absorb* the
up-projection into the queries and attend against the latent (cost ~ L), or *materialise*
full K/V from every cached latent (cost ~ T). mlx-lm absorbs only when L == 1; the patch
re-derives each attention `__call__` from the installed source with that test replaced.
"""

from __future__ import annotations

import ast
import inspect
import sys
import textwrap
import threading
import types
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, TypeGuard, TypeVar

import mlx.nn as nn

from mlatui.config.gate_settings import Threshold
from mlatui.gate.policy import (  # noqa: F401 (the gate's names, as callers of the patch use them)
    STOCK_POLICY,
    UNBOUNDED,
    CalibratedPolicy,
    FixedPolicy,
    ForcedPolicy,
    FormulaPolicy,
    GatePolicy,
    Geometry,
    as_policy,
    max_absorbed_queries,
)

GATE_MARKERS = ("embed_q", "unembed_out")
ABSORBED_FLAG = "_mlatui_absorbed"


class PatchError(RuntimeError):
    """The installed mlx-lm does not look like what the patch was derived for."""


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


def _is_gate(node: ast.AST, length_name: str | None = None) -> TypeGuard[ast.If]:
    if not isinstance(node, ast.If):
        return False
    t = node.test
    ok = (
        isinstance(t, ast.Compare)
        and isinstance(t.left, ast.Name)
        and len(t.ops) == 1
        and isinstance(t.ops[0], ast.Eq)
        and isinstance(t.comparators[0], ast.Constant)
        and t.comparators[0].value == 1
        and (length_name is None or t.left.id == length_name)
    )
    if not ok:
        return False
    calls = {
        n.func.attr
        for n in ast.walk(node)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
    }
    return any(m in calls for m in GATE_MARKERS)


def _length_name(gate: ast.If) -> str | None:
    """L in `if L == 1:` (None where the test has another shape)."""
    t = gate.test
    return t.left.id if isinstance(t, ast.Compare) and isinstance(t.left, ast.Name) else None


def _latent_name(gate: ast.If) -> str | None:
    for n in ast.walk(gate):
        if (
            isinstance(n, ast.Call)
            and isinstance(n.func, ast.Attribute)
            and n.func.attr == "embed_q"
            and any(k.arg == "transpose" for k in n.keywords)
            and n.args
            and isinstance(n.args[0], ast.Name)
        ):
            return n.args[0].id
    return None


def _rewrite_call(cls: type) -> types.FunctionType:
    """`cls.__call__` from the installed source, with its `L == 1` MLA gates made a decision of
    `self._mlatui_gate(L, latent, mask)`. Everything else is the installed code, unchanged."""
    where = f"{cls.__module__}.{cls.__qualname__}"
    original = cls.__call__
    try:
        source = textwrap.dedent(inspect.getsource(original))
        filename = inspect.getsourcefile(original) or f"<{where}>"
        first_line = inspect.getsourcelines(original)[1]
    except (OSError, TypeError) as e:
        raise PatchError(f"cannot read the source of {where}: {e}") from e
    if "max_absorbed_queries" in source:
        raise PatchError(
            f"{where}: already fixed upstream (the installed mlx-lm computes its own threshold)"
        )
    tree = ast.parse(source)
    fn = tree.body[0]
    if not isinstance(fn, ast.FunctionDef) or fn.decorator_list:
        raise PatchError(
            f"{where}.__call__ is not a plain method; mlatui cannot derive a patch from it"
        )
    gates = [n for n in ast.walk(fn) if _is_gate(n)]
    if not gates:
        raise PatchError(
            f"{where}: the 'if L == 1:' absorbed/materialised MLA gate was not found in the installed "
            "mlx-lm; this mlx-lm version is not supported by mlatui's patch"
        )
    length_name = _length_name(gates[0])
    latent = _latent_name(gates[0])
    if latent is None or length_name is None or any(_length_name(g) != length_name for g in gates):
        raise PatchError(
            f"{where}: MLA gate found but its latent/length variables are not recognised"
        )
    for g in gates:
        g.test = ast.Name(id=ABSORBED_FLAG, ctx=ast.Load())
    params = {a.arg for a in fn.args.args}
    mask_target = "mask" if "mask" in params else "_mlatui_unused_mask"
    mask_arg = "mask" if "mask" in params else "None"
    decide = ast.parse(
        f"{ABSORBED_FLAG}, {mask_target} = self._mlatui_gate({length_name}, {latent}, {mask_arg})"
    ).body[0]
    parent, index = _parent_of(fn, gates[0])
    parent.insert(index, decide)
    ast.fix_missing_locations(tree)
    ast.increment_lineno(tree, first_line - 1)
    code = compile(tree, filename, "exec")
    fcode = next(
        c for c in code.co_consts if isinstance(c, types.CodeType) and c.co_name == fn.name
    )
    if fcode.co_freevars:
        raise PatchError(f"{where}.__call__ uses closures (e.g. super()); cannot derive a patch")
    module = sys.modules[cls.__module__]
    patched = types.FunctionType(fcode, module.__dict__, "__call__", original.__defaults__)
    patched.__kwdefaults__ = original.__kwdefaults__
    patched.__qualname__ = f"{cls.__qualname__}.__call__"
    return patched


def _parent_of(root: ast.AST, target: ast.stmt) -> tuple[list[ast.stmt], int]:
    for node in ast.walk(root):
        for name in ("body", "orelse", "finalbody"):
            stmts = getattr(node, name, None)
            if isinstance(stmts, list) and target in stmts:
                return stmts, stmts.index(target)
    raise PatchError("internal: gate statement has no parent block")


def _gate(self: nn.Module, length: int, latent: Any, mask: Any) -> tuple[bool, Any]:
    state: _GateState = self.__dict__["_mlatui_gate_state"]
    arr = latent[0] if isinstance(latent, tuple) else latent
    cache_len = arr.shape[-2]
    absorbed = state.policy.absorbed(state.geometry, length, cache_len)
    state.counters.record(length, absorbed)
    if absorbed and isinstance(mask, str):
        # mistral4 passes the string "causal" at L > 1; the absorbed branch needs an array.
        from mlx_lm.models.base import create_causal_mask

        mask = create_causal_mask(length, cache_len - length)
    return absorbed, mask


_patched_classes: dict[type, type] = {}
_lock = threading.Lock()


def gated_class(cls: type) -> type:
    """A subclass of `cls` whose `__call__` is the installed one with a decided gate (cached)."""
    with _lock:
        if cls not in _patched_classes:
            call = _rewrite_call(cls)
            _patched_classes[cls] = type(
                cls.__name__,
                (cls,),
                {
                    "__call__": call,
                    "_mlatui_gate": _gate,
                    "__module__": cls.__module__,
                    "__qualname__": cls.__qualname__,
                    "_mlatui_stock_class": cls,
                },
            )
        return _patched_classes[cls]


def is_mla_attention(module: nn.Module) -> bool:
    return (
        type(module).__module__.startswith("mlx_lm.models.")
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
    upstream_fixed: bool = False
    message: str = ""
    indexer: str | None = None  # sparse layers' pooling: patched | stock (None: no sparse layer)

    def summary(self) -> str:
        if self.upstream_fixed:
            return self.message
        g = self.geometry
        indexer = f" indexer={self.indexer}" if self.indexer else ""
        return (
            f"{len(self.modules)} MLA modules ({', '.join(self.classes)}) gate={self.policy}{indexer} "
            f"r/n/v={g.kv_lora_rank}/{g.qk_nope_head_dim}/{g.v_head_dim} "
            + (
                "always absorbed (d >= 2r)"
                if self.threshold == UNBOUNDED
                else f"max_absorbed_queries(T->inf)={self.threshold}"
            )
        )


def _install(model: nn.Module, policy: GatePolicy) -> PatchReport:
    found = mla_modules(model)
    if not found:
        raise PatchError(
            f"{type(model).__module__}: no MLA attention with an absorbed path was found in this model"
        )
    counters = BranchCounters()
    classes = []
    upstream = []
    for _, attn in found:
        stock_cls = getattr(type(attn), "_mlatui_stock_class", type(attn))
        try:
            cls = gated_class(stock_cls)
        except PatchError as e:
            if "already fixed upstream" in str(e):
                upstream.append(str(e))
                continue
            raise
        geometry = geometry_of(attn)
        policy.bind(geometry)
        attn.__class__ = cls
        attn.__dict__["_mlatui_gate_state"] = _GateState(geometry, policy, counters)
        if stock_cls.__name__ not in classes:
            classes.append(stock_cls.__name__)
    geometry = geometry_of(found[0][1])
    if upstream and not classes:
        return PatchReport("upstream", [], [], geometry, 1, counters, True, upstream[0])
    return PatchReport(
        policy.name_for(geometry),
        [n for n, _ in found],
        classes,
        geometry,
        policy.limit(geometry, None),
        counters,
    )


def patch_model(
    model: nn.Module, threshold: Threshold | GatePolicy | str | int = "formula"
) -> PatchReport:
    """Gate this instance's MLA attention on the threshold policy. Other instances and mlx-lm's
    classes stay stock."""
    return _install(model, as_policy(threshold))


def count_branches(model: nn.Module) -> PatchReport:
    """Instrument a stock model: the gate stays `L == 1` but calls are counted (same code path as the patch)."""
    return _install(model, STOCK_POLICY)


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
