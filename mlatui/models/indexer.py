"""Pooled-window sparse indexer (GLM-5.3-Flash / glm5_next style), stock and patched.

Every cached token has index keys (index_n_heads x index_head_dim) and one gate score per index
head. Keys are pooled into windows of `index_kpool` by a gate-softmax-weighted sum; a query
scores the pools (relu(q . pooled key), weighted per head, summed), keeps the top
`index_topk // index_kpool` pools that end at or before its position, expands them to tokens and
adds the tokens of its own unfinished window (at most `index_kpool - 1`). While the cache holds
no more than `index_topk` tokens there is nothing to choose: the caller attends densely.

Completed windows never change (tokens only append), so they are kept in a pool cache and only
the tail from the last window boundary is re-pooled. Stock reuses that cache only when S == 1
(S = new tokens) and re-pools all T tokens on every wider step; patched reuses it for any S while
the cache is exactly as long as the pool remembers, so a trim after a rejected draft forces one
full rebuild instead of a stale reuse.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, NamedTuple

import mlx.core as mx
import mlx.nn as nn

from mlatui.config.arm_settings import IndexerMode

INDEXER_MODES = tuple(IndexerMode)


@dataclass
class SparseMLAConfig:
    """Defaults are GLM-5.3-Flash's (glm5_next text config); q_lora_rank 1536 per FIELD_NOTES 6.1."""

    hidden_size: int = 4096
    num_attention_heads: int = 64
    kv_lora_rank: int = 512
    q_lora_rank: int | None = 1536
    qk_nope_head_dim: int = 256
    qk_rope_head_dim: int = 0
    v_head_dim: int = 256
    index_n_heads: int = 32
    index_head_dim: int = 128
    index_kpool: int = 4
    index_topk: int = 2048
    index_query_chunk: int = 128
    rms_norm_eps: float = 1e-5
    rope_theta: float = 10000.0
    rope_scaling: dict[str, Any] | None = None
    max_position_embeddings: int = 8192
    attention_bias: bool = False

    def __post_init__(self) -> None:
        if self.index_kpool < 1:
            raise ValueError(f"index_kpool must be >= 1, got {self.index_kpool}")
        if self.index_topk < self.index_kpool or self.index_topk % self.index_kpool:
            raise ValueError(
                f"index_topk ({self.index_topk}) must be a positive multiple of index_kpool "
                f"({self.index_kpool})"
            )
        if self.index_query_chunk < 1:
            raise ValueError(f"index_query_chunk must be >= 1, got {self.index_query_chunk}")
        for name in ("hidden_size", "num_attention_heads", "kv_lora_rank", "qk_nope_head_dim"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.qk_rope_head_dim < 0 or self.qk_rope_head_dim % 2:
            raise ValueError(f"qk_rope_head_dim must be 0 or even, got {self.qk_rope_head_dim}")

    @classmethod
    def from_dict(cls, params: dict) -> SparseMLAConfig:
        import inspect

        names = inspect.signature(cls).parameters
        return cls(**{k: v for k, v in params.items() if k in names})

    @property
    def selected_tokens(self) -> int:
        """Width of one query's selection: the top pools' tokens plus the unfinished tail."""
        return self.index_topk + self.index_kpool - 1


def pool_windows(
    keys: mx.array,
    gates: mx.array,
    kpool: int,
    ape: mx.array | None = None,
    valid: mx.array | None = None,
) -> mx.array:
    """Pool keys (B, H, N, D) with gates (B, H, N) into windows of `kpool` tokens starting at
    index 0 of the input: (B, H, ceil(N / kpool), D). A partial last window pools what it has;
    invalid (padding) tokens get weight 0."""
    B, H, N, D = keys.shape
    P = -(-N // kpool)
    pad = P * kpool - N
    g = gates.astype(mx.float32)
    if valid is not None:
        g = mx.where(valid[:, None, :], g, -math.inf)
    if pad:
        keys = mx.pad(keys, [(0, 0), (0, 0), (0, pad), (0, 0)])
        g = mx.pad(g, [(0, 0), (0, 0), (0, pad)], constant_values=-math.inf)
    g = g.reshape(B, H, P, kpool)  # (B, H, P, kpool)
    if ape is not None:
        g = g + ape.astype(mx.float32)[None, :, None, :]
    w = mx.softmax(g, axis=-1, precise=True)
    w = mx.where(mx.isnan(w), 0.0, w)  # a window with no valid token pools to zero
    k = keys.reshape(B, H, P, kpool, D).astype(mx.float32)  # (B, H, P, kpool, D)
    pooled = w[..., None, :] @ k  # (B, H, P, 1, D): no (B, H, P, kpool, D) temporary
    return pooled.reshape(B, H, P, D).astype(keys.dtype)  # (B, H, P, D)


@dataclass(frozen=True)
class SelectRule:
    """How the indexer selects tokens: windows of `kpool` tokens, the best windows up to `topk`
    tokens, the queries scored `chunk` at a time (the scores' temporary stays bounded)."""

    kpool: int
    topk: int
    chunk: int


class Selected(NamedTuple):
    """The tokens each query attends to: indices (B, S, K) and their validity (B, S, K)."""

    idx: mx.array
    valid: mx.array


def select_tokens(
    q: mx.array, weights: mx.array, pooled: mx.array, start: int, rule: SelectRule
) -> Selected:
    """Queries q (B, H, S, D) at positions start..start+S-1, head weights (B, S, H), complete
    pools (B, H, P, D). Returns token indices (B, S, K) and their validity (B, S, K), with
    K = topk + kpool - 1: the chosen pools' tokens in chronological order, then the tail."""
    kpool, topk, chunk = rule.kpool, rule.topk, rule.chunk
    B, H, S, _ = q.shape
    P = pooled.shape[2]
    k_pools = min(topk // kpool, P)
    pos = mx.arange(start, start + S)
    pool_ids = mx.arange(P)
    w = weights.astype(mx.float32).transpose(0, 2, 1)[:, :, None]  # (B, H, 1, S)
    chosen = []
    for c0 in range(0, S, chunk):
        c1 = min(S, c0 + chunk)
        # pooled @ q^T reads the big operand row-major; q @ pooled^T makes BLAS transpose it.
        s = pooled @ q[:, :, c0:c1].swapaxes(-1, -2)  # (B, H, P, C)
        s = (mx.maximum(s.astype(mx.float32), 0) * w[..., c0:c1]).sum(axis=1)  # (B, P, C)
        s = s.swapaxes(-1, -2)  # (B, C, P)
        visible = pool_ids[None] < ((pos[c0:c1] + 1) // kpool)[:, None]  # (C, P)
        s = mx.where(visible, s, -math.inf)
        top = mx.argpartition(-s, kth=k_pools - 1, axis=-1)[..., :k_pools]  # (B, C, k)
        ok = mx.take_along_axis(s, top, axis=-1) > -math.inf
        chosen.append(mx.sort(mx.where(ok, top, P), axis=-1))  # invalid sort last
    top = mx.concatenate(chosen, axis=1) if len(chosen) > 1 else chosen[0]  # (B, S, k)
    ok = top < P
    tok = (top[..., None] * kpool + mx.arange(kpool)).reshape(
        B, S, k_pools * kpool
    )  # (B, S, k*kpool)
    tok_ok = mx.repeat(ok, kpool, axis=-1)  # (B, S, k*kpool)
    tail = ((pos + 1) // kpool * kpool)[:, None] + mx.arange(kpool - 1)  # (S, kpool-1)
    tail_ok = tail <= pos[:, None]
    idx = mx.concatenate([tok, mx.broadcast_to(tail, (B, S, kpool - 1))], axis=-1)
    valid = mx.concatenate([tok_ok, mx.broadcast_to(tail_ok, (B, S, kpool - 1))], axis=-1)
    width = topk + kpool - 1
    if idx.shape[-1] < width:  # fewer complete pools than the budget: pad to a fixed width
        fill = width - idx.shape[-1]
        idx = mx.pad(idx, [(0, 0), (0, 0), (0, fill)])
        valid = mx.pad(valid, [(0, 0), (0, 0), (0, fill)])
    return Selected(mx.where(valid, idx, 0).astype(mx.int32), valid)


class IndexerCache:
    """Per-layer index keys, gate scores and the pool cache. Trimming keeps the pool buffers but
    not their validity: the pool remembers the length it was built at, and the guard compares."""

    step = 256

    def __init__(self) -> None:
        self.keys: mx.array | None = None  # (B, H, cap, D)
        self.gates: mx.array | None = None  # (B, H, cap)
        self.valid: mx.array | None = None  # (B, cap) bool; None while nothing is padded
        self.offset = 0
        self.no_pad = True
        self.pooled: mx.array | None = None  # (B, H, pool_cap, D)
        self.pool_length = -1  # tokens the pool was built from; -1: no pool
        self.pool_batch = -1
        self.rebuilds = 0
        self.reuses = 0
        self.last_reused = False
        self.kpool = 4

    def append(
        self, keys: mx.array, gates: mx.array, valid: mx.array | None = None
    ) -> tuple[mx.array, mx.array]:
        """keys (B, H, S, D), gates (B, H, S); returns everything cached so far."""
        B, H, S, D = keys.shape
        prev = self.offset
        held_k, held_g = self.keys, self.gates
        if held_k is None or held_g is None or prev + S > held_k.shape[2]:
            cap = (prev + S + self.step - 1) // self.step * self.step
            new_k = mx.zeros((B, H, cap, D), keys.dtype)
            new_g = mx.zeros((B, H, cap), gates.dtype)
            if held_k is not None and held_g is not None and prev:
                new_k[:, :, :prev] = held_k[:, :, :prev]
                new_g[:, :, :prev] = held_g[:, :, :prev]
            self.keys, self.gates = held_k, held_g = new_k, new_g
            if self.valid is not None:
                new_v = mx.ones((B, cap), mx.bool_)
                new_v[:, :prev] = self.valid[:, :prev]
                self.valid = new_v
        if valid is not None:
            if self.valid is None:
                self.valid = mx.ones((B, held_k.shape[2]), mx.bool_)
            self.valid[:, prev : prev + S] = valid
            self.no_pad = False
        elif self.valid is not None:
            self.valid[:, prev : prev + S] = True
        self.offset = prev + S
        held_k[:, :, prev : self.offset] = keys
        held_g[:, :, prev : self.offset] = gates
        return held_k[:, :, : self.offset], held_g[:, :, : self.offset]

    def held(self, length: int) -> tuple[mx.array, mx.array]:
        """The first `length` cached keys and gates."""
        if self.keys is None or self.gates is None:
            raise ValueError("the indexer cache holds no keys")
        return self.keys[:, :, :length], self.gates[:, :, :length]

    def trim(self, n: int) -> int:
        n = min(self.offset, n)
        self.offset -= n
        return n

    @property
    def pool_windows(self) -> int:
        """Windows the pool holds (the last one may be partial); 0 without a pool."""
        return 0 if self.pool_length < 0 else -(-self.pool_length // self.kpool)

    def pooled_keys(self) -> mx.array | None:
        """(B, H, windows, D) as last pooled."""
        if self.pooled is None or self.pool_length < 0:
            return None
        return self.pooled[:, :, : self.pool_windows]

    def reuse_ok(self, batch: int, new_tokens: int) -> bool:
        """The patched guards: a pool exists, no padding, same batch, and the cache held exactly
        the tokens the pool was built from before this step."""
        return (
            self.pooled is not None
            and self.pool_length >= 0
            and self.no_pad
            and self.pool_batch == batch
            and self.pool_length == self.offset - new_tokens
        )

    def refresh_pool(
        self, kpool: int, new_tokens: int, incremental: bool, ape: mx.array | None = None
    ) -> mx.array:
        """Bring the pool up to date with the cache; returns (B, H, ceil(T / kpool), D)."""
        self.kpool = kpool
        T = self.offset
        if self.keys is None or self.gates is None:
            raise ValueError("the indexer cache holds no keys to pool")
        B, H, _, D = self.keys.shape
        P = -(-T // kpool)
        keys, gates = self.keys[:, :, :T], self.gates[:, :, :T]
        valid = None if self.no_pad or self.valid is None else self.valid[:, :T]
        pooled = self.pooled
        if incremental and pooled is not None and self.reuse_ok(B, new_tokens):
            s0 = self.pool_length // kpool * kpool  # windows before s0 are complete and unchanged
            tail = pool_windows(keys[:, :, s0:], gates[:, :, s0:], kpool, ape)
            w0 = s0 // kpool
            if pooled.shape[2] < P:
                grown = mx.zeros((B, H, P + self.step, D), pooled.dtype)
                grown[:, :, :w0] = pooled[:, :, :w0]
                pooled = grown
            pooled[:, :, w0:P] = tail
            self.reuses += 1
            self.last_reused = True
        else:
            full = pool_windows(keys, gates, kpool, ape, valid)
            if pooled is None or pooled.shape[0] != B or pooled.shape[2] < P:
                pooled = mx.zeros((B, H, P + self.step, D), full.dtype)
            pooled[:, :, :P] = full
            self.rebuilds += 1
            self.last_reused = False
        self.pooled = pooled
        self.pool_length = T
        self.pool_batch = B
        return pooled[:, :, :P]

    def fill(self, keys: mx.array, gates: mx.array, reserve: int = 0) -> None:
        """Fill the cache directly with index keys (B, H, T, D) and gates (B, H, T), with room for
        `reserve` more tokens: benchmarks start from a long context without running the
        projections over it, and never reallocate while timing."""
        B, H, T, D = keys.shape
        cap = (T + reserve + self.step - 1) // self.step * self.step
        self.keys = mx.zeros((B, H, cap, D), keys.dtype)
        self.gates = mx.zeros((B, H, cap), gates.dtype)
        self.offset = 0
        self.append(keys, gates)

    def copy(self) -> IndexerCache:
        new = IndexerCache.__new__(IndexerCache)
        new.__dict__.update(self.__dict__)
        for name in ("keys", "gates", "valid", "pooled"):
            a = getattr(self, name)
            if a is not None:
                setattr(new, name, mx.array(a))
        return new

    @property
    def nbytes(self) -> int:
        return sum(
            a.nbytes for a in (self.keys, self.gates, self.valid, self.pooled) if a is not None
        )


class Indexer(nn.Module):
    """Scores cached positions for sparse attention. `mode` ("stock" or "patched") decides when
    the pool cache may be reused; everything else is the same code in both modes."""

    def __init__(self, config: SparseMLAConfig, mode: str = "patched"):
        super().__init__()
        self.mode = IndexerMode.parse(mode)
        self.n_heads = config.index_n_heads
        self.head_dim = config.index_head_dim
        self.kpool = config.index_kpool
        self.index_topk = config.index_topk
        self.query_chunk = config.index_query_chunk
        q_in = config.q_lora_rank or config.hidden_size
        self.wq_b = nn.Linear(q_in, self.n_heads * self.head_dim, bias=False)
        self.wk = nn.Linear(config.hidden_size, self.n_heads * self.head_dim, bias=False)
        self.k_norm = nn.LayerNorm(self.head_dim)
        self.gate_proj = nn.Linear(config.hidden_size, self.n_heads, bias=False)
        self.weights_proj = nn.Linear(config.hidden_size, self.n_heads, bias=False)
        self.compress_ape = mx.zeros((self.n_heads, self.kpool))
        self.score_scale = self.n_heads**-0.5 * self.head_dim**-0.5

    def project(self, x: mx.array, qr: mx.array) -> tuple[mx.array, mx.array, mx.array, mx.array]:
        """x (B, S, hidden), qr (B, S, q_in) -> q (B, H, S, D), k (B, H, S, D), gates (B, H, S),
        head weights (B, S, H)."""
        B, S, _ = x.shape
        q = self.wq_b(qr).reshape(B, S, self.n_heads, self.head_dim)  # (B, S, H, D)
        k = self.wk(x).reshape(B, S, self.n_heads, self.head_dim)  # (B, S, H, D)
        k = self.k_norm(k)
        g = self.gate_proj(x)  # (B, S, H)
        w = self.weights_proj(x) * self.score_scale  # (B, S, H)
        return q.transpose(0, 2, 1, 3), k.transpose(0, 2, 1, 3), g.transpose(0, 2, 1), w

    def __call__(
        self,
        x: mx.array,
        qr: mx.array,
        cache: IndexerCache | None = None,
        valid: mx.array | None = None,
    ) -> Selected | None:
        """Token indices (B, S, K) and validity (B, S, K) for the S new queries, or None while the
        cache holds no more than index_topk tokens (attend densely)."""
        q, k, g, w = self.project(x, qr)
        cache = IndexerCache() if cache is None else cache
        start = cache.offset
        S = x.shape[1]
        cache.append(k, g, valid)
        if cache.offset <= self.index_topk:
            return None
        incremental = self.mode == "patched" or S == 1
        pooled = cache.refresh_pool(self.kpool, S, incremental, self.compress_ape)
        complete = pooled[:, :, : cache.offset // self.kpool]  # (B, H, T // kpool, D)
        rule = SelectRule(self.kpool, self.index_topk, self.query_chunk)
        return select_tokens(q, w, complete, start, rule)
