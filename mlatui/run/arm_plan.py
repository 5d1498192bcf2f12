"""Which gate each arm slot runs, chosen from the runtime's own state: the installed code is
read first (pre-fix or already fixed), then the arms are the user's choice or the default that
still shows what the fix buys.

An arm may run model code from another source tree (`--arm-source B=PATH`): the tree's model
classes (mlatui.models.tree_model) on the loaded model's very arrays, with its gate as the tree's
own code writes it (the `installed` policy): counted where the gate patch recognises the tree's
gate form, uninstrumented otherwise (a patch under review may change the gate beyond
recognition; it still runs, and the header says it is not counted). The prefill runs once per
context on the installed code's model; a source arm re-makes its copy in its own code's cache
classes (same arrays, `adopt_cache`), so both arms start from bit-identical caches while each
runs its own cache code."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import mlx.nn as nn
import msgspec

from mlatui.config.arm_settings import Threshold, parse_arms
from mlatui.gate import mla
from mlatui.gate.forms import GateForm
from mlatui.gate.policy import DEFAULT_GATES, Gates, Geometry, Variant, arm_words, default_arms
from mlatui.models import tree_model
from mlatui.stream.events import ARMS
from mlatui.stream.run_settings import ArmSlot, ArmSource


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


class SourceArmError(ValueError):
    """A bad --arm-source / [arms] source, or a tree that cannot share the weights (one line)."""


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
