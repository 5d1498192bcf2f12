"""Each arm's draft, built from what was loaded: a synthetic draft, an MTP head or a draft model, gated like its arm."""

from __future__ import annotations

from collections.abc import Callable

from mlatui.config.scenario import Scenario
from mlatui.gate import mla
from mlatui.gate.policy import Gates, Variant
from mlatui.models.loading import NO_DRAFT, Draft, DraftKind, Loaded, vocab_size
from mlatui.run.arms import Arm, gate_model, sparse_layers
from mlatui.run.drafts import DraftModelSource


def draft_factory(loaded: Loaded, scenario: Scenario, seed: int) -> Callable[[Arm], object] | None:
    """A function from an arm to its own draft, or None for a run without drafting (an MTP draft
    that the checkpoint does not have becomes no draft, and `loaded.draft` says so)."""
    kind = loaded.draft.kind
    if kind is DraftKind.SYNTHETIC:
        from mlatui.run.decode_stream import SyntheticDraft

        vocab = vocab_size(loaded.model)

        def synthetic(arm: Arm):
            cost = (
                _arm_draft_model(arm, loaded.draft_model)
                if loaded.draft_model is not None
                else None
            )
            return SyntheticDraft(
                scenario.draft.acceptance, seed, vocab, cost
            )  # same draws in both arms

        return synthetic
    if loaded.draft.is_mtp:
        from mlatui.run.mtp import load_mtp_draft

        probe = (
            load_mtp_draft(loaded.path, loaded.model, required=kind is DraftKind.MTP)
            if loaded.path
            else None
        )
        if probe is None:
            loaded.draft = NO_DRAFT
            return None
        loaded.draft = Draft(DraftKind.MTP)

        def mtp(arm: Arm):
            head = probe.twin()  # shares the head's weights, own cache; gated like its arm
            _gate_if_mla(head.head, arm)
            return head

        return mtp
    if loaded.draft_model is not None:

        def draft_model(arm: Arm):
            return DraftModelSource(_arm_draft_model(arm, loaded.draft_model), loaded.draft.label)

        return draft_model
    return None


def _arm_draft_model(arm: Arm, model):
    """Each arm's draft is a twin gated like the arm (the fix applies process-wide, so the
    patched variant's draft has the patched gates too; an A/A gives both arms the same draft)."""
    model = mla.twin(model)
    _gate_if_mla(model, arm)
    return model


def _gate_if_mla(model, arm: Arm) -> None:
    if mla.mla_modules(model) or sparse_layers(model):
        gate_model(model, arm.variant or Variant.STOCK, arm.gates or Gates())
