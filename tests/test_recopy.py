"""Fresh cache copies between rounds: bit-identical state in new arrays, the list kept."""

from __future__ import annotations

import mlx.core as mx
from mlx_lm.models.cache import KVCache

from mlatui.run.arms import recopy_enabled, recopy_in_place


def test_recopy_in_place_gives_identical_state_in_new_arrays_and_keeps_the_list():
    cache = [KVCache() for _ in range(3)]
    for c in cache:
        c.update_and_fetch(mx.random.normal((1, 2, 5, 8)), mx.random.normal((1, 2, 5, 8)))
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


def test_recopy_can_be_switched_off_for_diagnosis(monkeypatch):
    assert recopy_enabled()
    monkeypatch.setenv("MLATUI_RECOPY", "off")
    assert not recopy_enabled()
