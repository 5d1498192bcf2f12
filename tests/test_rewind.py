"""A timed step undone on any cache: trimmable layers trimmed, hybrid (linear-attention) layers
and mlx-vlm's pooling caches restored, so every later step sees exactly the state before."""

import copy

import mlx.core as mx
import pytest
import vlm_sources
from mlx_lm.models.cache import make_prompt_cache
from random_models import vlm_config

from mlatui.models import family_configs, vlm
from mlatui.models.mx_typed import before_step
from tests.random_models import build_model


@pytest.fixture(scope="session")
def vlm_dir(tmp_path_factory):
    return tmp_path_factory.getbasetemp() / "vlm"


def _undone_steps_leave_no_trace(model, cache):
    """Steps of width 3 undone twice, then a step of width 2: the same logits as the width-2
    step on an untouched copy of the cache."""
    mx.random.seed(4)
    mx.eval(model(mx.random.randint(0, family_configs.VOCAB_TINY, (1, 70)), cache=cache))
    untouched = copy.deepcopy(cache)
    outputs = []
    for _ in range(2):
        rewind = before_step(cache)
        outputs.append(model(mx.array([[5, 6, 7]]), cache=cache))
        mx.eval(outputs[-1])
        rewind(3)
    assert mx.array_equal(*outputs).item()
    later, reference = (
        model(mx.array([[8, 9]]), cache=cache),
        model(mx.array([[8, 9]]), cache=untouched),
    )
    mx.eval(later, reference)
    assert mx.array_equal(later, reference).item()


@pytest.mark.parametrize("family", ["deepseek_v3", "kimi_linear"])
def test_a_step_is_undone_bit_for_bit(family):
    model = build_model(family)
    _undone_steps_leave_no_trace(model, make_prompt_cache(model))


def test_without_the_snapshot_a_hybrid_state_moves_on():
    model = build_model("kimi_linear")
    cache = make_prompt_cache(model)
    mx.eval(model(mx.arange(40)[None] % family_configs.VOCAB_TINY, cache=cache))
    step = mx.array([[5, 6, 7]])
    first = model(step, cache=cache)
    mx.eval(first)
    for layer in cache:  # what trimming alone can do: the attention layers go back, KDA cannot
        if layer.is_trimmable():
            layer.trim(3)
    second = model(step, cache=cache)
    mx.eval(second)
    assert not mx.array_equal(first, second).item()


@pytest.mark.parametrize("version", vlm_sources.VERSIONS)
def test_mlx_vlm_glm5_next_caches_are_restored(version, vlm_dir):
    source = vlm_sources.source(version, vlm_dir)
    model = vlm.language_model(vlm_config("glm5_next"), source)
    mx.eval(model.parameters())
    _undone_steps_leave_no_trace(model, model.make_cache())
