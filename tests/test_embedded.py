"""The embedded default model: package data, loading, decoding, speculation, manifest, patch."""

import mlx.core as mx
import pytest
from mlx_lm.models.cache import make_prompt_cache

from mlatui.gate.mla import branch_counters, patch_model, twin
from mlatui.models import embedded
from tools.train.acceptance import greedy, speculative

# Measured on the shipped prompts (README): position-1 acceptance 0.64 (128 tokens/prompt).
# On this fixed 48-token run it is 0.63 (19/30); a randomly initialised draft scores 0/48.
# With 30 proposals one standard error is ~0.09, and float-order differences across BLAS
# builds can flip near-tied argmaxes, so the floor sits two standard errors below the
# measurement: it still fails for any draft that does not track the target.
ACCEPTANCE_FLOOR = 0.45


@pytest.fixture(scope="module")
def loaded():
    return embedded.load_embedded()


@pytest.fixture(scope="module")
def prompt_ids(loaded):
    _, tok, _ = loaded
    return tok.encode(embedded.prompts()[1][:400])


def test_manifest_matches_shipped_files():
    assert embedded.verify_manifest() == []
    names = set(embedded.manifest()["files"])
    assert {"model/config.json", "draft/config.json", "draft/model.safetensors"} <= names


def test_register_makes_type_loadable_by_mlx_lm():
    from mlx_lm.utils import _get_classes

    from mlatui.models import register

    register()
    model_cls, args_cls = _get_classes({"model_type": "mlatui_mla"})
    assert model_cls.__module__ == "mlatui.models.mlatui_mla"
    assert args_cls().kv_lora_rank == 512


def test_load_from_package_data(loaded):
    model, tok, draft = loaded
    assert str(embedded.MODEL_PATH).startswith(str(embedded.EMBEDDED_DIR))
    assert model.model_type == "mlatui_mla" and draft.model_type == "mlatui_mla"
    assert len(model.layers) == 6 and len(draft.layers) == 4
    assert model.model.embed_tokens.weight.dtype == mx.float32  # widened from float16 on load
    text = "def read(self, size=-1):\n    return self._buffer[:size]\n"
    assert tok.decode(tok.encode(text)) == text
    assert tok.eos_token_id == 0


def _held_out_nats(model, tok) -> float:
    """Mean next-token cross-entropy over the shipped prompts (held-out stdlib files)."""
    import mlx.nn as nn

    losses = []
    for prompt in embedded.prompts():
        x = mx.array([tok.encode(prompt[:400])])
        logits = model(x[:, :-1])
        losses.append(nn.losses.cross_entropy(logits, x[:, 1:], reduction="mean").item())
    return sum(losses) / len(losses)


def test_models_predict_held_out_python(loaded):
    # Measured: target 2.73, draft v3 (distilled from it) 2.56 nats/token on these short prompts
    # (on 4096-token held-out windows: 1.76 and 1.79); a uniform guess is ln(4096) = 8.3, and
    # mis-loaded or re-initialised weights land near or above that.
    model, tok, draft = loaded
    target, small = _held_out_nats(model, tok), _held_out_nats(draft, tok)
    assert target < 3.0 and small < 3.0, (target, small)
    assert abs(target - small) < 0.5  # a distilled draft tracks its teacher


def test_decode_and_speculative_step_match_plain_greedy(loaded, prompt_ids):
    model, _, draft = loaded
    plain = greedy(model, prompt_ids, 12)
    for depth in (1, 3):
        spec = speculative(model, draft, prompt_ids, 12, depth)
        assert spec.tokens == plain, depth
        assert max(spec.verify_widths) == depth + 1


def test_draft_acceptance_above_floor(loaded, prompt_ids):
    model, _, draft = loaded
    r = speculative(model, draft, prompt_ids, 48, 1)
    assert r.proposed[0] >= 24
    assert r.accepted[0] / r.proposed[0] >= ACCEPTANCE_FLOOR, r.acceptance()


def test_sparse_layer_runs_past_its_budget(loaded):
    model, tok, _ = loaded
    ids = tok.encode(embedded.prompts()[0])
    sparse_i = sorted(model.model.sparse_layers)[0]
    topk = model.layers[sparse_i].self_attn.indexer.index_topk
    assert len(ids) > topk
    cache = make_prompt_cache(model)
    model(mx.array([ids]), cache=cache)
    model(mx.array([ids[:2]]), cache=cache)  # a verify-like step of width 2
    assert cache[sparse_i].offset == len(ids) + 2
    assert cache[sparse_i].index.pool_length == len(ids) + 2  # the pool was built: sparse path ran
    assert all(c.is_trimmable() for c in cache)


def test_patch_model_absorbs_wide_steps_in_patched_twin(loaded, prompt_ids):
    model, _, _ = loaded
    patched = twin(model)
    report = patch_model(patched)
    assert report.threshold == 170  # r 512, nope/v 128/128
    assert len(report.modules) == 5  # the dense layers; the sparse one has its own gate
    cache_s, cache_p = make_prompt_cache(model), make_prompt_cache(patched)
    ctx = mx.array([prompt_ids])
    model(ctx, cache=cache_s)
    patched(ctx, cache=cache_p)
    counters = branch_counters(patched)
    counters.reset()
    step = mx.array([prompt_ids[:3]])
    out_s, out_p = model(step, cache=cache_s), patched(step, cache=cache_p)
    assert counters.absorbed[3] == 5 and counters.materialised[3] == 0
    assert mx.allclose(out_s, out_p, rtol=1e-3, atol=1e-3).item()
    assert branch_counters(model) is None  # the stock model stays stock
