import mlx.core as mx
import mlx.nn as nn
import numpy as np
import pytest
from mlx.utils import tree_flatten
from mlx_lm.models.base import create_attention_mask
from mlx_lm.models.cache import can_trim_prompt_cache, trim_prompt_cache

from mlatui.gate.mla import BranchCounters
from mlatui.gate.policy import STOCK_POLICY, FormulaPolicy
from mlatui.models.indexer import (
    Indexer,
    IndexerCache,
    SelectRule,
    SparseMLAConfig,
    pool_windows,
    select_tokens,
)
from mlatui.models.sparse_mla import SparseMLACache, SparseMLAttention

KPOOL = 4
TOPK = 16


def small_config(**kw) -> SparseMLAConfig:
    base = dict(
        hidden_size=32,
        num_attention_heads=4,
        kv_lora_rank=32,
        q_lora_rank=24,
        qk_nope_head_dim=16,
        qk_rope_head_dim=0,
        v_head_dim=16,
        index_n_heads=3,
        index_head_dim=8,
        index_kpool=KPOOL,
        index_topk=TOPK,
        index_query_chunk=5,
    )
    base.update(kw)
    return SparseMLAConfig(**base)


def make_indexer(mode="patched", seed=0, **kw) -> Indexer:
    mx.random.seed(seed)
    idx = Indexer(small_config(q_lora_rank=None, **kw), mode)
    idx.compress_ape = mx.random.normal(idx.compress_ape.shape) * 0.5
    mx.eval(idx.parameters())
    return idx


def tokens(n, seed=1, hidden=32) -> mx.array:
    return mx.random.normal((1, n, hidden), key=mx.random.key(seed))


def chosen(sel) -> list[list[tuple[int, ...]]]:
    """Per batch, per query: the sorted selected token positions."""
    idx, valid = (np.array(a) for a in sel)
    return [
        [tuple(sorted(i[v].tolist())) for i, v in zip(ib, vb, strict=True)]
        for ib, vb in zip(idx, valid, strict=True)
    ]


def ulps(a: mx.array, b: mx.array) -> float:
    """Largest difference in float32 ULPs at the tensor's magnitude (the spacing of max |x|).
    Per-element ULPs would blow up on values that are near zero only through cancellation."""
    x, y = np.array(a, dtype=np.float32), np.array(b, dtype=np.float32)
    return float(np.abs(x - y).max() / np.spacing(np.abs(x).max()))


# NumPy reference --------------------------------------------------------------------------


def np_pool(keys, gates, ape, kpool):
    B, H, N, D = keys.shape
    P = -(-N // kpool)
    out = np.zeros((B, H, P, D), np.float64)
    for w in range(P):
        lo, hi = w * kpool, min(N, (w + 1) * kpool)
        g = gates[:, :, lo:hi].astype(np.float64) + ape[None, :, : hi - lo]
        e = np.exp(g - g.max(-1, keepdims=True))
        p = e / e.sum(-1, keepdims=True)
        out[:, :, w] = (p[..., None] * keys[:, :, lo:hi]).sum(2)
    return out


def np_select(q, weights, pooled, start, kpool, topk):
    B, H, S, D = q.shape
    P = pooled.shape[2]
    res = []
    for b in range(B):
        rows = []
        for s in range(S):
            p = start + s
            dots = np.einsum("hd,hpd->hp", q[b, :, s], pooled[b])
            score = (weights[b, s][:, None] * np.maximum(dots, 0)).sum(0)
            visible = (p + 1) // kpool
            order = [int(w) for w in np.argsort(-score[:visible], kind="stable")][
                : min(topk // kpool, P)
            ]
            toks = {w * kpool + j for w in order for j in range(kpool)}
            toks |= {t for t in range((p + 1) // kpool * kpool, p + 1)}
            rows.append(tuple(sorted(toks)))
        res.append(rows)
    return res


def test_pool_windows_matches_numpy():
    rng = np.random.default_rng(0)
    for n in (8, 11):
        keys = rng.standard_normal((2, 3, n, 5)).astype(np.float32)
        gates = rng.standard_normal((2, 3, n)).astype(np.float32) * 2
        ape = rng.standard_normal((3, KPOOL)).astype(np.float32)
        got = pool_windows(mx.array(keys), mx.array(gates), KPOOL, mx.array(ape))
        assert got.shape == (2, 3, -(-n // KPOOL), 5)
        np.testing.assert_allclose(
            np.array(got), np_pool(keys, gates, ape, KPOOL), rtol=2e-6, atol=2e-6
        )


def test_padding_tokens_get_no_weight():
    rng = np.random.default_rng(1)
    keys = rng.standard_normal((1, 2, 8, 4)).astype(np.float32)
    gates = rng.standard_normal((1, 2, 8)).astype(np.float32)
    valid = np.array([[False, False, True, True, True, True, True, True]])
    got = np.array(pool_windows(mx.array(keys), mx.array(gates), KPOOL, valid=mx.array(valid)))
    ref = np_pool(keys[:, :, 2:4], gates[:, :, 2:4], np.zeros((2, 4)), KPOOL)[:, :, 0]
    np.testing.assert_allclose(got[:, :, 0], ref, rtol=2e-6, atol=2e-6)


@pytest.mark.parametrize("context", [20, 23, 40])
def test_selection_matches_numpy_reference(context):
    ix = make_indexer()
    x = tokens(context)
    cache = IndexerCache()
    sel = ix(x, x, cache)
    assert sel is not None and context > TOPK  # the sparse path really runs
    q, k, g, w = ix.project(x, x)
    pooled = np_pool(np.array(k), np.array(g), np.array(ix.compress_ape), KPOOL)
    ref = np_select(np.array(q), np.array(w), pooled[:, :, : context // KPOOL], 0, KPOOL, TOPK)
    got = chosen(sel)
    assert got == ref
    last = got[0][-1]
    assert len(last) < context and len(last) >= TOPK  # sparse: some tokens really left out
    assert sel[0].shape == (1, context, TOPK + KPOOL - 1)


def test_dense_bypass_below_budget():
    ix = make_indexer()
    cache = IndexerCache()
    assert ix(tokens(TOPK), tokens(TOPK), cache) is None
    assert cache.offset == TOPK and cache.pool_length == -1
    assert ix(tokens(1, seed=5), tokens(1, seed=5), cache) is not None
    assert cache.pool_length == TOPK + 1


def step(ix, cache, x):
    return ix(x, x, cache)


@pytest.mark.parametrize("width", [2, 3, 4, 8])
@pytest.mark.parametrize("context", [24, 25, 26, 27])  # aligned (24) and misaligned cache lengths
def test_wide_step_pools_like_one_at_a_time(width, context):
    ix = make_indexer()
    x = tokens(context + width, seed=7)
    base = IndexerCache()
    step(ix, base, x[:, :context])
    wide, single = base.copy(), base.copy()
    wide_sel = chosen(step(ix, wide, x[:, context:]))
    single_sel = []
    for t in range(context, context + width):
        single_sel += chosen(step(ix, single, x[:, t : t + 1]))[0]
    assert wide.last_reused and single.last_reused  # the patched arm pooled incrementally
    assert wide.offset == single.offset == context + width
    assert wide.pool_length == single.pool_length and wide.pool_windows == single.pool_windows
    assert wide_sel[0] == single_sel
    # New index keys come from a (width x hidden) matmul in one arm and (1 x hidden) in the
    # other. OpenBLAS sums those in a different order from width 4 on (gemm vs gemv kernels):
    # measured <= 2.5 ULP on the keys, <= 4 ULP on the pools (the softmax-weighted sum of 4
    # carries them through). Widths 2-3 and all old windows are bitwise equal. Bound: 8.
    assert ulps(wide.keys[:, :, : wide.offset], single.keys[:, :, : single.offset]) <= 8
    assert ulps(wide.pooled_keys(), single.pooled_keys()) <= 8
    old = context // KPOOL
    assert mx.array_equal(wide.pooled_keys()[:, :, :old], single.pooled_keys()[:, :, :old])


@pytest.mark.parametrize("width", [2, 3, 4, 8])
def test_wide_step_pools_bitwise_on_identical_keys(width):
    """Given the same keys and gates, the incremental pool is bit-identical to pooling one token
    at a time and to a full re-pool: same windows, same elementwise arithmetic."""
    rng = np.random.default_rng(width)
    n = 27 + width
    keys = mx.array(rng.standard_normal((1, 3, n, 8)).astype(np.float32))
    gates = mx.array(rng.standard_normal((1, 3, n)).astype(np.float32))
    wide, single = IndexerCache(), IndexerCache()
    for c in (wide, single):
        c.append(keys[:, :, :27], gates[:, :, :27])
        c.refresh_pool(KPOOL, 27, incremental=False)
    wide.append(keys[:, :, 27:], gates[:, :, 27:])
    wide.refresh_pool(KPOOL, width, incremental=True)
    for t in range(27, n):
        single.append(keys[:, :, t : t + 1], gates[:, :, t : t + 1])
        single.refresh_pool(KPOOL, 1, incremental=True)
    full = pool_windows(keys, gates, KPOOL)
    assert wide.reuses == 1 and single.reuses == width
    assert mx.array_equal(wide.pooled_keys(), single.pooled_keys())
    assert mx.array_equal(wide.pooled_keys(), full)


def test_stock_and_patched_select_identical_positions():
    stock, patched = make_indexer("stock"), make_indexer("patched")
    x = tokens(40, seed=3)
    cs, cp = IndexerCache(), IndexerCache()
    for a, b in ((0, 21), (21, 22), (22, 25), (25, 29), (29, 37)):
        ss, sp = step(stock, cs, x[:, a:b]), step(patched, cp, x[:, a:b])
        assert chosen(ss) == chosen(sp)
        np.testing.assert_array_equal(np.array(cs.pooled_keys()), np.array(cp.pooled_keys()))
    assert cs.reuses == 1 and cp.reuses == 4  # stock reused only for its one S == 1 step
    assert cs.rebuilds == 4 and cp.rebuilds == 1


def test_trim_after_rejection_rebuilds_and_matches_fresh():
    ix = make_indexer()
    x = tokens(40, seed=11)
    cache = IndexerCache()
    step(ix, cache, x[:, :22])
    step(ix, cache, x[:, 22:26])  # verify 4: one accepted, three rejected
    assert cache.trim(3) == 3 and cache.offset == 23
    rebuilds = cache.rebuilds
    draft = mx.concatenate([x[:, 22:23], x[:, 30:34]], axis=1)  # what the cache holds next
    sel = step(ix, cache, x[:, 30:34])
    assert not cache.last_reused and cache.rebuilds == rebuilds + 1
    fresh = IndexerCache()
    fresh_sel = step(ix, fresh, mx.concatenate([x[:, :22], draft], axis=1))
    assert chosen(sel)[0] == chosen(fresh_sel)[0][-4:]
    assert ulps(cache.pooled_keys(), fresh.pooled_keys()) <= 8
    # And the step after that is incremental again.
    step(ix, cache, x[:, 34:36])
    assert cache.last_reused


def test_stale_pool_would_be_wrong(monkeypatch):
    """The continuity guard matters: reusing the pool after a trim gives different windows."""
    ix = make_indexer()
    x = tokens(40, seed=11)
    cache = IndexerCache()
    step(ix, cache, x[:, :22])
    step(ix, cache, x[:, 22:26])
    cache.trim(3)
    stale = cache.copy()
    monkeypatch.setattr(
        IndexerCache,
        "reuse_ok",
        lambda self, b, s: self.pooled is not None and self.pool_batch == b,
    )
    step(ix, stale, x[:, 30:34])
    monkeypatch.undo()
    step(ix, cache, x[:, 30:34])
    assert not np.allclose(np.array(stale.pooled_keys()), np.array(cache.pooled_keys()))


def test_select_tokens_never_chooses_future_pools():
    rng = np.random.default_rng(2)
    q = mx.array(rng.standard_normal((1, 2, 6, 4)).astype(np.float32))
    w = mx.array(rng.standard_normal((1, 6, 2)).astype(np.float32))
    pooled = mx.array(rng.standard_normal((1, 2, 8, 4)).astype(np.float32))
    idx, valid = select_tokens(q, w, pooled, 26, SelectRule(KPOOL, 8, chunk=4))
    for s, (i, v) in enumerate(zip(np.array(idx)[0], np.array(valid)[0], strict=True)):
        assert i[v].max() <= 26 + s and len(set(i[v].tolist())) == v.sum()


# The sparse MLA layer -----------------------------------------------------------------------


def make_layer(seed=0, **kw) -> SparseMLAttention:
    mx.random.seed(seed)
    layer = SparseMLAttention(small_config(**kw))
    mx.eval(layer.parameters())
    return layer


def test_default_config_is_glm53_flash():
    c = SparseMLAConfig()
    assert (c.hidden_size, c.num_attention_heads, c.kv_lora_rank) == (4096, 64, 512)
    assert (c.qk_nope_head_dim, c.qk_rope_head_dim, c.v_head_dim) == (256, 0, 256)
    assert (c.index_n_heads, c.index_head_dim, c.index_kpool, c.index_topk) == (32, 128, 4, 2048)
    assert c.selected_tokens == 2051
    with pytest.raises(ValueError, match="multiple of index_kpool"):
        SparseMLAConfig(index_topk=10)


def test_layer_sparse_covering_everything_equals_dense():
    """T just past the budget, with every pool selected, attends to exactly the causal prefix:
    the sparse gather (absorbed) and the sparse mask (materialised) must equal dense attention."""
    sparse = make_layer()
    dense = make_layer(index_topk=64)
    dense.update(sparse.parameters())
    x = tokens(19, seed=4)
    want = dense(x, mask="causal")
    for gate in (STOCK_POLICY, FormulaPolicy()):
        sparse.set_modes(gate)
        cache = sparse.make_cache()
        got_prefix = sparse(x[:, :16], mask="causal", cache=cache)
        got = sparse(x[:, 16:], mask=create_attention_mask(x[:, 16:], cache), cache=cache)
        assert cache.index.pool_length == 19  # the sparse path ran
        np.testing.assert_allclose(np.array(got_prefix), np.array(want[:, :16]), atol=1e-5)
        np.testing.assert_allclose(np.array(got), np.array(want[:, 16:]), atol=1e-5)


@pytest.mark.parametrize("rope", [0, 8])
def test_layer_stock_vs_patched(rope):
    layer = make_layer(qk_rope_head_dim=rope)
    counters = BranchCounters()
    layer.counters = counters
    x = tokens(40, seed=9)
    base = layer.make_cache()
    layer(x[:, :30], mask="causal", cache=base)
    mx.eval(base.latent, base.index.keys)
    outs = {}
    for arm in ("stock", "patched"):
        layer.set_modes(STOCK_POLICY if arm == "stock" else FormulaPolicy(), arm)
        cache = base.copy()
        outs[arm] = [
            layer(x[:, 30:33], mask="causal", cache=cache),
            layer(x[:, 33:34], cache=cache),
        ]
    np.testing.assert_allclose(
        np.array(outs["stock"][0]), np.array(outs["patched"][0]), atol=2e-5, rtol=1e-4
    )
    assert mx.array_equal(outs["stock"][1], outs["patched"][1])  # L == 1: the same branch, bitwise
    assert counters.materialised[3] == 1 and counters.absorbed[3] == 1


def test_layer_cache_is_trimmable_like_mlx_lm():
    layer = make_layer()
    x = tokens(30, seed=2)
    cache = [layer.make_cache()]
    layer(x[:, :20], mask="causal", cache=cache[0])
    layer(x[:, 20:24], mask="causal", cache=cache[0])
    assert can_trim_prompt_cache(cache) and trim_prompt_cache(cache, 3) == 3
    assert cache[0].offset == cache[0].index.offset == 21
    out = layer(x[:, 24:27], mask="causal", cache=cache[0])
    fresh = layer.make_cache()
    ref = layer(mx.concatenate([x[:, :21], x[:, 24:27]], axis=1), mask="causal", cache=fresh)
    np.testing.assert_allclose(np.array(out), np.array(ref[:, -3:]), atol=1e-5)
    restored = SparseMLACache.from_state(cache[0].state)
    assert restored.offset == 24 and restored.index.offset == 24
    assert mx.array_equal(restored.latent[:, :, :24], cache[0].latent[:, :, :24])


def test_layer_is_differentiable_in_dense_mode():
    layer = make_layer()
    x = tokens(12, seed=6)

    def loss(m, x):
        return (m(x, mask=create_attention_mask(x, None, return_array=True)) ** 2).mean()

    value, grads = nn.value_and_grad(layer, loss)(layer, x)
    mx.eval(value, grads)
    assert np.isfinite(value.item())
    for name in ("q_b_proj", "kv_a_proj_with_mqa", "o_proj"):
        g = np.array(grads[name]["weight"])
        assert np.isfinite(g).all() and np.abs(g).max() > 0
    assert np.abs(np.array(grads["embed_q"]["weight"])).max() > 0


def test_layer_parameter_names_follow_mlx_lm_mla():
    names = {k for k, _ in tree_flatten(make_layer().parameters())}
    for key in (
        "q_a_proj.weight",
        "q_a_layernorm.weight",
        "q_b_proj.weight",
        "kv_a_proj_with_mqa.weight",
        "kv_a_layernorm.weight",
        "embed_q.weight",
        "unembed_out.weight",
        "o_proj.weight",
        "indexer.wk.weight",
        "indexer.wq_b.weight",
        "indexer.weights_proj.weight",
    ):
        assert key in names


def test_embedded_model_args_hand_every_shared_key_to_the_sparse_layer():
    from dataclasses import fields

    from mlatui.models.indexer import SparseMLAConfig
    from mlatui.models.mlatui_mla import ModelArgs

    args = ModelArgs(index_topk=512, index_kpool=8, kv_lora_rank=64, rope_theta=5e5)
    config = args.sparse_args()
    shared = {f.name for f in fields(ModelArgs)} & {f.name for f in fields(SparseMLAConfig)}
    assert {"index_topk", "index_kpool", "kv_lora_rank", "rope_theta"} <= shared
    assert all(getattr(config, k) == getattr(args, k) for k in shared)
