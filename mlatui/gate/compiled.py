"""mlatui's own absorbed MLA attention, built with `mx.compile`: the compiled arm.

The same math as the runtime's absorbed branch (the query absorbed into the latent through
`embed_q`, scores against the cached latent plus the rope scores, softmax, values read from the
latent and brought out through `unembed_out`, then `o_proj`), in two compiled pieces around the
cache update: the projections (one trace per width; the cache offset is an array input, so a
growing cache does not retrace) and the attention (traced shapeless per width and mask, so any
cache length reuses it). Backend-neutral: CPU, CUDA and Metal run the same code, no hand-written
kernels. The gate is the formula's; the branch is counted by the arm's BranchCounters like every
gated call; a call of one query runs the runtime's own L = 1 branch, as the other arm does, so
the run's L = 1 check keeps comparing identical code. Supported: the DeepSeek-V3 form of MLA attention (`__call__(x, mask, cache)`, `q_proj`
or the q LoRA, `kv_a_proj_with_mqa`, `embed_q`/`unembed_out`, no indexer), which deepseek_v3,
kimi, glm4_moe_lite, longcat_flash and kimi_linear's MLA layers share; any other fails closed.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import mlx.core as mx
import mlx.nn as nn

COMPILED_KEY = "_mlatui_compiled"  # where a module keeps its compiled pieces

NEEDED = ("kv_a_proj_with_mqa", "kv_a_layernorm", "embed_q", "unembed_out", "o_proj")


def unsupported(cls: type) -> str | None:
    """Why `cls` (a runtime's MLA attention class) has no compiled absorbed path (None: it has)."""
    where = f"{cls.__module__}.{cls.__qualname__}"
    params = list(inspect.signature(cls.__call__).parameters)
    if params[:4] != ["self", "x", "mask", "cache"]:
        return f"{where}.__call__{tuple(params[1:])} is not (x, mask, cache)"
    init = next(vars(c)["__init__"] for c in cls.__mro__ if "__init__" in vars(c))
    source = inspect.getsource(init)
    missing = [n for n in NEEDED if f"self.{n} =" not in source]
    if missing:
        return f"{where} has no {', '.join(missing)}"
    if "self.indexer =" in source:
        return f"{where} is a sparse (indexer) layer"
    return None


class CompiledAbsorbed:
    """One attention module's compiled pieces (they read its weights as constants)."""

    def __init__(self, attn: nn.Module):
        self.attn = attn
        self.heads = int(getattr(attn, "num_heads", 0) or attn.num_attention_heads)
        self.nope, self.rope_dim = int(attn.qk_nope_head_dim), int(attn.qk_rope_head_dim)
        self.rank = int(attn.kv_lora_rank)
        self.project = mx.compile(self._project)
        self.attend: dict[tuple[int, bool], Callable[..., mx.array]] = {}

    def _project(self, x: mx.array, offset: mx.array) -> tuple[mx.array, ...]:
        a = self.attn
        B, L, _ = x.shape
        if getattr(a, "q_lora_rank", None) is None:
            q = a.q_proj(x)
        else:
            q = a.q_b_proj(a.q_a_layernorm(a.q_a_proj(x)))
        # (B, L, H * (nope + rope)) -> (B, H, L, nope + rope)
        q = q.reshape(B, L, self.heads, self.nope + self.rope_dim).transpose(0, 2, 1, 3)
        q_scale = getattr(a, "mla_scale_q_lora", None)
        if q_scale is not None:
            q = q * q_scale
        q_nope, q_pe = mx.split(q, [self.nope], axis=-1)
        compressed, k_pe = mx.split(a.kv_a_proj_with_mqa(x), [self.rank], axis=-1)
        k_pe = k_pe.reshape(B, L, 1, self.rope_dim).transpose(0, 2, 1, 3)  # (B, 1, L, rope)
        latent = a.kv_a_layernorm(compressed)
        kv_scale = getattr(a, "mla_scale_kv_lora", None)
        if kv_scale is not None:
            latent = latent * kv_scale
        rope = getattr(a, "rope", None)
        if rope is not None:
            q_pe, k_pe = rope(q_pe, offset), rope(k_pe, offset)
        latent = mx.expand_dims(latent, axis=1)  # (B, 1, L, r)
        return a.embed_q(q_nope), q_pe, latent, k_pe  # absorbed query: (B, H, L, r)

    def _attend(
        self, q_latent: mx.array, q_pe: mx.array, latent: mx.array, k_pe: mx.array, *mask: mx.array
    ) -> mx.array:
        a = self.attn
        B, _, L, _ = q_latent.shape
        scores = (q_pe * a.scale) @ k_pe.swapaxes(-1, -2)  # (B, H, L, T)
        if mask:
            scores = mx.where(mask[0], scores, mx.array(mx.finfo(scores.dtype).min, scores.dtype))
        scores = (q_latent * a.scale) @ latent.swapaxes(-1, -2) + scores
        weights = mx.softmax(scores, axis=-1, precise=True)
        out = a.unembed_out(weights @ latent)  # (B, H, L, r) -> (B, H, L, v)
        projected: mx.array = a.o_proj(out.transpose(0, 2, 1, 3).reshape(B, L, -1))  # (B, L, H * v)
        return projected

    def __call__(self, x: mx.array, mask: mx.array | None, cache: Any) -> mx.array:
        offset = cache.offset if cache is not None else 0
        q_latent, q_pe, latent, k_pe = self.project(x, mx.array(offset, dtype=mx.int32))
        if cache is not None:
            latent, k_pe = cache.update_and_fetch(latent, k_pe)
        key = (x.shape[1], mask is not None)
        if key not in self.attend:
            self.attend[key] = mx.compile(self._attend, shapeless=True)
        extra = (mask,) if mask is not None else ()
        return self.attend[key](q_latent, q_pe, latent, k_pe, *extra)


def compiled_for(attn: nn.Module) -> CompiledAbsorbed:
    """The module's compiled pieces, built on first use (per instance: twins build their own)."""
    found = attn.__dict__.get(COMPILED_KEY)
    if found is None:
        found = attn.__dict__[COMPILED_KEY] = CompiledAbsorbed(attn)
    return found
