"""The compiled arm (`--arms installed,compiled`): mlatui's own absorbed attention built with
mx.compile equals the runtime's absorbed branch within dtype tolerance, for every family whose
attention has the DeepSeek-V3 form; other families fail closed; the formula gates it and the
arm's branch counters count it."""

import mlx.core as mx
import pytest
from mlx_lm.models.base import create_causal_mask
from mlx_lm.models.cache import make_prompt_cache

from mlatui.bench.attention import random_cache
from mlatui.config.arm_settings import Threshold, ThresholdKind, parse_arms
from mlatui.gate import mla
from mlatui.gate.mla import COMPILED_KEY, unsupported
from mlatui.gate.policy import CompiledPolicy, ForcedPolicy, Gates, Variant
from mlatui.models import families
from tests.random_models import build_model

F32_TOL = 1e-4  # as tests/test_mla.py: same sums, another order
BF16_EPS = 2.0**-8
COMPILED_FAMILIES = {
    "deepseek_v3",
    "kimi_k2",
    "kimi_vl",
    "kimi_k25",
    "glm4_moe_lite",
    "kimi_linear",
    "kimi_k3",
    "longcat_flash",
    "longcat_flash_ngram",
}


def first_attention(name, bits=None, dtype=mx.float32):
    model = build_model(name, "tiny", bits=bits, dtype=dtype)
    return mla.mla_modules(model)[0][1]


def hidden_input(attn, width, dtype):
    hidden = attn.kv_a_proj_with_mqa.weight.shape[-1]
    if hasattr(attn.kv_a_proj_with_mqa, "bits"):  # packed: 32 // bits values per uint32
        hidden = hidden * 32 // attn.kv_a_proj_with_mqa.bits
    mx.random.seed(width)
    return mx.random.normal((1, width, hidden)).astype(dtype)


def test_which_families_have_a_compiled_path():
    supported = {
        name for name in families.FAMILIES if unsupported(type(first_attention(name))) is None
    }
    assert supported == COMPILED_FAMILIES


@pytest.mark.parametrize(
    "name,bits,dtype",
    [
        ("glm4_moe_lite", None, mx.float32),
        ("glm4_moe_lite", 4, mx.float32),
        ("glm4_moe_lite", None, mx.bfloat16),
        ("deepseek_v3", None, mx.float32),
        ("longcat_flash", None, mx.float32),
        ("kimi_linear", None, mx.float32),
        ("longcat_flash_ngram", 4, mx.float32),
    ],
)
def test_compiled_equals_the_runtimes_absorbed_branch(name, bits, dtype):
    attn = first_attention(name, bits, dtype)
    runtime = mla.twin(attn)
    mla.patch_model(runtime, ForcedPolicy(True))
    compiled = mla.twin(attn)
    report = mla.patch_model(compiled, CompiledPolicy())
    for context in (40, 97):  # one shapeless trace per width serves every cache length
        for width in (2, 3):
            x = hidden_input(attn, width, dtype)
            mask = create_causal_mask(width, context)
            want = runtime(x, mask=mask, cache=random_cache(attn, context, dtype=dtype))
            got = compiled(x, mask=mask, cache=random_cache(attn, context, dtype=dtype))
            scale = float(mx.abs(want.astype(mx.float32)).max().item())
            tol = F32_TOL if dtype == mx.float32 else 8 * BF16_EPS * scale
            assert got.shape == want.shape
            assert float(mx.abs((got - want).astype(mx.float32)).max().item()) <= tol
    assert list(compiled.__dict__[COMPILED_KEY].attend) == [(2, True), (3, True)]
    assert report.policy == "compiled"
    assert report.counters.snapshot() == {"absorbed": {2: 2, 3: 2}, "materialised": {}}


def test_formula_gates_the_compiled_arm_and_counters_count_it():
    attn = first_attention("deepseek_v3")
    compiled = mla.twin(attn)
    report = mla.patch_model(compiled, "compiled")
    # a cold cache of 8 tokens: the formula's limit there is 7, so L = 8 materialises
    assert report.counters.snapshot() == {"absorbed": {}, "materialised": {}}
    compiled(hidden_input(attn, 8, mx.float32), mask=create_causal_mask(8, 0), cache=None)
    compiled(hidden_input(attn, 1, mx.float32), mask=None, cache=random_cache(attn, 20))
    assert report.counters.snapshot() == {"absorbed": {1: 1}, "materialised": {8: 1}}
    assert COMPILED_KEY not in compiled.__dict__  # L = 1 runs the runtime's own branch
    compiled(
        hidden_input(attn, 2, mx.float32),
        mask=create_causal_mask(2, 20),
        cache=random_cache(attn, 20),
    )
    assert report.counters.absorbed[2] == 1 and COMPILED_KEY in compiled.__dict__
    assert COMPILED_KEY not in mla.twin(compiled).__dict__  # a twin compiles its own


@pytest.mark.parametrize("name", ["mistral4", "deepseek_v32"])
def test_other_attention_forms_fail_closed(name):
    model = build_model(name, "tiny")
    with pytest.raises(mla.PatchError, match=r"\.py:\d+: the compiled arm runs DeepSeek-V3-form"):
        mla.patch_model(model, "compiled")


def test_compiled_parses_as_an_arm():
    assert Threshold.parse("compiled") == Threshold(ThresholdKind.COMPILED)
    assert parse_arms("installed,compiled") == (
        Threshold(ThresholdKind.INSTALLED),
        Threshold(ThresholdKind.COMPILED),
    )
    gates = Gates.parse("compiled", None, "installed")
    assert gates.for_variant(Variant.PATCHED).policy.compiled
    assert not gates.for_variant(Variant.STOCK).policy.compiled


def test_the_engines_arms_installed_and_compiled():
    from mlatui.run.arms import build_arms

    model = build_model("glm4_moe_lite", "tiny")
    stock, patched = build_arms(model, Gates.parse("compiled", None, "installed"))
    assert (stock.report.policy, patched.report.policy) == ("installed", "compiled")
    attn = mla.mla_modules(patched.model)[0][1]
    cache = make_prompt_cache(patched.model)
    patched.model(mx.zeros((1, 32), dtype=mx.int32), cache=cache)  # a cold cache materialises
    patched.model(mx.zeros((1, 2), dtype=mx.int32), cache=cache)
    assert patched.counters.snapshot() == {"absorbed": {2: 2}, "materialised": {32: 2}}
    assert stock.counters.total() == (0, 0) and COMPILED_KEY in attn.__dict__
