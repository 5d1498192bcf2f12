"""The MLA gate: thresholds, parity of patched vs stock for every family, isolation, fail-closed."""

import copy
import dis
import functools
import re

import mlx.core as mx
import mlx.nn as nn
import pytest
from mlx.utils import tree_flatten
from mlx_lm.models.base import create_attention_mask, create_causal_mask
from mlx_lm.models.cache import make_prompt_cache
from mlx_lm.models.deepseek_v3 import DeepseekV3Attention
from mlx_lm.models.deepseek_v32 import DeepseekV32Attention

from mlatui.gate import mla
from mlatui.gate.policy import STOCK_POLICY
from mlatui.models import families, family_configs
from tests.random_models import build_model

PROMPT_T = 72
WIDTHS = (1, 2, 3, 4, 8)
# fp32: the two branches compute the same sums in a different order; with reductions of length
# <= r = 512 the rounding difference is ~sqrt(512) * 2^-24 * |terms| ~ 1e-6 on O(1) logits
# (measured <= 2e-6). 1e-4 leaves ~50x headroom and still catches any real error (>= 1e-2).
F32_TOL = 1e-4
# bf16 (eps 2^-8): each branch rounds its own intermediates to bf16 (absorbed: q.W_uk and the
# latent output; materialised: K, V and the output), i.e. ~3 roundings of relative 2^-9 per arm per
# layer, then the logits themselves are bf16 (spacing eps * |x|). Two layers plus projections:
# |diff| <= 8 * eps * max|logits| (measured ~4 * eps * max).
BF16_EPS = 2.0**-8


# ---- thresholds -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "geometry,limit",
    [((512, 128, 128), 170), ((512, 192, 256), 398), ((512, 256, 256), 511), ((256, 64, 128), 153)],
)
def test_threshold_limit(geometry, limit):
    assert mla.max_absorbed_queries(*geometry) == limit


@pytest.mark.parametrize(
    "geometry,at_1k,at_8k",
    [((512, 128, 128), 146, 167), ((512, 192, 256), 286, 379), ((512, 256, 256), 341, 481)],
)
def test_threshold_cache_aware(geometry, at_1k, at_8k):
    assert mla.max_absorbed_queries(*geometry, cache_len=1024) == at_1k
    assert mla.max_absorbed_queries(*geometry, cache_len=8192) == at_8k


@pytest.mark.parametrize(
    "geometry", [(512, 128, 128), (512, 192, 256), (512, 256, 256), (256, 64, 128)]
)
def test_threshold_monotonic_in_cache_length(geometry):
    limits = [mla.max_absorbed_queries(*geometry, cache_len=t) for t in range(1, 20000, 37)]
    assert limits == sorted(limits)
    assert limits[-1] <= mla.max_absorbed_queries(*geometry)


@pytest.mark.parametrize("geometry", [(512, 128, 128), (512, 192, 256), (256, 64, 128)])
def test_cold_cache_materialises(geometry):
    # T == L: every query is new, so materialising K/V costs no more than the queries themselves
    for length in range(2, 300):
        assert mla.max_absorbed_queries(*geometry, cache_len=length) < length


@pytest.mark.parametrize(
    "args", [(0, 128, 128), (512, 0, 128), (512, 128, 0), (-1, 128, 128), (512, 128, 128, 0)]
)
def test_invalid_geometry_gives_one(args):
    assert mla.max_absorbed_queries(*args) == 1


# ---- parity, whole model --------------------------------------------------------------------


@functools.cache
def _arms(name: str, dtype=mx.float32, **overrides):
    """Stock model (instrumented), patched twin, and a warm cache prefilled once by stock."""
    stock = build_model(name, dtype=dtype, **overrides)
    patched = mla.twin(stock)
    report = mla.patch_model(patched)
    mla.patch_model(stock, STOCK_POLICY)  # L == 1 as stock, its calls counted
    cache = make_prompt_cache(stock)
    mx.random.seed(1)
    prompt = mx.random.randint(0, family_configs.VOCAB_TINY, (1, PROMPT_T))
    mx.eval(stock(prompt, cache=cache), [c.state for c in cache])
    return stock, patched, report, cache


def _arrays(entry) -> list[mx.array]:
    return [a for _, a in tree_flatten(entry.state) if isinstance(a, mx.array)]


def _first_mla_prefix(caches, rank: int) -> list[mx.array]:
    """Cached arrays up to the first MLA layer's latent and rope key: these see identical inputs
    in both arms, so they must stay bitwise equal. Later MLA layers see inputs that differ by an
    ULP (the first layer's output), so only closeness holds there."""
    flat = [a for entry in caches for a in _arrays(entry)]
    for i, a in enumerate(flat):
        if a.ndim == 4 and a.shape[-1] == rank:
            return flat[: i + 2]
    raise AssertionError("no MLA latent in the cache")


def _step_both(stock, patched, cs, cp, length, seed):
    mx.random.seed(seed)
    tokens = mx.random.randint(0, family_configs.VOCAB_TINY, (1, length))
    a, b = stock(tokens, cache=cs), patched(tokens, cache=cp)
    mx.eval(a, b, [c.state for c in cs], [c.state for c in cp])
    return a, b


@pytest.mark.parametrize("name", list(families.FAMILIES))
def test_parity_float32(name):
    stock, patched, report, cache = _arms(name)
    rank = report.geometry.kv_lora_rank
    assert report.modules and report.threshold == mla.max_absorbed_queries(
        rank, report.geometry.qk_nope_head_dim, report.geometry.v_head_dim
    )
    cs, cp = copy.deepcopy(cache), copy.deepcopy(cache)
    s_counts, p_counts = mla.branch_counters(stock), mla.branch_counters(patched)
    s_counts.reset()
    p_counts.reset()
    n_mla = len(report.modules)
    for i, length in enumerate(WIDTHS):
        a, b = _step_both(stock, patched, cs, cp, length, seed=10 + i)
        assert mx.allclose(a, b, atol=F32_TOL, rtol=F32_TOL).item(), (
            f"L={length}: max |diff| {mx.abs(a - b).max().item():.3g}"
        )
        assert mx.array_equal(a.argmax(-1), b.argmax(-1)).item()
        if length == 1:
            assert mx.array_equal(a, b).item(), "L=1 takes the same branch in both arms"
        else:
            assert not mx.array_equal(a, b).item(), "L>=2 should take different branches"
        first_s, first_p = _first_mla_prefix(cs, rank), _first_mla_prefix(cp, rank)
        assert all(mx.array_equal(u, v).item() for u, v in zip(first_s, first_p, strict=True))
        for u, v in zip(
            [a for e in cs for a in _arrays(e)], [a for e in cp for a in _arrays(e)], strict=True
        ):
            assert u.shape == v.shape and mx.allclose(u, v, atol=F32_TOL, rtol=F32_TOL).item()
    assert p_counts.snapshot() == {"absorbed": {L: n_mla for L in WIDTHS}, "materialised": {}}
    assert s_counts.snapshot() == {
        "absorbed": {1: n_mla},
        "materialised": {L: n_mla for L in WIDTHS if L > 1},
    }


@pytest.mark.parametrize("name", ["deepseek_v3", "glm4_moe_lite"])
def test_parity_bf16(name):
    # dense MLP everywhere: CPU GatherMM (MoE) is float32-only
    stock, patched, report, cache = _arms(name, mx.bfloat16, first_k_dense_replace=8)
    cs, cp = copy.deepcopy(cache), copy.deepcopy(cache)
    for i, length in enumerate(WIDTHS):
        a, b = _step_both(stock, patched, cs, cp, length, seed=10 + i)
        a, b = a.astype(mx.float32), b.astype(mx.float32)
        bound = 8 * BF16_EPS * mx.abs(a).max().item()
        diff = mx.abs(a - b).max().item()
        assert diff <= bound, f"L={length}: {diff:.3g} > {bound:.3g}"
        if length == 1:
            assert diff == 0


def test_mistral4_string_mask_is_exercised():
    stock, patched, _, cache = _arms("mistral4")
    h = mx.zeros((1, 3, 8))
    assert create_attention_mask(h, cache[0]) == "causal"  # what Mistral4Model passes at L > 1
    cs, cp = copy.deepcopy(cache), copy.deepcopy(cache)
    a, b = _step_both(stock, patched, cs, cp, 3, seed=5)
    assert mx.allclose(a, b, atol=F32_TOL, rtol=F32_TOL).item()


# ---- parity, one attention module -----------------------------------------------------------


@pytest.mark.parametrize("name", ["deepseek_v3", "glm4_moe_lite", "deepseek_v32", "glm_moe_dsa"])
def test_module_cache_bitwise(name):
    model = build_model(name, layers=1)
    attn = mla.mla_modules(model)[0][1]
    gated = mla.twin(attn)
    mla.patch_model(gated)
    assert type(attn) is not type(gated)
    cache = make_prompt_cache(model)[0]
    hidden = model.args.hidden_size
    mx.random.seed(3)
    x0 = mx.random.normal((1, PROMPT_T, hidden))
    mx.eval(attn(x0, mask=create_causal_mask(PROMPT_T), cache=cache), cache.state)
    cs, cp = copy.deepcopy(cache), copy.deepcopy(cache)
    for length in WIDTHS:
        x = mx.random.normal((1, length, hidden))
        offset = (cs[0] if isinstance(cs, list) or hasattr(cs, "caches") else cs).offset
        mask = create_causal_mask(length, offset) if length > 1 else None
        a, b = attn(x, mask=mask, cache=cs), gated(x, mask=mask, cache=cp)
        mx.eval(a, b, cs.state, cp.state)
        assert mx.allclose(a, b, atol=F32_TOL, rtol=F32_TOL).item()
        assert (length == 1) == mx.array_equal(a, b).item()
        for u, v in zip(_arrays(cs), _arrays(cp), strict=True):
            assert mx.array_equal(u, v).item()


# ---- the sparse top-k gather guard ---------------------------------------------------------


def _length_eq_one_tests(fn) -> int:
    ins = list(dis.get_instructions(fn))
    return sum(
        a.opname == "LOAD_FAST"
        and a.argval == "L"
        and b.opname == "LOAD_CONST"
        and b.argval == 1
        and c.opname == "COMPARE_OP"
        and c.argval == "=="
        for a, b, c in zip(ins, ins[1:], ins[2:], strict=False)
    )


def test_sparse_gather_guard_untouched():
    stock_call = DeepseekV32Attention.__call__
    patched_call = mla.gated_class(DeepseekV32Attention).__call__
    assert _length_eq_one_tests(stock_call) == 3  # gather guard + the two MLA gates
    # the gather guard stays; the two MLA gates became one decision, which is handed the
    # installed condition (`L == 1`) once, for the installed policy to answer with
    assert _length_eq_one_tests(patched_call) == 2
    gated = [i.argval for i in dis.get_instructions(patched_call) if i.opname == "LOAD_FAST"].count(
        mla.ABSORBED_FLAG
    )
    assert gated == 2


@pytest.mark.parametrize("name", ["deepseek_v32", "glm_moe_dsa"])
def test_sparse_path_runs_and_matches(name):
    stock, patched, _, cache = _arms(name)
    topk = families.config_for(name)["index_topk"]
    assert PROMPT_T > topk
    dense = build_model(name, index_topk=4096)  # same seed: same weights, no top-k
    dense_cache = make_prompt_cache(dense)
    mx.random.seed(1)
    prompt = mx.random.randint(0, family_configs.VOCAB_TINY, (1, PROMPT_T))
    mx.eval(dense(prompt, cache=dense_cache))
    cs, cp = copy.deepcopy(cache), copy.deepcopy(cache)
    for i, length in enumerate((1, 3)):
        a, b = _step_both(stock, patched, cs, cp, length, seed=20 + i)
        mx.random.seed(20 + i)
        tokens = mx.random.randint(0, family_configs.VOCAB_TINY, (1, length))
        d = dense(tokens, cache=dense_cache)
        assert mx.abs(a - d).max().item() > 1e-3, "the sparse path did not change the output"
        assert mx.allclose(a, b, atol=F32_TOL, rtol=F32_TOL).item()


# ---- isolation and sharing ------------------------------------------------------------------


def test_patching_one_instance_leaves_others_stock():
    stock_call = DeepseekV3Attention.__call__
    a = build_model("deepseek_v3")
    b = build_model("deepseek_v3")  # same seed: same weights
    c = mla.twin(a)
    mla.patch_model(c)
    assert DeepseekV3Attention.__call__ is stock_call
    for m in (a, b):
        for _, attn in mla.mla_modules(m):
            assert type(attn) is DeepseekV3Attention
            assert type(attn).__call__ is stock_call
            assert "_mlatui_gate_state" not in attn.__dict__
        assert mla.branch_counters(m) is None
    ca, cb = make_prompt_cache(a), make_prompt_cache(b)
    mx.random.seed(1)
    prompt = mx.random.randint(0, family_configs.VOCAB_TINY, (1, PROMPT_T))
    mx.eval(a(prompt, cache=ca), b(prompt, cache=cb))
    step = mx.array([[1, 2, 3]])
    ya, yb = a(step, cache=ca), b(step, cache=cb)
    assert mx.array_equal(ya, yb).item()
    assert mla.branch_counters(c).total() == (0, 0)


def test_twin_shares_every_array():
    model = build_model("glm4_moe_lite")
    before = mx.get_active_memory()
    other = mla.twin(model)
    grown = mx.get_active_memory() - before
    mine, theirs = tree_flatten(model.parameters()), tree_flatten(other.parameters())
    assert [k for k, _ in mine] == [k for k, _ in theirs]
    assert all(x is y for (_, x), (_, y) in zip(mine, theirs, strict=True))
    model_bytes = sum(x.nbytes for _, x in mine)
    assert grown < model_bytes / 100
    assert other is not model and other.model.layers[0] is not model.model.layers[0]
    mla.patch_model(other)
    assert type(model.model.layers[0].self_attn) is not type(other.model.layers[0].self_attn)


# ---- fail closed -----------------------------------------------------------------------------


class NoGateAttention(DeepseekV3Attention):
    def __call__(self, x, mask=None, cache=None):
        return self.o_proj(x)


class UnknownGateAttention(DeepseekV3Attention):
    def __call__(self, x, mask=None, cache=None):
        q = x
        if x.shape[1] < 4:  # a gate on the query count, but in no form mlatui knows
            q = self.embed_q(q)
        return self.o_proj(q)


@pytest.mark.parametrize(
    "cls, says",
    [(NoGateAttention, "no MLA gate"), (UnknownGateAttention, "no known gate form")],
)
def test_patch_fails_closed_naming_file_and_line(cls, says):
    model = build_model("deepseek_v3", layers=1)
    cls.__module__ = "mlx_lm.models.deepseek_v3"  # looks like an mlx-lm class
    attn = mla.mla_modules(model)[0][1]
    attn.__class__ = cls
    with pytest.raises(mla.PatchError) as e:
        mla.patch_model(model)
    msg = str(e.value)
    assert "\n" not in msg and cls.__name__ in msg and says in msg
    assert re.search(r"test_mla\.py:\d+", msg)  # file:line of the unrecognised class or gate
    assert type(attn) is cls  # nothing was swapped


def test_bad_threshold_is_rejected():
    model = build_model("deepseek_v3", layers=1)
    with pytest.raises(ValueError):
        mla.patch_model(model, threshold="fast")
    with pytest.raises(ValueError):
        mla.patch_model(model, threshold=0)


def test_fixed_threshold_routes_wide_steps():
    stock, _, _, cache = _arms("deepseek_v3")
    other = mla.twin(stock)
    report = mla.patch_model(other, threshold=3)
    assert report.threshold == 3
    cp = copy.deepcopy(cache)
    counts = mla.branch_counters(other)
    for length in (2, 3, 4):
        mx.eval(other(mx.zeros((1, length), dtype=mx.int32), cache=cp))
    assert counts.snapshot() == {"absorbed": {2: 2, 3: 2}, "materialised": {4: 2}}


def test_quantized_model_patches(name="glm4_moe_lite"):
    stock = build_model(name, bits=4)
    assert isinstance(mla.mla_modules(stock)[0][1].q_b_proj, nn.QuantizedLinear)
    patched = mla.twin(stock)
    mla.patch_model(patched)
    cache = make_prompt_cache(stock)
    mx.eval(stock(mx.arange(PROMPT_T)[None] % family_configs.VOCAB_TINY, cache=cache))
    cs, cp = copy.deepcopy(cache), copy.deepcopy(cache)
    a, b = _step_both(stock, patched, cs, cp, 3, seed=7)
    assert mx.allclose(a, b, atol=F32_TOL, rtol=F32_TOL).item()
