"""What the sampler does to the arms' caches between rounds (mlatui.run.arms.CacheRounds): by
default the arms exchange their caches (each buffer then serves both arms); `copy` gives each
arm bit-identical fresh copies; `off` keeps one copy per context."""

from __future__ import annotations

import mlx.core as mx
import pytest
from mlx_lm.models.cache import KVCache
from tiny_scenario import tiny_with_phase

import mlatui.run.phases.base as base
from mlatui.config.run_plan import RunConfig
from mlatui.run.arms import CacheRounds, cache_rounds, recopy_in_place, swap_caches
from mlatui.stream.events import PhaseSummary, Step
from tests.engine_run import run


def _cache(n: int = 3, tokens: int = 5) -> list[KVCache]:
    cache = [KVCache() for _ in range(n)]
    for c in cache:
        c.update_and_fetch(mx.random.normal((1, 2, tokens, 8)), mx.random.normal((1, 2, tokens, 8)))
    return cache


def test_recopy_in_place_gives_identical_state_in_new_arrays_and_keeps_the_list():
    cache = _cache()
    before = [(mx.array(c.keys), mx.array(c.values)) for c in cache]
    originals = list(cache)
    ids = [id(c) for c in cache]
    the_list = cache
    recopy_in_place(cache)
    assert cache is the_list  # the model is handed the same list every step
    assert all(id(c) != i for c, i in zip(cache, ids, strict=True))
    for c, old in zip(cache, before, strict=True):
        assert c.offset == 5
        assert mx.array_equal(c.keys, old[0]).item() and mx.array_equal(c.values, old[1]).item()
    # the copies are independent: writing one leaves the original's values alone
    cache[0].update_and_fetch(mx.zeros((1, 2, 1, 8)), mx.zeros((1, 2, 1, 8)))
    assert cache[0].offset == 6 and originals[0].offset == 5
    assert mx.array_equal(originals[0].keys, before[0][0]).item()


def test_swap_caches_exchanges_the_layers_and_keeps_both_lists():
    a, b = _cache(), _cache()
    la, lb = list(a), list(b)
    ids = (id(a), id(b))
    swap_caches(a, b)
    assert (id(a), id(b)) == ids  # each model keeps the list it is handed
    assert all(x is y for x, y in zip(a, lb, strict=True))
    assert all(x is y for x, y in zip(b, la, strict=True))
    with pytest.raises(ValueError, match="different models"):
        swap_caches(a, _cache(2))


def test_the_mode_defaults_to_swap_and_a_bad_value_says_what_to_use(monkeypatch):
    monkeypatch.delenv("MLATUI_CACHE_ROUNDS", raising=False)
    assert cache_rounds() is CacheRounds.SWAP
    for v in ("copy", "OFF ", "swap"):
        monkeypatch.setenv("MLATUI_CACHE_ROUNDS", v)
        assert cache_rounds().value == v.strip().lower()
    monkeypatch.setenv("MLATUI_CACHE_ROUNDS", "fresh")
    with pytest.raises(ValueError) as e:
        cache_rounds()
    assert "use swap (the default), copy or off" in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("mode", ["swap", "copy"])
def test_a_real_sweep_hands_each_arm_the_other_arms_buffers_every_round(
    tmp_path, monkeypatch, mode
):
    """A tiny sweep (one context, several rounds): with swap the layer objects each arm holds
    alternate between two sets, each held by both arms in turn, and the figures are those of a
    normal run (both arms' steps at every width, the L = 1 check decided); with copy every round
    brings new layer objects."""
    monkeypatch.setenv("MLATUI_CACHE_ROUNDS", mode)
    phase = (
        'name = "sweep"\nkind = "sweep"\ncontexts = [64]\nwidths = [1, 2]\nreps = 4\nwarmup = 1\n'
    )
    path = tiny_with_phase(tmp_path / "s.toml", phase)
    held: list[tuple[list, list]] = []  # the layer objects (kept alive: no id is reused)
    hook = base.cache_rounds_hook

    def recording_hook(ctx, recopy):
        inner = hook(ctx, recopy)

        def between(r):
            inner(r)
            held.append(tuple(list(ctx.workers[n].arm.caches) for n in ("stock", "patched")))

        return between

    monkeypatch.setattr(base, "cache_rounds_hook", recording_hook)
    events = []
    assert run(RunConfig(scenario=str(path), random_weights=True), events.append) == "completed"
    assert len(held) >= 3
    ids = [tuple(frozenset(map(id, layers)) for layers in pair) for pair in held]
    if mode == "swap":
        assert len({s for pair in ids for s in pair}) == 2  # two buffer sets, no new ones
        for (s0, p0), (s1, p1) in zip(ids, ids[1:], strict=False):
            assert s0 == p1 and p0 == s1  # exchanged every round
    else:
        for (s0, p0), (s1, p1) in zip(ids, ids[1:], strict=False):
            assert not ((s0 | p0) & (s1 | p1))  # new objects every round
    steps = [e for e in events if isinstance(e, Step)]
    assert {(s.arm, s.width) for s in steps} == {
        (a, w) for a in ("stock", "patched") for w in (1, 2)
    }
    summary = next(e for e in events if isinstance(e, PhaseSummary))
    assert summary.rows
    header = next(e for e in events if e.type == "header")
    assert header.settings.cache_rounds == mode
