"""Sparse MLA attention (GLM-5.3-Flash style) around the pooled-window indexer.

Shaped like mlx-lm's MLA attention modules (`__call__(x, mask=None, cache=None)`, checkpoint
attribute names q_a_proj/q_a_layernorm/q_b_proj, kv_a_proj_with_mqa, kv_a_layernorm, embed_q,
unembed_out, o_proj, indexer.*). Two independent switches:
  gate_policy   the run's one `gate_policy.GatePolicy` (stock, formula, fixed, calibrated), the
                same object the dense layers hold, asked about the tokens actually attended
                (the selected ones).
  indexer.mode  "stock": pool cache reused only when S == 1; "patched": any S, guarded.

Both arms of one indexer-bench part (the indexer alone, or the whole sparse layer) at one
context, random weights, and the rewind that puts a cache back at its context after each
sample (mlatui.bench.indexer's docstring says why that is exact): `indexer_part`, `layer_part`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import mlx.core as mx
import mlx.nn as nn
from mlx_lm.models.base import create_causal_mask
from mlx_lm.models.cache import _BaseCache, create_attention_mask
from mlx_lm.models.mla import MultiLinear
from mlx_lm.models.rope_utils import initialize_rope

from mlatui.config.arm_settings import IndexerMode
from mlatui.gate.mla import BranchCounters
from mlatui.gate.policy import (
    DEFAULT_GATES,
    STOCK_GATES,
    FormulaPolicy,
    GatePolicy,
    Gates,
    Geometry,
)
from mlatui.measure.sampler import timed_ms
from mlatui.models.indexer import (
    INDEXER_MODES,
    Indexer,
    IndexerCache,
    Selected,
    SparseMLAConfig,
)
from mlatui.stream.events import ARMS

__all__ = ["SparseMLAConfig", "SparseMLAttention", "SparseMLACache", "INDEXER_MODES"]


def _policy(policy: GatePolicy) -> GatePolicy:
    if not isinstance(policy, GatePolicy):
        raise TypeError(f"a sparse layer's gate is a gate_policy.GatePolicy, got {policy!r}")
    return policy


class SparseMLACache(_BaseCache):
    """Latent (and RoPE key) cache plus the indexer's cache. Trimmable like mlx-lm's KVCache:
    `trim` only moves the offset; the indexer pool notices the shorter cache on the next step
    and rebuilds once."""

    step = 256

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        self.latent: mx.array | None = None  # (B, 1, cap, r)
        self.pe: mx.array | None = None  # (B, 1, cap, rope); None when rope == 0
        self.offset = 0
        self.index = IndexerCache()

    def update_and_fetch(
        self, latent: mx.array, pe: mx.array | None = None
    ) -> tuple[mx.array, mx.array | None]:
        B, _, S, r = latent.shape
        prev = self.offset
        held_l, held_p = self.latent, self.pe
        if held_l is None or prev + S > held_l.shape[2]:
            cap = (prev + S + self.step - 1) // self.step * self.step
            new_l = mx.zeros((B, 1, cap, r), latent.dtype)
            new_p = None if pe is None else mx.zeros((B, 1, cap, pe.shape[-1]), pe.dtype)
            if held_l is not None and prev:
                new_l[:, :, :prev] = held_l[:, :, :prev]
                if new_p is not None and held_p is not None:
                    new_p[:, :, :prev] = held_p[:, :, :prev]
            self.latent, self.pe = held_l, held_p = new_l, new_p
        self.offset = prev + S
        held_l[:, :, prev : self.offset] = latent
        if pe is not None and held_p is not None:
            held_p[:, :, prev : self.offset] = pe
        pe_all = None if held_p is None else held_p[:, :, : self.offset]
        return held_l[:, :, : self.offset], pe_all

    def fill(
        self,
        latent: mx.array,
        index_keys: mx.array,
        index_gates: mx.array,
        pe: mx.array | None = None,
        reserve: int = 0,
    ) -> None:
        """Start from a long context without running the layer over it: latent (B, 1, T, r),
        index keys (B, H, T, D), gates (B, H, T); room for `reserve` more tokens so timed steps
        never reallocate. For benchmarks and tests."""
        B, _, T, r = latent.shape
        cap = (T + reserve + self.step - 1) // self.step * self.step
        self.latent = mx.zeros((B, 1, cap, r), latent.dtype)
        self.pe = None if pe is None else mx.zeros((B, 1, cap, pe.shape[-1]), pe.dtype)
        self.offset = 0
        self.update_and_fetch(latent, pe)
        self.index.fill(index_keys, index_gates, reserve)

    def size(self) -> int:
        return self.offset

    def empty(self) -> bool:
        return self.latent is None

    def is_trimmable(self) -> bool:
        return True

    def trim(self, n: int) -> int:
        n = min(self.offset, n)
        self.offset -= n
        self.index.trim(n)
        return n

    def make_mask(self, N: int, return_array: bool = False, window_size: int | None = None):
        return create_attention_mask(N, self.offset, return_array, window_size)

    @property
    def state(self) -> tuple:
        if self.latent is None:
            return ()
        t = self.offset
        pe = self.pe[:, :, :t] if self.pe is not None else mx.zeros((0,))
        keys, gates = self.index.held(t)
        return (self.latent[:, :, :t], pe, keys, gates)

    @state.setter
    def state(self, v: tuple) -> None:
        self._reset()
        if not v:
            return
        latent, pe, keys, gates = v
        self.update_and_fetch(latent, pe if pe.size else None)
        self.index.append(keys, gates)

    @property
    def nbytes(self) -> int:
        own = sum(a.nbytes for a in (self.latent, self.pe) if a is not None)
        return own + self.index.nbytes

    def copy(self) -> SparseMLACache:
        """An independent cache with the same contents (arms start from bit-identical caches)."""
        new = SparseMLACache.__new__(SparseMLACache)
        new.offset = self.offset
        new.latent = None if self.latent is None else mx.array(self.latent)
        new.pe = None if self.pe is None else mx.array(self.pe)
        new.index = self.index.copy()
        return new


class SparseMLAttention(nn.Module):
    def __init__(
        self,
        config: SparseMLAConfig,
        gate_policy: GatePolicy | None = None,
        indexer_mode: str = "patched",
    ):
        super().__init__()
        self.config = config
        self.gate_policy = _policy(gate_policy or FormulaPolicy())
        self.counters: BranchCounters | None = None
        self.hidden_size = config.hidden_size
        self.num_heads = config.num_attention_heads
        self.q_lora_rank = config.q_lora_rank
        self.kv_lora_rank = config.kv_lora_rank
        self.qk_nope_head_dim = config.qk_nope_head_dim
        self.qk_rope_head_dim = config.qk_rope_head_dim
        self.v_head_dim = config.v_head_dim
        self.q_head_dim = config.qk_nope_head_dim + config.qk_rope_head_dim
        self.scale = self.q_head_dim**-0.5
        bias = config.attention_bias

        if self.q_lora_rank:
            self.q_a_proj = nn.Linear(self.hidden_size, self.q_lora_rank, bias=bias)
            self.q_a_layernorm = nn.RMSNorm(self.q_lora_rank, eps=config.rms_norm_eps)
            self.q_b_proj = nn.Linear(
                self.q_lora_rank, self.num_heads * self.q_head_dim, bias=False
            )
        else:
            self.q_proj = nn.Linear(self.hidden_size, self.num_heads * self.q_head_dim, bias=False)
        self.kv_a_proj_with_mqa = nn.Linear(
            self.hidden_size, self.kv_lora_rank + self.qk_rope_head_dim, bias=bias
        )
        self.kv_a_layernorm = nn.RMSNorm(self.kv_lora_rank, eps=config.rms_norm_eps)
        self.embed_q = MultiLinear(self.qk_nope_head_dim, self.kv_lora_rank, self.num_heads)
        self.unembed_out = MultiLinear(self.kv_lora_rank, self.v_head_dim, self.num_heads)
        self.o_proj = nn.Linear(self.num_heads * self.v_head_dim, self.hidden_size, bias=bias)
        self.indexer = Indexer(config, indexer_mode)
        if self.qk_rope_head_dim:
            # the same rope and softmax scale as mlx-lm's deepseek_v3 layers beside it
            self.rope = initialize_rope(
                dims=self.qk_rope_head_dim,
                base=config.rope_theta,
                traditional=True,
                max_position_embeddings=config.max_position_embeddings,
                scaling_config=config.rope_scaling,
            )
            scaling = config.rope_scaling or {}
            if scaling.get("mscale_all_dim") and scaling["factor"] > 1:
                s = 0.1 * scaling["mscale_all_dim"] * math.log(scaling["factor"]) + 1.0
                self.scale = self.scale * s * s

    @property
    def indexer_mode(self) -> str:
        return self.indexer.mode

    @property
    def mla_gate(self) -> str:
        return self.gate_policy.name

    @property
    def geometry(self) -> Geometry:
        return Geometry(self.kv_lora_rank, self.qk_nope_head_dim, self.v_head_dim, self.num_heads)

    def set_modes(
        self, gate_policy: GatePolicy | None = None, indexer_mode: str | None = None
    ) -> None:
        if gate_policy is not None:
            self.gate_policy = _policy(gate_policy)
            self.gate_policy.bind(self.geometry)
        if indexer_mode is not None:
            self.indexer.mode = IndexerMode.parse(indexer_mode)

    def make_cache(self) -> SparseMLACache:
        return SparseMLACache()

    def absorbed(self, length: int, n_keys: int) -> bool:
        """The MLA gate. n_keys: tokens each query attends to (T when dense, the selection
        width when sparse), which is what the materialised path would have to expand."""
        return self.gate_policy.absorbed(self.geometry, length, n_keys)

    def __call__(
        self, x: mx.array, mask: Any = None, cache: SparseMLACache | None = None
    ) -> mx.array:
        B, L, _ = x.shape
        if self.q_lora_rank:
            qr = self.q_a_layernorm(self.q_a_proj(x))
            q = self.q_b_proj(qr)
        else:
            qr = x
            q = self.q_proj(x)
        q = q.reshape(B, L, self.num_heads, self.q_head_dim).transpose(
            0, 2, 1, 3
        )  # (B, H, L, nope+rope)
        q_nope, q_pe = q[..., : self.qk_nope_head_dim], q[..., self.qk_nope_head_dim :]
        ckv = self.kv_a_proj_with_mqa(x)  # (B, L, r + rope)
        latent = self.kv_a_layernorm(ckv[..., : self.kv_lora_rank])[:, None]  # (B, 1, L, r)
        k_pe = (
            ckv[..., self.kv_lora_rank :][:, None] if self.qk_rope_head_dim else None
        )  # (B, 1, L, rope)

        offset = cache.offset if cache is not None else 0
        if self.qk_rope_head_dim:
            q_pe = self.rope(q_pe, offset)
            k_pe = self.rope(k_pe, offset)
        if cache is not None:
            latent, k_pe = cache.update_and_fetch(latent, k_pe)  # (B, 1, T, r), (B, 1, T, rope)
        T = latent.shape[2]
        if isinstance(mask, str):
            mask = create_causal_mask(L, T - L)  # (L, T) bool

        selection = self.indexer(x, qr, cache.index if cache is not None else None)
        if selection is None:
            out = self._dense(q_nope, q_pe, latent, k_pe, mask)
        else:
            selected = Selected(*map(mx.stop_gradient, selection))
            out = self._sparse(q_nope, q_pe, latent, k_pe, mask, selected)
        out = out.transpose(0, 2, 1, 3).reshape(
            B, L, self.num_heads * self.v_head_dim
        )  # (B, L, H*v)
        return self.o_proj(out)

    def _record(self, length: int, absorbed: bool) -> None:
        if self.counters is not None:
            self.counters.record(length, absorbed)

    def _dense(self, q_nope, q_pe, latent, k_pe, mask) -> mx.array:
        L, T = q_nope.shape[2], latent.shape[2]
        attn_mask = mask
        if self.qk_rope_head_dim:
            attn_mask = (q_pe * self.scale) @ k_pe.swapaxes(-1, -2)  # (B, H, L, T)
            if mask is not None:
                attn_mask = _apply_mask(attn_mask, mask)
        absorbed = self.absorbed(L, T)
        self._record(L, absorbed)
        # Absorbed: fold the key up-projection into q and attend against the rank-r latent
        # (cost ~ L). Materialised: expand K/V for every cached token (cost ~ T). Same maths.
        if absorbed:
            q, k, v = self.embed_q(q_nope), latent, latent  # (B, H, L, r), (B, 1, T, r)
        else:
            q = q_nope
            k = self.embed_q(latent, transpose=False)  # (B, H, T, nope)
            v = self.unembed_out(latent)  # (B, H, T, v)
        out = mx.fast.scaled_dot_product_attention(q, k, v, scale=self.scale, mask=attn_mask)
        return self.unembed_out(out) if absorbed else out  # (B, H, L, v)

    def _sparse(self, q_nope, q_pe, latent, k_pe, mask, selected: Selected) -> mx.array:
        """selected: idx/valid (B, L, K), the tokens each query attends to."""
        idx, valid = selected
        B, H, L, _ = q_nope.shape
        T, K = latent.shape[2], idx.shape[-1]
        additive = None
        if mask is not None:
            m = mask.reshape((1,) * (4 - mask.ndim) + mask.shape)  # (b, h, L, T)
            m = mx.broadcast_to(m[:, :1], (B, 1, L, T))[:, 0]  # (B, L, T)
            picked = mx.take_along_axis(m, idx, axis=-1)  # (B, L, K)
            if picked.dtype == mx.bool_:
                valid = valid & picked
            else:
                additive = picked
        absorbed = self.absorbed(L, K)
        self._record(L, absorbed)
        if absorbed:
            # Each query attends to its own K latents: fold the queries into the batch axis.
            flat = idx.reshape(B, L * K, 1)  # (B, L*K, 1)
            lat = mx.take_along_axis(
                latent[:, 0], mx.broadcast_to(flat, (B, L * K, self.kv_lora_rank)), axis=1
            ).reshape(B * L, 1, K, self.kv_lora_rank)  # (B*L, 1, K, r)
            q = (
                self.embed_q(q_nope).transpose(0, 2, 1, 3).reshape(B * L, H, 1, -1)
            )  # (B*L, H, 1, r)
            scores_mask = mx.where(valid, 0.0, -math.inf).astype(q.dtype)  # (B, L, K)
            if additive is not None:
                scores_mask = scores_mask + additive.astype(q.dtype)
            scores_mask = scores_mask.reshape(B * L, 1, 1, K)  # (B*L, 1, 1, K)
            if self.qk_rope_head_dim:
                pe = mx.take_along_axis(
                    k_pe[:, 0], mx.broadcast_to(flat, (B, L * K, self.qk_rope_head_dim)), axis=1
                ).reshape(B * L, 1, K, -1)  # (B*L, 1, K, rope)
                qp = q_pe.transpose(0, 2, 1, 3).reshape(B * L, H, 1, -1)  # (B*L, H, 1, rope)
                scores_mask = scores_mask + (qp * self.scale) @ pe.swapaxes(
                    -1, -2
                )  # (B*L, H, 1, K)
            out = mx.fast.scaled_dot_product_attention(
                q, lat, lat, scale=self.scale, mask=scores_mask
            )
            out = out.reshape(B, L, H, self.kv_lora_rank).transpose(0, 2, 1, 3)  # (B, H, L, r)
            return self.unembed_out(out)  # (B, H, L, v)
        # Materialised (what mlx-lm does for L > 1): expand all T tokens, mask to the selection.
        hit = mx.zeros((B, L, T + 1), mx.bool_)
        hit = mx.put_along_axis(hit, mx.where(valid, idx, T), mx.array(True), axis=-1)[..., :T]
        attn_mask = hit[:, None]  # (B, 1, L, T)
        if additive is not None:
            attn_mask = mx.where(attn_mask, _full_additive(mask, B, L, T), -math.inf)
            attn_mask = attn_mask.astype(q_nope.dtype)
        if self.qk_rope_head_dim:
            attn_mask = _apply_mask((q_pe * self.scale) @ k_pe.swapaxes(-1, -2), attn_mask)
        k = self.embed_q(latent, transpose=False)  # (B, H, T, nope)
        v = self.unembed_out(latent)  # (B, H, T, v)
        return mx.fast.scaled_dot_product_attention(q_nope, k, v, scale=self.scale, mask=attn_mask)


def _apply_mask(scores: mx.array, mask: mx.array) -> mx.array:
    if mask.dtype == mx.bool_:
        return mx.where(mask, scores, mx.array(mx.finfo(scores.dtype).min, scores.dtype))
    return scores + mask.astype(scores.dtype)


def _full_additive(mask: mx.array, B: int, L: int, T: int) -> mx.array:
    m = mask.reshape((1,) * (4 - mask.ndim) + mask.shape)  # (b, h, L, T)
    return mx.broadcast_to(m[:, :1], (B, 1, L, T))


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


def pool_step(
    where: str,
    cache: Any,
    index: IndexerCache,
    context: int,
    forward: Callable[[], Any],
    patched: bool,
) -> tuple[float, int, int]:
    """One timed step of a sparse part from exactly `context` tokens (`forward` returns what to
    sync), rewound to it after: (ms, pool rebuilds, pool reuses). `cache` is what the step
    appends to (the indexer's cache, or the layer's, which trims its indexer's too). A patched
    pool that rebuilds is an error: the step would be measuring the rejection case."""
    if cache.offset != context or index.pool_length != context:
        raise RuntimeError(
            f"{where}: cache at {cache.offset} (pool {index.pool_length}) before a step; every "
            "sample must start at the context"
        )
    rebuilds, reuses = index.rebuilds, index.reuses
    ms = timed_ms(forward, mx.eval)
    rebuilt = index.rebuilds - rebuilds
    if patched and rebuilt:
        raise RuntimeError(
            f"{where}: the patched pool was rebuilt; the harness is measuring the rejection "
            "case, not consecutive accepted steps"
        )
    rewind(cache, index, context)
    return ms, rebuilt, index.reuses - reuses


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
