"""Which gate each arm slot runs, chosen from the runtime's own state: the installed code is
read first (pre-fix or already fixed), then the arms are the user's choice or the default that
still shows what the fix buys."""

from __future__ import annotations

from dataclasses import dataclass, field

import mlx.nn as nn

from mlatui.config.gate_settings import Threshold, parse_arms
from mlatui.gate import mla
from mlatui.gate.forms import GateForm
from mlatui.gate.policy import DEFAULT_GATES, Gates, Variant, arm_words, default_arms
from mlatui.stream.events import ARMS


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


def arm_settings(gates: Gates, runtime: RuntimeGates) -> dict[str, dict[str, str]]:
    """The header's `arms`: per slot, its gate as recorded and in words."""
    out = {}
    for slot, threshold in zip(ARMS, (gates.baseline, gates.threshold), strict=True):
        out[slot] = {
            "gate": str(threshold),
            "label": arm_words(threshold, runtime.runtime, runtime.fixed),
        }
    return out


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
