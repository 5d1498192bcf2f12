"""Arms: the stock and the patched model, each on its own worker thread.

MLX streams are per thread, so an arm does all its MLX work (caches, forwards) on its worker
and hands back plain numbers. A baton makes the arms take turns: they never compute at the
same time, whoever calls them.

Which gate each arm slot runs, chosen from the runtime's own state: the installed code is
read first (pre-fix or already fixed), then the arms are the user's choice or the default that
still shows what the fix buys.

An arm may run model code from another source tree (`--arm-source B=PATH`): the tree's model
classes (mlatui.models.tree_model) on the loaded model's very arrays, with its gate as the tree's
own code writes it (the `installed` policy): counted where the gate patch recognises the tree's
gate form, uninstrumented otherwise (a patch under review may change the gate beyond
recognition; it still runs, and the header says it is not counted). The prefill runs once per
context on the installed code's model; a source arm re-makes its copy in its own code's cache
classes (same arrays, `adopt_cache`), so both arms start from bit-identical caches while each
runs its own cache code.
"""

from __future__ import annotations

import contextlib
import copy
import os
import sys
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from enum import StrEnum
from queue import SimpleQueue
from typing import TYPE_CHECKING, Any, TypeVar

import mlx.core as mx
import mlx.nn as nn
import msgspec

from mlatui.config.arm_settings import Threshold, parse_arms
from mlatui.errors import UserError
from mlatui.gate import mla
from mlatui.gate.forms import GateForm
from mlatui.gate.policy import DEFAULT_GATES, Gates, Geometry, Variant, arm_words, default_arms
from mlatui.host.distributed import beat, local_rank
from mlatui.host.memory import sync_streams
from mlatui.models import tree_model
from mlatui.models.mx_typed import held_arrays
from mlatui.models.source_tree import tree_of
from mlatui.models.tree_model import make_cache
from mlatui.stream.events import ARMS
from mlatui.stream.run_settings import ArmSlot, ArmSource

if TYPE_CHECKING:
    from mlatui.stream.sources import DrawTurns

T = TypeVar("T")


def arm_cpus() -> set[int] | None:
    """The CPUs every arm thread runs on: one CPU by default (the last one this process may
    use); MLATUI_ARM_CPUS="off" disables pinning, "3" or "2,3" picks. None where there is no
    affinity API (macOS) or pinning is off."""
    if sys.platform != "linux":
        return None
    setting = os.environ.get("MLATUI_ARM_CPUS", "").strip().lower()
    if not hasattr(os, "sched_setaffinity") or setting in ("off", "none", "all"):
        return None
    allowed = os.sched_getaffinity(0)
    if setting:
        try:
            cpus = {int(c) for c in setting.split(",")}
        except ValueError:
            raise ValueError(
                f'MLATUI_ARM_CPUS={setting!r}: give CPU numbers like "3" or "2,3", or "off"'
            ) from None
        if not cpus <= allowed:
            raise ValueError(
                f"MLATUI_ARM_CPUS={setting!r}: this process may only use CPUs {sorted(allowed)}"
            )
        return cpus
    # ranks sharing a machine (mlx.launch -n 2 on one box) each take their own CPU
    ordered = sorted(allowed)
    return {ordered[-1 - local_rank() % len(ordered)]}


@contextlib.contextmanager
def unpinned():
    """Every thread of the process on every CPU the process may use, then each back to its own
    affinity. Decode blocks run like this: mlx-lm's loop builds the next step's graph on the
    Python thread while MLX's stream thread computes the current one, and pinned to one CPU (as
    arm threads are for the synced steps) the two cannot overlap: the tiny model decoded at
    0.80x a direct mlx-lm call pinned, 0.91-1.02x unpinned, on the 2-core CPU."""
    if sys.platform != "linux" or arm_cpus() is None:
        yield
        return
    allowed = os.sched_getaffinity(os.getpid())
    saved: dict[int, set[int]] = {}
    try:
        threads = [int(t) for t in os.listdir("/proc/self/task")]
    except OSError:  # no /proc (a container without it): the calling thread only
        threads = [threading.get_native_id()]
    for tid in threads:
        try:
            saved[tid] = os.sched_getaffinity(tid)
            os.sched_setaffinity(tid, allowed)
        except OSError:  # the thread ended meanwhile
            pass
    try:
        yield
    finally:
        for tid, cpus in saved.items():
            try:
                os.sched_setaffinity(tid, cpus)
            except OSError:
                pass


class Baton:
    """The lock the arms take turns with, the CPUs every arm sharing it is pinned to, and the
    turns an in-process dashboard draws in between their calls (None: nothing draws here)."""

    def __init__(self, turns: DrawTurns | None = None) -> None:
        self.lock = threading.Lock()
        self.cpus = arm_cpus()
        self.turns = turns

    def turn(self) -> contextlib.AbstractContextManager:
        """Entered around each arm call before the lock: waits while a draw has its turn."""
        return contextlib.nullcontext() if self.turns is None else self.turns.arm_call()


@dataclass(frozen=True)
class TargetHidden:
    """The target's hidden states over a prefilled context, for a draft that reads them (MTP);
    evaluated, so they may cross to another arm's thread."""

    context: mx.array  # (1, T, D): every context position
    last: mx.array  # (1, 1, D): the last one


@dataclass
class Arm:
    name: str  # the slot: "stock" or "patched" (in an A/A run both slots run one variant)
    model: nn.Module
    report: mla.PatchReport
    cache: list[Any] | None = None
    draft: Any = None  # the first draft kind's source (the prefill arm: one that reads hidden)
    drafts: dict[str, Any] = field(default_factory=dict)  # draft kind -> source, every kind
    variant: Variant | None = None  # None: the prefill arm (stock model, uninstrumented)
    gates: Gates | None = None
    model_name: str = "model"  # what errors about this arm's model call it
    hidden: TargetHidden | None = None  # set by a prefill whose draft needs hidden states
    source: str = ""  # a source-tree arm: the tree's package folder ("": the loaded model's code)
    counted: bool = True  # False: a source arm whose gate mlatui does not recognise runs as is

    def __setattr__(self, name: str, value: Any) -> None:
        # a source arm's caches are its own code's: a cache handed to it (a copy of the shared
        # prefill, made by the installed code) is re-made in its classes, holding the same arrays
        if name == "cache" and value is not None and self.__dict__.get("source"):
            value = adopt_cache(self.model, value)
        super().__setattr__(name, value)

    @property
    def counters(self) -> mla.BranchCounters:
        return self.report.counters

    def draft_of(self, kind: str) -> Any:
        """The draft source of `kind` ("": the arm's single `draft`)."""
        return self.drafts.get(kind, self.draft) if kind else self.draft

    @property
    def caches(self) -> list[Any]:
        """The prompt cache, which a prefill made (every step after one reads it)."""
        if self.cache is None:
            raise RuntimeError(f"the {self.name} arm has no cache yet: prefill it first")
        return self.cache


class ArmWorker:
    """One long-lived thread per arm; `call(fn)` runs fn(arm) there while holding the baton.
    With `host`, the arm has no thread of its own and runs on the host's (a diagnostic: both
    arms on one thread and one MLX stream, to tell thread effects from the gate's)."""

    def __init__(self, arm: Arm, baton: Baton, host: ArmWorker | None = None):
        self.arm = arm
        self.baton = baton
        self.host = host
        if host is not None:
            return
        self._queue: SimpleQueue = SimpleQueue()
        self._thread = threading.Thread(
            target=self._loop, name=f"mlatui-arm-{arm.name}", daemon=True
        )
        self._thread.start()

    def _loop(self) -> None:
        # Pin before the first MLX call: this thread's stream (and its executor thread, which
        # MLX creates lazily from here and which inherits the affinity) then runs on the same
        # CPU for both arms. Unpinned, the kernel placed each arm's Python thread and executor
        # thread anew (same or different CPUs, beside or away from other load), which on a
        # 2-vCPU VM made one arm 5-15% slower than the other for a whole trial (L = 1 check
        # passed 1 in 10 vs 9 in 12 pinned) and cost ~1 ms per step in cross-CPU wake-ups.
        if sys.platform == "linux" and self.baton.cpus:
            try:
                os.sched_setaffinity(0, self.baton.cpus)
            except OSError:  # e.g. the CPU went offline: run unpinned rather than hang callers
                pass
        while True:
            item = self._queue.get()
            if item is None:
                sync_streams()  # see close()
                return
            fn, future, arm = item
            if not future.set_running_or_notify_cancel():
                continue
            try:
                with self.baton.turn(), self.baton.lock:
                    result = fn(arm)
            except BaseException as e:  # noqa: BLE001 - handed to the caller
                future.set_exception(e)
            else:
                future.set_result(result)

    def call(self, fn: Callable[[Arm], T]) -> T:
        future: Future = Future()
        (self.host or self)._queue.put((fn, future, self.arm))
        return future.result()

    def close(self) -> None:
        """Its thread's last work syncs every stream it used (they are per thread), so nothing
        runs on them once it ended: the wired limit is left after (host.memory)."""
        if self.host is None:
            self._queue.put(None)
            self._thread.join(timeout=30)

    @property
    def alive(self) -> bool:
        return (self.host or self)._thread.is_alive()


def build_arms(
    model: nn.Module,
    gates: Gates = DEFAULT_GATES,
    variants: tuple[Variant, Variant] = (Variant.STOCK, Variant.PATCHED),
    sources: Mapping[Variant, nn.Module] | None = None,
) -> tuple[Arm, Arm]:
    """Two arms, each a twin of `model` sharing every weight (no weight is copied), each gated
    as its variant says with the one `gates` (its policy object reaches every gated layer of
    both arms); `model` itself stays stock and uninstrumented (prefills run on it). Both slots
    are built the same way, so nothing but the variant differs between them. Parameters must
    already be evaluated. `sources`: a variant whose model comes from another source tree
    (below) runs a twin of that model instead, its gate its own code's."""
    arms = []
    for slot, variant in zip(ARMS, variants, strict=True):
        variant = Variant(variant)
        source = (sources or {}).get(variant)
        if source is None:
            twin = mla.twin(model)
            arms.append(
                Arm(slot, twin, gate_model(twin, variant, gates), variant=variant, gates=gates)
            )
            continue
        twin = mla.twin(source)
        report, counted = gate_source_model(twin, gates, variant)
        tree = tree_of(type(source).__module__)
        where = str(tree.root) if tree is not None else type(source).__module__
        arms.append(
            Arm(slot, twin, report, variant=variant, gates=gates, source=where, counted=counted)
        )
    return arms[0], arms[1]


def prefill(
    arm: Arm, tokens: list[int], chunk: int = 512, check_stop: Callable[[], None] = lambda: None
) -> int:
    """Fresh cache holding `tokens`; returns the cache length. A draft that needs the target's
    hidden states (MTP) gets them from the same forward. `check_stop` runs before every chunk
    and raises to stop: a prefill of a long context takes minutes, and a stop signal must not
    wait for all of it."""
    arm.cache = make_cache(arm.model)
    x = mx.array([tokens])  # (1, T)
    needs_hidden = arm.draft is not None and arm.draft.needs_hidden
    hidden = []
    for start in range(0, len(tokens), chunk):
        check_stop()
        if needs_hidden:
            _, h = arm.draft.target_forward(arm.model, x[:, start : start + chunk], arm.cache)
            mx.eval(h)
            hidden.append(h)
        else:
            arm.model(x[:, start : start + chunk], cache=arm.cache)
        # a sparse layer's index pool is not in its cache's `state`; left lazy here (when the
        # last layer is sparse nothing else evaluates it), another thread could not evaluate it
        pools = [getattr(getattr(c, "index", None), "pooled", None) for c in arm.cache]
        mx.eval([c.state for c in arm.cache], [p for p in pools if p is not None])
        beat("prefilling")  # a long prefill is progress, not a hung rank
    if needs_hidden:
        h = mx.concatenate(hidden, axis=1)  # (1, T, D)
        last = h[:, -1:]  # (1, 1, D)
        mx.eval(h, last)  # other threads use these: nothing lazy may cross (per-thread streams)
        arm.hidden = TargetHidden(h, last)
    return cache_len(arm.cache)


def fill_random_latents(arm: Arm, length: int, seed: int) -> int:
    """Timing-only fill: every layer's cache holds `length` random latents (unit-scale, like
    kv_a_layernorm's output) instead of a prefill, which at 32K-128K on a full-size model takes
    minutes. The branch costs do not depend on the values; outputs and acceptance mean nothing."""
    from mlatui.models.sparse_mla import SparseMLACache

    arm.cache = make_cache(arm.model)
    mx.random.seed(seed)
    layers = getattr(arm.model, "layers", None) or []
    if len(layers) != len(arm.cache):
        raise ValueError("random-latents fill: cannot pair this model's layers with its caches")
    for layer, cache in zip(layers, arm.cache, strict=True):
        attn = getattr(layer, "self_attn", None)
        if attn is None or not hasattr(attn, "kv_lora_rank"):
            raise ValueError(
                f'random-latents fill: layer {type(layer).__name__} is not MLA attention; use fill = "prefill"'
            )
        dtype = attn.kv_a_layernorm.weight.dtype
        r, rope = attn.kv_lora_rank, attn.qk_rope_head_dim
        latent = mx.random.normal((1, 1, length, r)).astype(dtype)  # (B, 1, T, r)
        pe = mx.random.normal((1, 1, length, rope)).astype(dtype)  # (B, 1, T, rope)
        if isinstance(cache, SparseMLACache):
            idx = attn.indexer
            keys = mx.random.normal((1, idx.n_heads, length, idx.head_dim)).astype(
                dtype
            )  # (B, H, T, D)
            gates = mx.random.normal((1, idx.n_heads, length)).astype(dtype)  # (B, H, T)
            cache.fill(latent, keys, gates, pe if rope else None)
        elif hasattr(cache, "update_and_fetch") and hasattr(cache, "offset"):
            cache.update_and_fetch(latent, pe)
        else:
            raise ValueError(
                f'random-latents fill: unsupported cache {type(cache).__name__}; use fill = "prefill"'
            )
        mx.eval(cache.state)
    return cache_len(arm.cache)


def copy_cache(cache: list[Any]) -> list[Any]:
    """A bit-identical, independent copy, evaluated on the calling thread (layer by layer, as
    `recopy_in_place` makes it)."""
    new = list(cache)
    recopy_in_place(new)
    return new


def recopy_in_place(cache: list[Any]) -> None:
    """Every layer's cache replaced by a fresh, bit-identical copy, one layer at a time (the
    transient is one layer's cache, never a second whole cache)."""
    for i, layer in enumerate(cache):
        new = copy.deepcopy(layer)
        mx.eval(new.state, held_arrays(new))
        cache[i] = new


class CacheRounds(StrEnum):
    """What the sampler does to the arms' caches between rounds (MLATUI_CACHE_ROUNDS)."""

    SWAP = "swap"  # the arms exchange caches: every buffer serves both arms equally often
    COPY = "copy"  # each arm gets fresh copies (a diagnostic)
    OFF = "off"  # one copy per arm per context (a diagnostic)


def cache_rounds() -> CacheRounds:
    """MLATUI_CACHE_ROUNDS (default swap). The swap is why: on the 2-core CPU an A/A's cells
    carried offsets of -8% to +4% whose 95% CIs excluded 1.00 (15% of cells with fresh copies,
    18% with one copy per context, 2% with the swap; docs/method.md). Fresh copies made in
    alternating order recycle the allocator's buffers so that each arm keeps a buffer of its own
    (stock {Z, X}, patched {X, Y}); exchanging the caches gives each buffer to both arms."""
    raw = os.environ.get("MLATUI_CACHE_ROUNDS", "swap").strip().lower()
    try:
        return CacheRounds(raw)
    except ValueError:
        raise ValueError(
            f"MLATUI_CACHE_ROUNDS={raw!r}: use swap (the default), copy or off"
        ) from None


def swap_caches(a: list[Any], b: list[Any]) -> None:
    """Exchange two cache lists' layers in place (each list stays the object its model is
    handed). Only for caches that hold the same tokens: the arms' caches between rounds."""
    if len(a) != len(b):
        raise ValueError("cannot swap caches of different models")
    if any(type(x) is not type(y) for x, y in zip(a, b, strict=True)):
        # arms running different code (a source-tree arm): the contents move, each layer object
        # keeps its own code's class
        for x, y in zip(a, b, strict=True):
            exchange_layer(x, y)
        return
    a[:], b[:] = b[:], a[:]


def evaluate_held(cache: list[Any]) -> None:
    """Evaluate everything the cache's layers hold, on the calling (owning) thread: nothing lazy
    may cross to another thread's stream."""
    mx.eval(held_arrays(cache))


def cache_len(cache: list[Any]) -> int:
    """Tokens held by a model's cache: the first layer cache that counts them (hybrid models put
    recurrent ArraysCaches, which do not, beside their KV caches)."""
    for c in cache:
        if hasattr(c, "offset"):
            return c.offset
        inner = getattr(c, "caches", None)
        if inner:
            try:
                return cache_len(list(inner))
            except ValueError:
                continue
    raise ValueError("cannot tell how many tokens this cache holds")


@dataclass(frozen=True)
class RuntimeGates:
    """How the runtime a model was built from gates its MLA attention, per class."""

    runtime: str  # "mlx-lm", "mlx-vlm", or the package a source tree was loaded as
    version: str
    forms: dict[str, GateForm] = field(default_factory=dict)

    @property
    def fixed(self) -> bool:
        return any(f.fixed for f in self.forms.values())

    def describe(self) -> str:
        if not self.forms:
            return (
                f"{self.runtime} {self.version}: no runtime MLA gate (mlatui's own sparse layers)"
            )
        said = ", ".join(f"{cls} {form.value}" for cls, form in sorted(self.forms.items()))
        return f"{self.runtime} {self.version}: {said}"


def runtime_gates(model: nn.Module) -> RuntimeGates:
    """The runtime the model's MLA classes come from (a mounted source tree says its own name
    and version) and the form of each class's installed gate."""
    from mlatui.models.source_tree import runtime_of

    modules = mla.mla_modules(model)
    module = type(modules[0][1]).__module__ if modules else "mlx_lm"
    runtime, version, _ = runtime_of(module)
    return RuntimeGates(runtime, version or "?", mla.model_gate_forms(model))


def resolve_gates(
    arms: str | None, threshold: str | None, indexer: str | None, runtime: RuntimeGates
) -> Gates:
    """The run's one Gates: `arms` ("A,B") wins; else the runtime's default pair, with the
    patched slot's gate taken from `threshold` where one was asked for."""
    if arms is not None:
        baseline, candidate = parse_arms(arms)
    else:
        chosen = Threshold.parse(threshold) if threshold is not None else None
        baseline, candidate = default_arms(runtime.fixed, chosen)
    return Gates.parse(candidate, indexer, baseline)


def arm_settings(gates: Gates, runtime: RuntimeGates) -> dict[str, ArmSlot]:
    """The header's `arms`: per slot, its gate as recorded and in words."""
    return {
        slot: ArmSlot(
            gate=str(threshold), label=arm_words(threshold, runtime.runtime, runtime.fixed)
        )
        for slot, threshold in zip(ARMS, (gates.baseline, gates.threshold), strict=True)
    }


def gate_model(model: nn.Module, variant: Variant, gates: Gates = DEFAULT_GATES) -> mla.PatchReport:
    """Instrument (stock) or patch (patched) every gated layer of `model` in place: the dense
    MLA layers and the sparse ones all get the same policy object, `gates.policy`."""
    chosen = gates.for_variant(variant)
    sparse = sparse_layers(model)
    for _, layer in sparse:
        layer.set_modes(chosen.policy, chosen.indexer)
    if mla.mla_modules(model):
        report = mla.patch_model(model, chosen.policy)
    elif sparse:
        geometry = sparse[0][1].geometry
        report = mla.PatchReport(
            chosen.policy.name_for(geometry),
            [],
            ["SparseMLAttention"],
            geometry,
            chosen.policy.limit(geometry),
            mla.BranchCounters(),
        )
    else:
        raise mla.PatchError(f"{type(model).__module__}: no MLA attention found in this model")
    for name, layer in sparse:
        layer.counters = report.counters  # per arm: twin() copied the source's reference
        if name not in report.modules:
            report.modules.append(name)
    if sparse:
        report.indexer = chosen.indexer.value
    return report


def sparse_layers(model: nn.Module) -> list[tuple[str, nn.Module]]:
    """mlatui's sparse MLA layers (mlatui.models.sparse_mla.SparseMLAttention)."""
    return [
        (n, m)
        for n, m in model.named_modules()
        if hasattr(m, "set_modes") and hasattr(m, "indexer")
    ]


SLOT_VARIANT = {"stock": Variant.STOCK, "patched": Variant.PATCHED}
NOT_COUNTED = "no counters (unrecognised code)"
PREFILL_SAID = (
    "once per context by the installed code's uninstrumented model; each arm copies it, a "
    "source-tree arm into its own code's cache classes (bit-identical contents)"
)


class SourceArmError(UserError, ValueError):
    """A bad --arm-source / [arms] source, or a tree that cannot share the weights (one line):
    the command line's bad input."""


@dataclass
class SourceModels:
    """The run's source-tree models by variant (the slot each serves), uninstrumented."""

    models: dict[Variant, nn.Module] = field(default_factory=dict)
    runtimes: dict[Variant, tree_model.TreeRuntime] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.models)


def build_sources(loaded: nn.Module, sources: Mapping[str, str]) -> SourceModels:
    """Mount each slot's tree and build its model on the loaded arrays; a tree that cannot share
    them is refused in one line naming the first differing parameter."""
    out = SourceModels()
    for slot, path in sources.items():
        variant = SLOT_VARIANT[slot]
        try:
            runtime = tree_model.open_tree(path)
            out.models[variant] = tree_model.model_from_tree(runtime, loaded)
        except (tree_model.TreeError, ImportError) as e:
            raise SourceArmError(f"arm source {slot}: {str(e).splitlines()[0]}") from None
        out.runtimes[variant] = runtime
    return out


def source_arms_text(arms: str | None, sources: Mapping[str, str]) -> str | None:
    """The `--arms` text with source slots: a source slot runs its own code (`installed`); the
    other slot keeps what was asked, else runs the installed code as it is."""
    if not sources:
        return arms
    from mlatui.config.arm_settings import parse_arms

    wanted = ["installed", "installed"]
    if arms is not None:
        chosen = [str(t) for t in parse_arms(arms)]
        for i, slot in enumerate(ARMS):
            if slot in sources and chosen[i] != "installed":
                raise SourceArmError(
                    f"arms {arms!r}: slot {slot} runs a source tree, whose gate is its own code; "
                    "give installed for that slot or leave the arms out"
                )
        wanted = chosen
    return ",".join(wanted)


def gate_source_model(
    model: nn.Module, gates: Gates, variant: Variant
) -> tuple[mla.PatchReport, bool]:
    """(report, counted): the tree's own gate, counted where the gate patch recognises it; else
    the model runs as the tree wrote it, uncounted."""
    try:
        return gate_model(model, variant, gates), True
    except mla.PatchError:
        geometry = next(
            (mla.geometry_of(m) for _, m in model.named_modules() if hasattr(m, "kv_lora_rank")),
            Geometry(0, 0, 0, 0),
        )
        return mla.PatchReport("installed", [], [], geometry, 1, mla.BranchCounters()), False


def adopt_cache(model: nn.Module, given: list[Any]) -> list[Any]:
    """`given` (a fresh copy of the shared prefill, made by other code) as caches of the
    model's own code: each layer a fresh object of the model's cache class holding the given
    layer's arrays (nothing is copied). Layers already of that class stay as they are."""
    own = tree_model.make_cache(model)
    if len(own) != len(given):
        raise SourceArmError(
            f"the source arm's code makes {len(own)} layer caches, the shared prefill has {len(given)}"
        )
    out = []
    for mine, theirs in zip(own, given, strict=True):
        if type(mine) is type(theirs):
            out.append(theirs)
            continue
        if type(mine).__name__ != type(theirs).__name__ or set(vars(mine)) - set(vars(theirs)):
            raise SourceArmError(
                f"the source arm's cache class {type(mine).__name__} cannot hold the shared "
                f"prefill's {type(theirs).__name__} (different attributes)"
            )
        mine.__dict__.update(vars(theirs))
        out.append(mine)
    return out


def exchange_layer(a: Any, b: Any) -> None:
    """Exchange two layer caches' contents in place, each object keeping its class (the arms'
    caches between rounds when the arms run different code)."""
    if set(vars(a)) != set(vars(b)):
        raise SourceArmError(
            f"cannot exchange caches of {type(a).__module__}.{type(a).__name__} and "
            f"{type(b).__module__}.{type(b).__name__}: set MLATUI_CACHE_ROUNDS=copy"
        )
    saved = dict(vars(a))
    vars(a).clear()
    vars(a).update(vars(b))
    vars(b).clear()
    vars(b).update(saved)


def source_form(model: nn.Module) -> str | None:
    """The tree's gate form in words ("fixed (threshold form)"), None when not recognised."""
    try:
        forms = sorted({f.value for f in mla.model_gate_forms(model).values()})
    except mla.PatchError:
        return None
    return ", ".join(forms) or None


def merge_source_settings(
    arms: dict[str, ArmSlot],
    sources: SourceModels,
    loaded: nn.Module,
) -> dict[str, ArmSlot]:
    """The header's `arms` with, per slot: the code it ran (`source`: provenance, for the
    installed slot too, so that a recording says what both arms ran), the words for a source
    slot, and `counters` where its gate is not counted."""
    out = dict(arms)
    for slot in ARMS:
        variant = SLOT_VARIANT[slot]
        runtime = sources.runtimes.get(variant)
        model = sources.models.get(variant, loaded)
        said = msgspec.structs.replace(
            out[slot], source=msgspec.convert(tree_model.provenance(model, runtime), ArmSource)
        )
        if runtime is not None:
            form = source_form(model)
            said = msgspec.structs.replace(
                said,
                label=source_words(runtime, form),
                counters=NOT_COUNTED if form is None else said.counters,
            )
        out[slot] = said
    return out


def source_words(runtime: tree_model.TreeRuntime, form: str | None) -> str:
    """What a source slot runs, in words (titles, headers, verdicts, exports)."""
    gate = f", {form}" if form else ", gate not recognised"
    return f"{runtime.runtime} {runtime.version} from {runtime.given} (its own code{gate})"
