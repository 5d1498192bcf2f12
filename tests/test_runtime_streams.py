"""A decode block waits for every stream it used before it hands back: mlx-lm's generators leave
their next step in flight on `generation_stream` (their own, thread-local stream), and a sync of
the default stream alone let that step's time land in the other arm's block."""

from __future__ import annotations

import mlx.core as mx
import pytest
from mlx_lm.generate import generation_stream
from mlx_lm.models.cache import make_prompt_cache

from mlatui.run import decode_stream
from mlatui.run.decode_stream import Block, ModelCache, Sampling
from tests.random_models import build_model

CONTEXT = [3, 1, 4, 1, 5, 9, 2, 6]
DEFAULT = "default stream"


@pytest.fixture
def synced(monkeypatch) -> list:
    """Every stream `mx.synchronize` is asked to wait for, in order."""
    seen: list = []
    real = mx.synchronize

    def synchronize(stream=None):
        seen.append(DEFAULT if stream is None else stream)
        return real() if stream is None else real(stream)

    monkeypatch.setattr(mx, "synchronize", synchronize)
    return seen


def prefilled(seed: int) -> ModelCache:
    model = build_model("deepseek_v3", layers=1, seed=seed)
    cache = make_prompt_cache(model)
    mx.eval(model(mx.array([CONTEXT]), cache=cache), [c.state for c in cache])  # (1, T, V)
    return ModelCache(model, cache)


def syncs_both(seen: list) -> bool:
    return DEFAULT in seen and any(s is generation_stream for s in seen)


def test_a_plain_block_syncs_the_default_and_mlx_lm_generation_stream(synced):
    target = prefilled(0)
    synced.clear()
    result = decode_stream.plain_block(target.model, target.cache, CONTEXT[-1], 4, Sampling())
    assert len(result.tokens) == 4 and result.ms > 0
    assert syncs_both(synced), synced


def test_a_draft_model_block_syncs_both_streams_the_target_and_draft_ran_on(synced):
    target, draft = prefilled(0), prefilled(1)
    synced.clear()
    sampler = Sampling().sampler()
    result = decode_stream.draft_model_block(target, draft, Block(CONTEXT[-1], 4, depth=2), sampler)
    assert len(result.tokens) == 4 and result.steps
    assert syncs_both(synced), synced
