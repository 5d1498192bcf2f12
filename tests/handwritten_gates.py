"""A runtime's MLA attention written by hand, the way a serving project's optimised copy reads:
an early decode path, a fast path behind a compound flag, a materialised path for wide steps, a
top-k block whose `if L == 1:` gathers and whose `elif` / `else:` are paths of their own, and
the ordinary gate, as a flag on a module constant or as a direct test on a literal.

`mlatui scan` reads this file as source (tests/test_scan_forms.py); the gate patch runs its
classes in a tiny deepseek_v3 model (every path computes the same attention, so each arm's
output matches the installed one's and only the counters tell the paths apart).
"""

from __future__ import annotations

from dataclasses import dataclass

import mlx.core as mx
from mlx_lm.models.base import scaled_dot_product_attention
from mlx_lm.models.deepseek_v3 import DeepseekV3Attention

ABSORBED_MAX_L = 8
BLOCKWISE_MIN_T = 1 << 40  # the fast path's other trigger: a context no test reaches
LATENT_SPARSE_MIN_T = 1 << 40


@dataclass
class GeometryArgs:
    """The head dims scan reads for the formula's L* (GLM-4.7-Flash's: 398)."""

    kv_lora_rank: int = 512
    qk_nope_head_dim: int = 192
    v_head_dim: int = 256


class _Projections(DeepseekV3Attention):
    def _project(self, x, cache):
        B, L, _ = x.shape
        q = self.q_b_proj(self.q_a_layernorm(self.q_a_proj(x)))
        # (B, L, heads * q_head_dim) -> (B, heads, L, q_head_dim)
        q = q.reshape(B, L, self.num_heads, self.q_head_dim).transpose(0, 2, 1, 3)
        q_nope, q_pe = mx.split(q, [self.qk_nope_head_dim], axis=-1)
        latent, k_pe = mx.split(self.kv_a_proj_with_mqa(x), [self.kv_lora_rank], axis=-1)
        # (B, L, rope) -> (B, 1, L, rope)
        k_pe = k_pe.reshape(B, L, 1, self.qk_rope_head_dim).transpose(0, 2, 1, 3)
        kv_latent = mx.expand_dims(self.kv_a_layernorm(latent), axis=1)
        offset = cache.offset if cache is not None else 0
        q_pe, k_pe = self.rope(q_pe, offset), self.rope(k_pe, offset)
        if cache is not None:
            kv_latent, k_pe = cache.update_and_fetch(kv_latent, k_pe)
        return q_nope, q_pe, kv_latent, k_pe

    def _pe_scores(self, q_pe, k_pe, mask):
        scores = (q_pe * self.scale) @ k_pe.swapaxes(-1, -2)
        if mask is None:
            return scores
        return mx.where(mask, scores, mx.array(mx.finfo(scores.dtype).min, scores.dtype))

    def _out(self, output, B, L):
        # (B, heads, L, v) -> (B, L, heads * v)
        return self.o_proj(output.transpose(0, 2, 1, 3).reshape(B, L, -1))


class FlaggedPathsAttention(_Projections):
    """Decode path, compound fast-path flag, wide materialised path, then `absorbed = L <= X`."""

    blockwise = True
    chunked = True

    def __call__(self, x, mask=None, cache=None):
        B, L, _ = x.shape
        q_nope, q_pe, kv_latent, k_pe = self._project(x, cache)
        pe_scores = self._pe_scores(q_pe, k_pe, mask)

        if L == 1:
            q_latent = self.embed_q(q_nope)
            output = scaled_dot_product_attention(
                q_latent, kv_latent, kv_latent, cache=cache, scale=self.scale, mask=pe_scores
            )
            return self._out(self.unembed_out(output), B, L)

        use_blockwise = (
            self.blockwise
            and L > 1
            and (kv_latent.shape[2] >= BLOCKWISE_MIN_T or L <= ABSORBED_MAX_L)
        )
        if use_blockwise:
            q_latent = self.embed_q(q_nope)
            rows = [
                scaled_dot_product_attention(
                    q_latent[:, :, i : i + 1],
                    kv_latent,
                    kv_latent,
                    cache=cache,
                    scale=self.scale,
                    mask=pe_scores[:, :, i : i + 1],
                )
                for i in range(L)
            ]
            return self._out(self.unembed_out(mx.concatenate(rows, axis=2)), B, L)

        if self.chunked and L > 16:
            keys = self.embed_q(kv_latent, transpose=False)
            values = self.unembed_out(kv_latent)
            output = scaled_dot_product_attention(
                q_nope, keys, values, cache=cache, scale=self.scale, mask=pe_scores
            )
            return self._out(output, B, L)

        absorbed = L <= ABSORBED_MAX_L
        if absorbed:
            q_nope = self.embed_q(q_nope)
            k = v = kv_latent
        else:
            k = self.embed_q(kv_latent, transpose=False)
            v = self.unembed_out(kv_latent)
        output = scaled_dot_product_attention(
            q_nope, k, v, cache=cache, scale=self.scale, mask=pe_scores
        )
        if absorbed:
            output = self.unembed_out(output)
        return self._out(output, B, L)


class TopkChainAttention(_Projections):
    """A top-k block (`if L == 1:` gathers, `elif L <= 8:` few-rows path, `else:` a path holding
    both branches), then the ordinary gate tested directly on a literal."""

    sparse = True

    def _select(self, kv_latent, L):
        """A top-k that keeps every position, so the sparse paths equal dense attention."""
        B, _, T, _ = kv_latent.shape
        return mx.broadcast_to(mx.arange(T)[None, None, None, :], (B, 1, L, T))

    def _few_rows(self, q_nope, kv_latent, pe_scores, B, L):
        q_latent = self.embed_q(q_nope)
        output = scaled_dot_product_attention(
            q_latent, kv_latent, kv_latent, cache=None, scale=self.scale, mask=pe_scores
        )
        return self._out(self.unembed_out(output), B, L)

    def __call__(self, x, mask=None, cache=None):
        B, L, _ = x.shape
        q_nope, q_pe, kv_latent, k_pe = self._project(x, cache)
        topk = self._select(kv_latent, L) if self.sparse else None
        if topk is not None:
            if L == 1:
                rows = topk[:, :, 0, :, None]
                kv_latent = mx.take_along_axis(
                    kv_latent, mx.broadcast_to(rows, rows.shape[:-1] + kv_latent.shape[-1:]), axis=2
                )
                k_pe = mx.take_along_axis(
                    k_pe, mx.broadcast_to(rows, rows.shape[:-1] + k_pe.shape[-1:]), axis=2
                )
            elif L <= 8:
                return self._few_rows(q_nope, kv_latent, self._pe_scores(q_pe, k_pe, mask), B, L)
            else:
                pe_scores = self._pe_scores(q_pe, k_pe, mask)
                if kv_latent.shape[2] >= LATENT_SPARSE_MIN_T:
                    q_latent = self.embed_q(q_nope)
                    output = scaled_dot_product_attention(
                        q_latent, kv_latent, kv_latent, cache=None, scale=self.scale, mask=pe_scores
                    )
                    return self._out(self.unembed_out(output), B, L)
                keys = self.embed_q(kv_latent, transpose=False)
                values = self.unembed_out(kv_latent)
                output = scaled_dot_product_attention(
                    q_nope, keys, values, cache=None, scale=self.scale, mask=pe_scores
                )
                return self._out(output, B, L)

        pe_scores = self._pe_scores(q_pe, k_pe, mask)
        if L <= 8:
            q_nope = self.embed_q(q_nope)
            k = v = kv_latent
        else:
            k = self.embed_q(kv_latent, transpose=False)
            v = self.unembed_out(kv_latent)
        output = scaled_dot_product_attention(
            q_nope, k, v, cache=cache, scale=self.scale, mask=pe_scores
        )
        if L <= 8:
            output = self.unembed_out(output)
        return self._out(output, B, L)
