import json
import math

import mlx.core as mx
import mlx.nn as nn
import pytest
from mlx.utils import tree_flatten
from mlx_lm.models.cache import KVCache, make_prompt_cache, trim_prompt_cache
from mlx_lm.utils import _get_classes, load_model

from mlatui.run import drafts as mtp

MLA = dict(kv_lora_rank=32, qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=16, q_lora_rank=24)
COMMON = dict(
    vocab_size=16,  # tiny vocab: random drafts are sometimes right, so accepts and rejects both occur
    hidden_size=32,
    intermediate_size=48,
    moe_intermediate_size=16,
    num_hidden_layers=2,
    num_attention_heads=2,
    num_key_value_heads=2,
    n_shared_experts=1,
    n_routed_experts=4,
    num_experts_per_tok=2,
    first_k_dense_replace=1,
    max_position_embeddings=4096,
    num_nextn_predict_layers=1,
    torch_dtype="float32",
    **MLA,
)
CONFIGS = {
    "glm4_moe_lite": dict(COMMON, model_type="glm4_moe_lite", n_group=1, topk_group=1),
    "deepseek_v3": dict(
        COMMON, model_type="deepseek_v3", n_group=2, topk_group=1, routed_scaling_factor=2.5
    ),
}


def _randomize(params: dict[str, mx.array], prefix: str) -> dict[str, mx.array]:
    out = {}
    for k, v in params.items():
        if k.endswith("norm.weight"):
            out[prefix + k] = 1.0 + 0.1 * mx.random.normal(v.shape)
        elif "e_score_correction_bias" in k:
            out[prefix + k] = 0.1 * mx.random.normal(v.shape)
        elif "embed_tokens" in k:
            out[prefix + k] = mx.random.normal(v.shape)
        else:
            out[prefix + k] = mx.random.normal(v.shape) / math.sqrt(v.shape[-1])
    return out


def _to_hf(weights: dict[str, mx.array], cfg: dict) -> dict[str, mx.array]:
    """Undo mlx-lm's sanitize: split switch_mlp into experts, rebuild kv_b_proj."""
    hf = {}
    for k, v in weights.items():
        if ".mlp.switch_mlp." in k:
            for e in range(v.shape[0]):
                hf[k.replace(".switch_mlp.", f".experts.{e}.")] = v[e]
        elif k.endswith("self_attn.embed_q.weight"):
            wv = weights[k.replace("embed_q", "unembed_out")]  # (H, v, r)
            kv_b = mx.concatenate([v.swapaxes(-1, -2), wv], axis=1)  # (H, nope + v, r)
            hf[k.replace("embed_q", "kv_b_proj")] = kv_b.reshape(
                -1, cfg["kv_lora_rank"]
            )  # (H*(nope+v), r)
        elif "unembed_out" not in k:
            hf[k] = v
    return hf


def save_checkpoint(
    path, model_type: str, layout: str, seed=0, shared_head=False, overrides=None, mtp_bits=None
) -> dict:
    """Tiny HF-style checkpoint with random weights; layout: index | single | sidecar | none.
    `mtp_bits`: store the MTP layer mlx-quantized (every Linear whose input is a multiple of 32).
    Returns the HF-named MTP tensors that were saved (before quantization)."""
    mx.random.seed(seed)
    cfg = dict(CONFIGS[model_type], **(overrides or {}))
    model_cls, args_cls = _get_classes(cfg)
    args = args_cls.from_dict(cfg)
    model = model_cls(args)
    main = _to_hf(_randomize(dict(tree_flatten(model.parameters())), ""), cfg)
    n = cfg["num_hidden_layers"]
    layer = type(model.model.layers[0])(args, layer_idx=n)
    d = cfg["hidden_size"]
    extra = dict(tree_flatten(layer.parameters()))
    extra.update(
        {
            "enorm.weight": mx.ones((d,)),
            "hnorm.weight": mx.ones((d,)),
            "eh_proj.weight": mx.zeros((d, 2 * d)),
            "shared_head.norm.weight": mx.ones((d,)),
        }
    )
    if shared_head:
        extra["shared_head.head.weight"] = mx.zeros((cfg["vocab_size"], d))
    mtp_w = _to_hf(_randomize(extra, f"model.layers.{n}."), cfg)
    mtp_w[f"model.layers.{n}.embed_tokens.weight"] = main["model.embed_tokens.weight"]
    mx.eval(main, mtp_w)
    stored = _quantize_linears(mtp_w, mtp_bits) if mtp_bits else mtp_w

    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text(json.dumps(cfg))
    meta = {"format": "pt"}
    if layout == "index":
        files = {
            "model-00001-of-00002.safetensors": main,
            "model-00002-of-00002.safetensors": mtp_w,
        }
        weight_map = {k: f for f, w in files.items() for k in w}
        (path / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
        for f, w in files.items():
            mx.save_safetensors(str(path / f), w, metadata=meta)
    elif layout == "single":
        mx.save_safetensors(str(path / "model.safetensors"), {**main, **stored}, metadata=meta)
    else:
        mx.save_safetensors(str(path / "model.safetensors"), main, metadata=meta)
        if layout == "sidecar":
            mx.save_safetensors(str(path / "mtp.safetensors"), stored, metadata=meta)
    return mtp_w


def _quantize_linears(weights: dict[str, mx.array], bits: int) -> dict[str, mx.array]:
    out = {}
    for k, v in weights.items():
        linear = k.endswith("proj.weight") and v.ndim == 2 and v.shape[-1] % 32 == 0
        if linear:
            w, scales, biases = mx.quantize(v, group_size=32, bits=bits)
            base = k.removesuffix("weight")
            out.update({base + "weight": w, base + "scales": scales, base + "biases": biases})
        else:
            out[k] = v
    return out


def load(path):
    # deepseek_v3's sanitize drops only the hard-coded layer 61, so tiny deepseek_v3 checkpoints
    # here keep their MTP layer in a sidecar (or mlx-lm would refuse the extra layer)
    model, _ = load_model(path)
    return model


def greedy(model, prompt: list[int], n: int) -> list[int]:
    cache = make_prompt_cache(model)
    logits = model(mx.array([prompt]), cache=cache)
    out = []
    for _ in range(n):
        tok = int(mx.argmax(logits[0, -1]).item())
        out.append(tok)
        logits = model(mx.array([[tok]]), cache=cache)
    return out


def speculative(
    model, draft: mtp.MTPDraft, prompt: list[int], n: int, k: int
) -> tuple[list[int], dict]:
    cache = make_prompt_cache(model)
    ctx = mx.array([prompt[:-1]])  # (1, T): the target cache covers everything but `last`
    _, hidden = draft.target_forward(model, ctx, cache)
    draft.prefill(ctx, hidden)
    assert draft.consumed == cache[0].offset - 1
    last, h_before = prompt[-1], hidden[:, -1:]
    out: list[int] = []
    stats = {"accepted": 0, "rejected": 0, "first_drafts": []}
    while len(out) < n:
        pos = cache[0].offset  # position of `last`
        drafts = draft.propose(last, k, h_before)
        assert len(drafts) == k and draft.offset == pos - 1 + k
        stats["first_drafts"].append((pos, drafts[0]))
        logits, hidden = draft.target_forward(
            model, mx.array([[last] + drafts]), cache
        )  # L = k + 1
        target = mx.argmax(logits[0], axis=-1).tolist()
        a = 0
        while a < k and drafts[a] == target[a]:
            a += 1
        stats["accepted"] += a
        stats["rejected"] += a < k
        trim_prompt_cache(cache, k - a)  # keep last, d1..d_a
        draft.commit(a, hidden[:, : a + 1])
        assert cache[0].offset == pos + a + 1
        assert draft.consumed == cache[0].offset - 1, "MTP cache out of step with the target's"
        out += drafts[:a] + [target[a]]
        last, h_before = target[a], hidden[:, a : a + 1]
    return out[:n], stats


def reference_first_drafts(model, draft: mtp.MTPDraft, seq: list[int]) -> list[int]:
    """d1 for every position from one uncached pass over the final sequence."""
    _, hidden = draft.target_forward(model, mx.array([seq]), make_prompt_cache(model))
    h = draft.head(mx.array([seq[1:]]), hidden[:, :-1], [KVCache()])  # slot j: (h_j, t_{j+1})
    return mx.argmax(draft.head.logits(h)[0], axis=-1).tolist()


PROMPT = [3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5]


@pytest.mark.parametrize(
    "model_type, layout",
    [("glm4_moe_lite", "index"), ("deepseek_v3", "sidecar")],
    ids=["glm-index", "dsv3-sidecar"],
)
def test_speculative_with_mtp_matches_greedy(tmp_path, model_type, layout):
    save_checkpoint(tmp_path, model_type, layout, shared_head=model_type == "deepseek_v3")
    model = load(tmp_path)
    draft = mtp.load_mtp_draft(tmp_path, model)
    assert type(draft.head.layer.mlp).__name__.endswith("MoE")  # layer index N is a MoE layer
    n = 24
    want = greedy(model, PROMPT, n)
    totals = {"accepted": 0, "rejected": 0}
    for k in (1, 2, 3):
        got, stats = speculative(model, draft, PROMPT, n, k)
        assert got == want, f"k={k}"
        ref = reference_first_drafts(model, draft, PROMPT + got)
        for pos, d1 in stats["first_drafts"]:
            assert d1 == ref[pos - 1], (
                f"k={k}: draft at position {pos} differs from an uncached pass"
            )
        totals = {key: totals[key] + stats[key] for key in totals}
    assert totals["accepted"] > 0 and totals["rejected"] > 0, totals  # both paths exercised


def test_head_weights_are_the_checkpoints(tmp_path):
    saved = save_checkpoint(tmp_path, "glm4_moe_lite", "single")
    model = load(tmp_path)
    layer = mtp.load_mtp_draft(tmp_path, model).head.layer
    p = "model.layers.2."
    assert mx.array_equal(layer.enorm.weight, saved[p + "enorm.weight"])
    assert mx.array_equal(layer.eh_proj.weight, saved[p + "eh_proj.weight"])
    for e in range(4):
        assert mx.array_equal(
            layer.mlp.switch_mlp.gate_proj.weight[e], saved[p + f"mlp.experts.{e}.gate_proj.weight"]
        )
    kv_b = saved[p + "self_attn.kv_b_proj.weight"].reshape(2, 32, 32)  # (H, nope + v, r)
    assert mx.array_equal(layer.self_attn.embed_q.weight, kv_b[:, :16].swapaxes(-1, -2))
    assert mx.array_equal(layer.self_attn.unembed_out.weight, kv_b[:, 16:])
    assert (
        "head" not in layer.shared_head
    )  # no shared_head.head saved: the target's lm_head is used


def test_outputs_deterministic_and_twin_shares_weights(tmp_path):
    save_checkpoint(tmp_path, "deepseek_v3", "sidecar", shared_head=True)
    model = load(tmp_path)
    a = mtp.load_mtp_draft(tmp_path, model)
    assert "head" in a.head.layer.shared_head
    b = a.twin()
    assert b.head.layer.eh_proj.weight is a.head.layer.eh_proj.weight  # no copy
    results = []
    for d in (a, b, mtp.load_mtp_draft(tmp_path, model)):
        cache = make_prompt_cache(model)
        ctx = mx.array([PROMPT[:-1]])
        _, hidden = d.target_forward(model, ctx, cache)
        d.prefill(ctx, hidden)
        results.append(d.propose(PROMPT[-1], 3, hidden[:, -1:]))
        assert d.offset == len(PROMPT) - 2 + 3
    assert results[0] == results[1] == results[2]


def test_sidecar_with_layer_local_names(tmp_path):
    saved = save_checkpoint(tmp_path, "glm4_moe_lite", "none")
    local = {k.removeprefix("model.layers.2."): v for k, v in saved.items()}
    mx.save_safetensors(str(tmp_path / "mtp.safetensors"), local)
    draft = mtp.load_mtp_draft(tmp_path, load(tmp_path))
    assert mx.array_equal(draft.head.layer.hnorm.weight, local["hnorm.weight"])


def test_no_mtp_weights_is_a_clear_error(tmp_path):
    save_checkpoint(tmp_path, "glm4_moe_lite", "none")
    model = load(tmp_path)
    with pytest.raises(mtp.MTPError, match=r"mlx-lm's conversion drops .*mtp\.safetensors") as e:
        mtp.load_mtp_draft(tmp_path, model)
    assert "\n" not in str(e.value)
    assert mtp.load_mtp_draft(tmp_path, model, required=False) is None
    with pytest.raises(mtp.MTPMissing, match="mlatui mtp extract"):
        mtp.load_mtp_draft(tmp_path, model)
    cfg = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps(dict(cfg, num_nextn_predict_layers=0)))
    with pytest.raises(mtp.MTPError, match="num_nextn_predict_layers"):
        mtp.load_mtp_draft(tmp_path, model)


def test_unsupported_family_is_a_clear_error(tmp_path):
    save_checkpoint(tmp_path, "glm4_moe_lite", "single")
    model = load(tmp_path)

    class Other(nn.Module):
        pass

    model.model.layers[0] = Other()
    with pytest.raises(mtp.MTPError, match="supported for deepseek_v3, glm4_moe_lite"):
        mtp.load_mtp_draft(tmp_path, model)


def test_deeper_drafts_chain_on_the_heads_own_hidden(tmp_path):
    save_checkpoint(tmp_path, "glm4_moe_lite", "single", seed=2)
    model = load(tmp_path)
    draft = mtp.load_mtp_draft(tmp_path, model)
    ctx = mx.array([PROMPT[:-1]])
    _, hidden = draft.target_forward(model, ctx, make_prompt_cache(model))
    draft.prefill(ctx, hidden)
    got = draft.propose(PROMPT[-1], 3, hidden[:, -1:])

    cache = [KVCache()]
    h = draft.head(mx.array([PROMPT[1:]]), hidden, cache)[:, -1:]  # slots 0..T-1, last one = `last`
    want = []
    for _ in range(3):
        tok = int(mx.argmax(draft.head.logits(h)[0, -1]).item())
        want.append(tok)
        h = draft.head(mx.array([[tok]]), h, cache)  # next slot: own hidden + own draft
    assert got == want


def test_quantized_sidecar_beside_an_unquantized_target_is_converted_on_load(tmp_path):
    """A head stored 8-bit beside an fp32 target is unpacked to the target's dtype (and said):
    kv_b_proj goes through mlx-lm's dequantize/split/requantize, then everything is unpacked."""
    wide = dict(qk_nope_head_dim=32, v_head_dim=32, moe_intermediate_size=32)  # group size 32 fits
    saved = save_checkpoint(tmp_path, "glm4_moe_lite", "sidecar", overrides=wide, mtp_bits=8)
    model = load(tmp_path)
    notes: list[str] = []
    draft = mtp.load_mtp_draft(tmp_path, model, notes=notes)
    assert notes == ["MTP head stored 8-bit g32, target unquantized: converted to match"]
    layer = draft.head.layer
    assert type(layer.eh_proj) is nn.Linear and layer.eh_proj.weight.dtype == mx.float32
    assert type(layer.mlp.shared_experts.down_proj) is nn.Linear
    assert type(layer.self_attn.embed_q).__name__ == "MultiLinear"
    kv_b = saved["model.layers.2.self_attn.kv_b_proj.weight"].reshape(2, 64, 32)  # (H, nope + v, r)
    # two 8-bit round trips (the sidecar, then mlx-lm's split): each within half a step of
    # range/255 per group of 32, the random weights' range is about 1.5
    assert mx.allclose(layer.self_attn.embed_q.weight, kv_b[:, :32].swapaxes(-1, -2), atol=0.01)
    got, _ = speculative(model, draft, PROMPT, 16, 2)
    assert got == greedy(model, PROMPT, 16)
