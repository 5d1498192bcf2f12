"""mlx-vlm's MLA families, 0.7.10 (fixed) and 0.6.17 (pre-fix): each arm of the gate patch
against the installed code, as tests/test_mla.py checks mlx-lm's.

On pre-fix code the policy arm is `formula`; on fixed code it is `pre-fix` (the counterfactual).
L = 1 takes the same branch in both, so the logits are bit-identical; at L = 2-8 the branches
differ and agree within test_mla.py's tolerance. The `installed` arm (the runtime's own condition,
counted) is bit-identical to the uninstrumented model at every width, and so is the `formula` arm
on 0.7.10, whose cache-aware gate is the formula.
"""

import copy

import mlx.core as mx
import pytest
import vlm_sources
from random_models import vlm_config
from test_mla import F32_TOL, PROMPT_T, WIDTHS

from mlatui.gate import mla
from mlatui.models import families, family_configs, vlm

# 0.6.17 runs two families by default (a dense and the pre-fix sparse glm5_next), all with -m slow
DEFAULT_PRE_FIX = ("deepseek_v3", "glm5_next")
CASES = [
    pytest.param(
        version,
        name,
        marks=() if version == vlm_sources.CURRENT or name in DEFAULT_PRE_FIX else pytest.mark.slow,
    )
    for version in vlm_sources.VERSIONS
    for name, fam in families.VLM_FAMILIES.items()
    if version in fam.versions
]


@pytest.fixture(scope="session")
def vlm_dir(tmp_path_factory):
    return tmp_path_factory.getbasetemp() / "vlm"


def _build(version, name, vlm_dir):
    source = vlm_sources.source(version, vlm_dir)
    mx.random.seed(0)
    model = vlm.language_model(vlm_config(name), source)
    model.set_dtype(mx.float32)
    model.eval()
    mx.eval(model.parameters())
    return model


def _prefilled(model):
    cache = model.make_cache()
    mx.random.seed(1)
    prompt = mx.random.randint(0, family_configs.VOCAB_TINY, (1, PROMPT_T))
    mx.eval(model(prompt, cache=cache), [c.state for c in cache])
    return cache


@pytest.mark.parametrize("version,name", CASES)
def test_each_arm_against_the_installed_code(version, name, vlm_dir):
    stock = _build(version, name, vlm_dir)
    installed, arm, formula = mla.twin(stock), mla.twin(stock), mla.twin(stock)
    installed_report = mla.patch_model(installed, "installed")
    fixed = installed_report.installed_fixed
    assert fixed == (families.VLM_FAMILIES[name].fixed_from == version == vlm_sources.CURRENT)
    report = mla.patch_model(arm, "pre-fix" if fixed else "formula")
    mla.patch_model(formula, "formula")
    # mlx-vlm 0.7.10's cache-aware gate is the formula itself (glm5_next gates on its decode block)
    formula_is_installed = fixed and name != "glm5_next"
    n_mla = len(report.modules)
    assert n_mla >= 1 and report.geometry.kv_lora_rank == 512
    cache = _prefilled(stock)
    caches = [copy.deepcopy(cache) for _ in range(4)]
    for i, length in enumerate(WIDTHS):
        mx.random.seed(10 + i)
        tokens = mx.random.randint(0, family_configs.VOCAB_TINY, (1, length))
        models = (stock, installed, arm, formula)
        s, n, a, f = (m(tokens, cache=c) for m, c in zip(models, caches, strict=True))
        mx.eval(s, n, a, f, [c.state for cs in caches for c in cs])
        assert mx.array_equal(s, n).item(), (
            f"L={length}: the installed arm is not the installed code"
        )
        if formula_is_installed:
            assert mx.array_equal(s, f).item(), f"L={length}: formula arm != mlx-vlm's own gate"
        diff = mx.abs(s - a).max().item()
        assert diff <= F32_TOL, f"L={length}: max |diff| {diff:.3g}"
        assert mx.array_equal(s.argmax(-1), a.argmax(-1)).item()
        if length == 1:
            assert diff == 0, "L=1 takes the same branch in both arms"
        else:
            assert diff > 0, "L>=2 should take different branches"
    counts = mla.branch_counters(arm).snapshot()
    installed_counts = mla.branch_counters(installed).snapshot()
    every = {L: n_mla for L in WIDTHS}
    prefix = {"absorbed": {1: n_mla}, "materialised": {L: n_mla for L in WIDTHS if L > 1}}
    absorbing = {"absorbed": every, "materialised": {}}
    assert counts == (prefix if fixed else absorbing)
    assert installed_counts == (absorbing if fixed else prefix)
