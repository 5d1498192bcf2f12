"""The long-context measure reads by chunks what one forward reads; the extension's recomputed
layers give the gradients the plain ones give; the tune's bound follows the measure."""

# isort: skip_file

import json

import mlx.core as mx
import mlx.nn as nn
import numpy as np
import pytest
from mlx.utils import tree_flatten
from mlx_lm.models import deepseek_v3 as dsv3

from mlatui.models.mlatui_mla import Model, SparseDecoderLayer
from tools.train import longctx
from tools.train.extend import checkpointed
from tools.train.objective import Trainee, set_sparse_training, target_losses
from tools.train.presets import tiny

YARN = {"type": "deepseek_yarn", "factor": 4.0, "original_max_position_embeddings": 32,
        "beta_fast": 32, "beta_slow": 1, "mscale": 1.0, "mscale_all_dim": 1.0}  # fmt: skip


def _net(rope_scaling=None) -> Trainee:
    mx.random.seed(3)
    target_args, draft_args = tiny()
    target_args.rope_scaling = draft_args.rope_scaling = rope_scaling
    net = Trainee(Model(target_args), Model(draft_args), with_mtp=True)
    set_sparse_training(net.target, True)
    mx.eval(net.parameters())
    return net


@pytest.mark.parametrize("rope_scaling", [None, YARN])
def test_the_measures_do_not_depend_on_the_chunk_size(monkeypatch, rope_scaling):
    net = _net(rope_scaling)
    ids = np.random.default_rng(0).integers(1, 4096, size=70).astype(np.uint16)
    monkeypatch.setattr(longctx, "CHUNK", 1024)
    whole = longctx.window_measures(net, ids, 0.8)
    monkeypatch.setattr(longctx, "CHUNK", 16)  # the MTP head's pairs cross chunk borders
    chunked = longctx.window_measures(net, ids, 0.8)
    for name in longctx.MEASURES:
        assert not np.isnan(whole[name][:-1]).any(), name
        np.testing.assert_allclose(chunked[name], whole[name], rtol=2e-4, atol=2e-5, err_msg=name)
    rows = longctx.bucketed([whole], [32, 68])
    assert [r["positions"] for r in rows] == [32, 36]  # position t: a context of t + 1 tokens
    assert rows[0]["ce"] == pytest.approx(float(np.nanmean(whole["ce"][:32])), abs=1e-4)


def test_recomputed_layers_give_the_plain_gradients():
    net = _net(YARN)
    ids = mx.array(np.random.default_rng(1).integers(1, 4096, size=(1, 41)).astype(np.int32))
    x, y = ids[:, :-1], ids[:, 1:]

    def grads():
        loss_and_grad = nn.value_and_grad(net, lambda n, a, b: target_losses(n, a, b, 0.1, 1.0)[0])
        loss, g = loss_and_grad(net, x, y)
        mx.eval(loss, g)
        return float(loss), dict(tree_flatten(g))

    plain_loss, plain = grads()
    calls = (dsv3.DeepseekV3DecoderLayer.__call__, SparseDecoderLayer.__call__)
    try:
        for cls in (dsv3.DeepseekV3DecoderLayer, SparseDecoderLayer):
            checkpointed(cls)
        loss, recomputed = grads()
    finally:
        for cls, call in zip((dsv3.DeepseekV3DecoderLayer, SparseDecoderLayer), calls, strict=True):
            cls.__call__ = call
            cls._mlatui_checkpointed = False
    assert loss == pytest.approx(plain_loss, rel=1e-6)
    assert plain.keys() == recomputed.keys()
    for name, g in plain.items():
        np.testing.assert_allclose(np.array(recomputed[name]), np.array(g), rtol=1e-4, atol=1e-6)


def test_the_tune_bound_is_the_widest_bucket_the_drafts_were_measured_good_in(
    tmp_path, monkeypatch
):
    from mlatui.models import embedded

    def manifest(buckets):
        data = {"training": {"args": {"seq": "4096"}}}
        if buckets is not None:
            data["long_context"] = {"measured": {"longctx-extended": {"buckets": buckets}}}
        (tmp_path / "MANIFEST.json").write_text(json.dumps(data))
        return embedded.trained_window()

    monkeypatch.setattr(embedded, "EMBEDDED_DIR", tmp_path)
    good, bad = {"mtp_rejection": 0.8}, {"mtp_rejection": 0.6}
    assert manifest([{"context": "0-2048", **good}, {"context": "2048-8192", **good},
                     {"context": "8192-16384", **bad}, {"context": "16384-32768", **good}]) == 8192  # fmt: skip
    assert manifest([{"context": "0-2048", **bad}]) == 4096
    assert manifest(None) == 4096
