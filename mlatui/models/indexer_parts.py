"""Both arms of one indexer-bench part (indexer or sparse layer) at one context, random weights.

Also the rewind that puts a cache back at its context after each sample (mlatui.bench.indexer's
docstring says why that is exact).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import mlx.core as mx

from mlatui.config.gate_settings import IndexerMode
from mlatui.gate.policy import DEFAULT_GATES, STOCK_GATES, FormulaPolicy, Gates
from mlatui.models.indexer import Indexer, IndexerCache, SparseMLAConfig
from mlatui.models.sparse_mla import SparseMLACache, SparseMLAttention
from mlatui.stream.events import ARMS

INPUTS_PER_WIDTH = 4  # distinct inputs per width, cycled; the k-th sample is the same in both arms
# What each slot runs: its gates (the MLA gate's policy object and the indexer pooling). The
# engine's phase passes its arms' own (an A/A pass gives both slots the same).
Modes = dict[str, Gates]
DEFAULT_MODES: Modes = {"stock": STOCK_GATES, "patched": DEFAULT_GATES}


@dataclass
class Part:
    """Both arms of one part at one context, ready to step."""

    name: str
    context: int
    caches: dict[str, Any]  # arm -> IndexerCache | SparseMLACache
    index: Callable[[Any], IndexerCache]  # the indexer cache inside an arm's cache
    set_mode: Callable[[str], None]
    forward: Callable[[str, int, int], Any]  # (arm, width, input number) -> arrays to sync


def _random_index(
    config: SparseMLAConfig, context: int, dtype: mx.Dtype
) -> tuple[mx.array, mx.array]:
    shape = (1, config.index_n_heads, context, config.index_head_dim)  # (B, H, T, D)
    keys = mx.random.normal(shape).astype(dtype)
    gates = mx.random.normal(shape[:3]).astype(dtype)  # (B, H, T)
    mx.eval(keys, gates)
    return keys, gates


def _inputs(
    config: SparseMLAConfig, width: int, dtype: mx.Dtype, seed: int
) -> tuple[mx.array, mx.array]:
    key = mx.random.key(seed)
    x = (mx.random.normal((1, width, config.hidden_size), key=key)).astype(dtype)  # (B, S, hidden)
    qr = mx.random.normal((1, width, config.q_lora_rank or config.hidden_size), key=key).astype(
        dtype
    )
    mx.eval(x, qr)
    return x, qr


def rewind(cache: Any, index: IndexerCache, length: int) -> None:
    """Undo the last step's append and mark the pool as covering `length` tokens again: its
    complete windows below the last boundary are those of the first `length` tokens, and the
    window holding the boundary is re-pooled from its start by the next step (why that is exact:
    mlatui.bench.indexer's docstring)."""
    if index.pool_length < length or cache.offset < length:
        raise RuntimeError(
            f"cannot rewind to {length}: cache at {cache.offset}, pool at {index.pool_length}"
        )
    cache.trim(cache.offset - length)  # a SparseMLACache trims its indexer cache too
    index.pool_length = length


def indexer_part(
    config: SparseMLAConfig,
    context: int,
    widths: Sequence[int],
    dtype: mx.Dtype,
    seed: int,
    modes: Modes,
) -> Part:
    mx.random.seed(seed)
    ix = Indexer(config)
    ix.set_dtype(dtype)
    mx.eval(ix.parameters())
    keys, gates = _random_index(config, context, dtype)
    base = IndexerCache()
    base.fill(keys, gates, max(widths) + 256)
    del keys, gates
    ix.mode = IndexerMode.PATCHED
    first = ix(*_inputs(config, 1, dtype, seed), base)  # builds the pool once
    mx.eval(first, base.keys, base.gates, base.pooled)
    rewind(base, base, context)
    caches = {arm: base.copy() for arm in ARMS}  # both slots copies: neither owns the original
    del base
    for c in caches.values():
        mx.eval(c.keys, c.gates, c.pooled)
    inputs = {
        w: [_inputs(config, w, dtype, seed + 1 + i) for i in range(INPUTS_PER_WIDTH)]
        for w in widths
    }

    def set_mode(arm: str) -> None:
        ix.mode = modes[arm].indexer

    def forward(arm: str, width: int, i: int) -> Any:
        cache = caches[arm]
        sel = ix(*inputs[width][i], cache)
        return sel, cache.keys, cache.gates, cache.pooled

    return Part("indexer", context, caches, lambda c: c, set_mode, forward)


def layer_part(
    config: SparseMLAConfig,
    context: int,
    widths: Sequence[int],
    dtype: mx.Dtype,
    seed: int,
    modes: Modes,
) -> Part:
    """Whole layer, each slot with its (MLA gate, indexer mode): by default stock = (stock,
    stock), patched = (formula, patched)."""
    mx.random.seed(seed)
    layer = SparseMLAttention(config)
    layer.set_dtype(dtype)
    mx.eval(layer.parameters())
    keys, gates = _random_index(config, context, dtype)
    latent = mx.random.normal((1, 1, context, config.kv_lora_rank)).astype(dtype)  # (B, 1, T, r)
    pe = None
    if config.qk_rope_head_dim:
        pe = mx.random.normal((1, 1, context, config.qk_rope_head_dim)).astype(
            dtype
        )  # (B, 1, T, rope)
    base = SparseMLACache()
    base.fill(latent, keys, gates, pe, max(widths) + 256)
    del keys, gates, latent, pe
    x0 = mx.random.normal((1, 1, config.hidden_size)).astype(dtype)
    layer.set_modes(FormulaPolicy(), IndexerMode.PATCHED)
    mx.eval(layer(x0, cache=base), base.latent, base.index.keys, base.index.pooled)  # pool once
    rewind(base, base.index, context)
    caches = {arm: base.copy() for arm in ARMS}  # both slots copies: neither owns the original
    del base
    for c in caches.values():
        mx.eval(c.latent, c.index.keys, c.index.pooled)
    xs = {
        w: [
            mx.random.normal((1, w, config.hidden_size), key=mx.random.key(seed + 1 + i)).astype(
                dtype
            )  # (B, L, hidden)
            for i in range(INPUTS_PER_WIDTH)
        ]
        for w in widths
    }
    masks = {
        w: caches["stock"].make_mask(w, return_array=True) for w in widths
    }  # every sample is at context
    mx.eval(xs, [m for m in masks.values() if isinstance(m, mx.array)])

    def set_mode(arm: str) -> None:
        layer.set_modes(modes[arm].policy, modes[arm].indexer)

    def forward(arm: str, width: int, i: int) -> Any:
        cache = caches[arm]
        y = layer(xs[width][i], mask=masks[width], cache=cache)
        out = [y, cache.latent, cache.index.keys, cache.index.pooled]
        return out if cache.pe is None else [*out, cache.pe]

    return Part("sparse-layer", context, caches, lambda c: c.index, set_mode, forward)
