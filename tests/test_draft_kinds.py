"""Draft kinds are an enum in the core, converted to the recorded `draft` label only at the header;
an arm's per-context state is typed fields (`Arm.model_name`, `Arm.hidden`), not a dict."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import mlx.core as mx
import pytest

from mlatui.config.draft_spec import DraftSource, DraftSpec
from mlatui.config.scenario import load_scenario
from mlatui.models.loading import (
    EMBEDDED_DRAFT,
    NO_DRAFT,
    Draft,
    DraftKind,
    Loaded,
    LoadError,
    drafts_label,
    load_checkpoint,
    load_draft,
)
from mlatui.run.arms import Arm, ArmWorker, Baton, TargetHidden, build_arms, prefill
from mlatui.run.decode_stream import draft_factory
from mlatui.run.phases.base import RunContext, share_context
from tests.random_models import build_model

ROOT = Path(__file__).parent.parent
RECORDINGS = [
    ROOT / "scenarios" / "demo.jsonl",
    *sorted((ROOT / "tests" / "fixtures").glob("*.jsonl")),
]


@pytest.mark.parametrize(
    ("draft", "label"),
    [
        (NO_DRAFT, "none"),
        (EMBEDDED_DRAFT, "draft-model:embedded"),
        (Draft(DraftKind.DRAFT_MODEL, "random:deepseek_v3"), "draft-model:random:deepseek_v3"),
        (Draft(DraftKind.DRAFT_MODEL, "org/name"), "draft-model:org/name"),
        (Draft(DraftKind.SYNTHETIC, acceptance=0.75), "synthetic(acceptance=0.75)"),
        (Draft(DraftKind.MTP), "mtp"),
    ],
)
def test_labels_are_the_recorded_draft_field(draft, label):
    assert draft.label == label


def test_every_shipped_recording_names_a_draft_the_enum_makes():
    made = {
        EMBEDDED_DRAFT.label,
        NO_DRAFT.label,
        Draft(DraftKind.MTP).label,
        Draft(DraftKind.SYNTHETIC, acceptance=0.75).label,
        drafts_label((Draft(DraftKind.MTP), EMBEDDED_DRAFT)),  # the default scenario's two kinds
    }
    seen = set()
    for path in RECORDINGS:
        first = json.loads(path.read_text().splitlines()[0])
        if first.get("type") == "header":
            seen.add(first["draft"])
    assert seen and seen <= made, seen - made


def _target(path: str | None = None, random_weights: bool = False) -> Loaded:
    return Loaded(None, None, "t", "deepseek_v3", path, random_weights)


@pytest.mark.parametrize(
    ("source", "path", "random_weights", "kind"),
    [
        (DraftSource.NONE, "/x", False, DraftKind.NONE),
        (DraftSource.MTP, "/x", False, DraftKind.MTP),
        (DraftSource.AUTO, "/x", False, DraftKind.MTP_IF_PRESENT),  # a checkpoint: try its head
        (DraftSource.AUTO, None, False, DraftKind.NONE),
        (DraftSource.AUTO, None, True, DraftKind.SYNTHETIC),  # random weights: no head exists
        (DraftSource.MTP, None, True, DraftKind.SYNTHETIC),
        (DraftSource.SYNTHETIC, None, False, DraftKind.SYNTHETIC),
    ],
)
def test_the_scenarios_draft_source_picks_a_kind(source, path, random_weights, kind):
    target = _target(path, random_weights)
    load_draft(None, DraftSpec(source, acceptance=0.5), target, seed=0)
    assert target.draft.kind is kind
    if kind is DraftKind.SYNTHETIC:
        assert target.draft.label == "synthetic(acceptance=0.5)"


def test_a_draft_model_needs_a_path_or_a_config():
    with pytest.raises(LoadError, match="needs 'path' or a \\[draft.config\\] table"):
        load_draft(None, DraftSpec(DraftSource.DRAFT_MODEL), _target(), seed=0)


def test_scenario_draft_source_is_the_enum(tmp_path):
    scenario = tmp_path / "s.toml"
    scenario.write_text('[draft]\nsource = "none"\n[[phase]]\nkind = "sweep"\ncontexts = [64]\n')
    loaded = load_scenario(str(scenario))
    assert loaded.draft.source is DraftSource.NONE
    assert loaded.record().draft_source == "none"  # the recorded form is the plain word
    scenario.write_text('[draft]\nsource = "eagle"\n[[phase]]\nkind = "sweep"\ncontexts = [64]\n')
    with pytest.raises(
        ValueError,
        match='draft.source: expected one of auto, draft-model, mtp, synthetic, none, got "eagle"',
    ):
        load_scenario(str(scenario))


def test_mtp_if_present_without_a_head_becomes_no_draft(tiny_checkpoint):
    model, tok, mtype = load_checkpoint(str(tiny_checkpoint))
    loaded = Loaded(model, tok, "tiny", mtype, str(tiny_checkpoint), False)
    loaded.draft = Draft(DraftKind.MTP_IF_PRESENT)
    scenario = load_scenario(None)
    assert draft_factory(loaded, scenario, 0) is None
    assert loaded.draft is NO_DRAFT
    loaded.draft = Draft(DraftKind.MTP)  # asked for explicitly: a missing head is an error
    with pytest.raises(Exception, match="MTP"):
        draft_factory(loaded, scenario, 0)


class HiddenDraft:
    """A draft that reads the target's hidden states: the prefill must hand them over."""

    needs_hidden = True

    def target_forward(self, model, inputs, cache):
        out = model(inputs, cache=cache)
        return out, inputs[..., None].astype(mx.float32) * mx.ones((1, 1, 3))  # (1, L, 3)


def test_prefill_keeps_the_targets_hidden_states_as_a_typed_field():
    model = build_model("deepseek_v3", layers=1)
    stock, _ = build_arms(model)
    stock.draft = HiddenDraft()
    assert prefill(stock, list(range(10)), chunk=4) == 10
    assert isinstance(stock.hidden, TargetHidden)
    assert stock.hidden.context.shape == (1, 10, 3) and stock.hidden.last.shape == (1, 1, 3)
    assert stock.hidden.last.tolist() == [[[9.0, 9.0, 9.0]]]
    assert not hasattr(stock, "state")


def test_share_context_moves_the_hidden_states_to_both_arms():
    model = build_model("deepseek_v3", layers=1)
    mx.eval(model.parameters())
    stock, patched = build_arms(model)
    baton = Baton()
    workers = {"stock": ArmWorker(stock, baton), "patched": ArmWorker(patched, baton)}
    source = ArmWorker(Arm("prefill", model, patched.report, draft=HiddenDraft()), baton)
    ctx = RunContext(
        workers, lambda e: None, threading.Event(), 0, lambda n: [], 128, prefill_worker=source
    )
    try:
        assert share_context(ctx, list(range(12))) == 12
        assert source.arm.hidden is None and source.arm.cache is None
        assert stock.hidden is patched.hidden and stock.hidden.context.shape == (1, 12, 3)
        assert stock.cache is not patched.cache
    finally:
        for w in (*workers.values(), source):
            w.close()
