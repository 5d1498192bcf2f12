"""Each arm's own draft from what was loaded (synthetic, MTP or a draft model), gated like it."""

from __future__ import annotations

from collections.abc import Callable

from mlatui.config.scenario import Scenario
from mlatui.gate import mla
from mlatui.gate.policy import Gates, Variant
from mlatui.models.loading import NO_DRAFT, Draft, DraftKind, Loaded, vocab_size
from mlatui.run.arm_plan import gate_model, sparse_layers
from mlatui.run.arms import Arm
from mlatui.run.drafts import DraftModelSource

Factory = Callable[[Arm], object]


def draft_factories(loaded: Loaded, scenario: Scenario, seed: int) -> dict[str, Factory]:
    """Per draft kind ("mtp", "draft-model", "synthetic"), in the scenario's order, a function
    from an arm to its own draft of that kind; {} for a run without drafting. An MTP head asked
    for explicitly that the checkpoint lacks is an error (MTPError, one line); one asked for
    only if present becomes no draft, and `loaded.draft` / `loaded.drafts` say so."""
    out: dict[str, Factory] = {}
    kept: list[Draft] = []
    for draft in loaded.draft_kinds:
        make = _factory(loaded, draft, scenario, seed)
        if make is None:
            continue
        resolved = Draft(DraftKind.MTP) if draft.is_mtp else draft
        out[resolved.kind.value] = make
        kept.append(resolved)
    loaded.draft = kept[0] if kept else NO_DRAFT
    loaded.drafts = tuple(kept) if len(kept) > 1 else ()
    return out


def install_drafts(arm: Arm, factories: dict[str, Factory]) -> None:
    """On the arm's thread: its own draft of every kind; `arm.draft` is the first."""
    arm.drafts = {kind: make(arm) for kind, make in factories.items()}
    arm.draft = next(iter(arm.drafts.values()), None)


def hidden_reader(arm: Arm) -> object:
    """The draft a prefill serves: one that reads the target's hidden states (MTP), else the
    first (the prefill then computes the hidden states once for every kind)."""
    readers = [d for d in arm.drafts.values() if getattr(d, "needs_hidden", False)]
    return readers[0] if readers else arm.draft


def draft_factory(loaded: Loaded, scenario: Scenario, seed: int) -> Factory | None:
    """One draft for a run that compares a single one (decode parity): the draft model when
    there is one (mlx-lm has no MTP loop to compare against), else the first kind."""
    made = draft_factories(loaded, scenario, seed)
    return made.get(DraftKind.DRAFT_MODEL.value) or next(iter(made.values()), None)


def _factory(loaded: Loaded, draft: Draft, scenario: Scenario, seed: int) -> Factory | None:
    if draft.kind is DraftKind.SYNTHETIC:
        return _synthetic_factory(loaded, scenario.draft.acceptance, seed)
    if draft.is_mtp:
        return _mtp_factory(loaded, required=draft.kind is DraftKind.MTP)
    if draft.kind is DraftKind.DRAFT_MODEL and loaded.draft_model is not None:

        def draft_model(arm: Arm):
            return DraftModelSource(_arm_draft_model(arm, loaded.draft_model), draft.label)

        return draft_model
    return None


def _synthetic_factory(loaded: Loaded, acceptance: float, seed: int) -> Factory:
    from mlatui.run.decode_stream import SyntheticDraft

    vocab = vocab_size(loaded.model)

    def synthetic(arm: Arm):
        cost = _arm_draft_model(arm, loaded.draft_model) if loaded.draft_model is not None else None
        return SyntheticDraft(acceptance, seed, vocab, cost)  # same draws in both arms

    return synthetic


def _mtp_factory(loaded: Loaded, required: bool) -> Factory | None:
    """The checkpoint's MTP head, twinned per arm. A head asked for explicitly (`required`)
    that cannot be read is an error; one asked for only if present becomes no draft (a missing
    head is said in the header, the strip and the log)."""
    from mlatui.run.mtp import MTPError, MTPMissing, load_mtp_draft

    folder = loaded.checkpoint_dir
    if folder is None and required:
        raise MTPError(
            f"{loaded.name}: no checkpoint folder to read an MTP head from — "
            'use [draft] source = "draft-model" or a checkpoint with an MTP head'
        )
    if folder is None:
        return None
    notes: list[str] = []
    try:
        probe = load_mtp_draft(folder, loaded.model, notes=notes)
    except MTPMissing:
        if required:
            raise
        from mlatui.models.mtp_weights import missing_head_line

        loaded.mtp_missing = missing_head_line(folder)
        return None
    except MTPError:
        if required:
            raise
        return None
    loaded.draft_notes = (*loaded.draft_notes, *notes)
    if probe is None:
        return None

    def mtp(arm: Arm):
        head = probe.twin()  # shares the head's weights, own cache; gated like its arm
        _gate_if_mla(head.head, arm)
        return head

    return mtp


def _arm_draft_model(arm: Arm, model):
    """Each arm's draft is a twin gated like the arm (the fix applies process-wide, so the
    patched variant's draft has the patched gates too; an A/A gives both arms the same draft)."""
    model = mla.twin(model)
    _gate_if_mla(model, arm)
    return model


def _gate_if_mla(model, arm: Arm) -> None:
    if mla.mla_modules(model) or sparse_layers(model):
        gate_model(model, arm.variant or Variant.STOCK, arm.gates or Gates())
