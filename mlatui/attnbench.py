"""MLA attention benchmarks: (a) forced branches on one attention layer, (b) whole model stock vs
patched. Single-threaded, arms interleaved A B B A, every sample at the same cache length (the
step's tokens are trimmed off again), warm-up excluded, raw samples kept."""

from __future__ import annotations

import copy
import inspect
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import mlx.core as mx
import mlx.nn as nn
from mlx_lm.models.base import create_causal_mask
from mlx_lm.models.cache import (
    CacheList,
    KVCache,
    can_trim_prompt_cache,
    make_prompt_cache,
    trim_prompt_cache,
)

from mlatui import families, mla
from mlatui.measure import abba, l1_check, timed_ms
from mlatui.records import BenchRecord

PREFILL_CHUNK = 512


def _sync(out: Any) -> None:
    mx.eval(out)


# ---- (a) one attention layer, forced branches ----------------------------------------------


@dataclass
class ForcedArms:
    geometry: mla.Geometry
    absorbed: nn.Module
    materialised: nn.Module
    hidden: int
    takes_scale: bool  # mistral4: __call__(x, attn_scale, mask, cache)
    dtype: mx.Dtype = mx.float32


def forced_arms(
    family: str,
    size: str = "full",
    bits: int | None = None,
    seed: int = 0,
    dtype: mx.Dtype = mx.float32,
) -> ForcedArms:
    """One random-weight attention layer of the family's geometry, as two twins that always take
    the absorbed / the materialised branch (they share the weights)."""
    attn = families.attention_layer(family, size, bits=bits, seed=seed, dtype=dtype)
    arms = []
    for force in (True, False):
        t = mla.twin(attn)
        mla.patch_model(t, mla.ForcedPolicy(force))
        arms.append(t)
    takes_scale = "attn_scale" in inspect.signature(type(attn).__call__).parameters
    hidden = attn.o_proj.weight.shape[0]
    return ForcedArms(mla.geometry_of(attn), arms[0], arms[1], hidden, takes_scale, dtype)


def random_cache(attn: nn.Module, context: int, seed: int = 0, dtype: mx.Dtype = mx.float32) -> Any:
    """A cache holding `context` random latents (normalised like kv_a_layernorm's output); filling it
    through the layer would cost a materialised prefill per chunk and buys nothing for timing."""
    mx.random.seed(seed)
    r, rope = attn.kv_lora_rank, attn.qk_rope_head_dim
    latent = KVCache()
    latent.update_and_fetch(
        mx.random.normal((1, 1, context, r)).astype(dtype),  # (B, 1, T, r)
        mx.random.normal((1, 1, context, rope)).astype(dtype),  # (B, 1, T, rope)
    )
    if not hasattr(attn, "indexer"):
        mx.eval(latent.state)
        return latent
    index = KVCache()
    k = mx.random.normal((1, 1, context, attn.indexer.head_dim)).astype(dtype)  # (B, 1, T, Di)
    index.update_and_fetch(k, k)
    cache = CacheList(latent, index)
    mx.eval(cache.state)
    return cache


def _offset(cache: Any) -> int:
    return cache[0].offset if isinstance(cache, CacheList) else cache.offset


def attention_step(
    arms: ForcedArms, width: int, seed: int = 0
) -> Callable[[nn.Module, Any], mx.array]:
    mx.random.seed(seed)
    x = mx.random.normal((1, width, arms.hidden)).astype(arms.dtype)  # (B, L, D)
    scale = mx.ones((width, 1), dtype=arms.dtype)
    mx.eval(x, scale)

    masks: dict[int, mx.array | None] = {}  # every sample sees the same offset: build it once

    def step(attn: nn.Module, cache: Any) -> mx.array:
        offset = _offset(cache)
        if offset not in masks:  # first (warm-up) call only
            masks[offset] = create_causal_mask(width, offset) if width > 1 else None
            if masks[offset] is not None:
                mx.eval(masks[offset])
        mask = masks[offset]
        if arms.takes_scale:
            return attn(x, scale, mask, cache)
        return attn(x, mask=mask, cache=cache)

    return step


def time_forced(arms: ForcedArms, cache: Any, width: int, reps: int) -> dict[str, list[float]]:
    """ABBA samples (ms) of both branches at `width`, each on the same cache length: the step's
    tokens are trimmed off after every call. One untimed call per branch first (compiles)."""
    step = attention_step(arms, width)
    modules = {"absorbed": arms.absorbed, "materialised": arms.materialised}
    samples: dict[str, list[float]] = {k: [] for k in modules}
    for i, name in enumerate([*modules, *abba(list(modules), reps)]):
        ms = timed_ms(lambda m=modules[name]: step(m, cache), _sync)
        trim_prompt_cache([cache], width)
        if i >= len(modules):
            samples[name].append(ms)
    return samples


def crossover(medians: dict[int, tuple[float, float]]) -> int | None:
    """Largest width where the absorbed branch was faster (None if it never was)."""
    wins = [w for w, (a, m) in sorted(medians.items()) if a < m]
    return max(wins) if wins else None


def forced_sweep(
    family: str,
    contexts: Sequence[int],
    widths: Sequence[int],
    reps: int,
    size: str = "full",
    bits: int | None = None,
    env: dict | None = None,
    progress: Callable[[str], None] = lambda s: None,
    dtype: mx.Dtype = mx.float32,
) -> tuple[list[BenchRecord], dict[int, dict[str, Any]]]:
    arms = forced_arms(family, size, bits, dtype=dtype)
    g = arms.geometry
    settings = dict(
        size=size, bits=bits, dtype=str(dtype), reps=reps, geometry=g.key, heads=g.num_heads
    )
    records, summary = [], {}
    for context in contexts:
        cache = random_cache(arms.absorbed, context, dtype=dtype)
        medians = {}
        for width in widths:
            s = time_forced(arms, cache, width, reps)
            medians[width] = (
                statistics.median(s["absorbed"]),
                statistics.median(s["materialised"]),
            )
            progress(
                f"T={context} L={width}: absorbed {medians[width][0]:.2f} ms, materialised {medians[width][1]:.2f} ms"
            )
            for arm, samples in s.items():
                records.append(
                    BenchRecord(
                        "attention-forced",
                        family,
                        arm,
                        context,
                        width,
                        samples,
                        settings,
                        env or {},
                    )
                )
        formula = mla.max_absorbed_queries(
            g.kv_lora_rank, g.qk_nope_head_dim, g.v_head_dim, context
        )
        summary[context] = dict(medians=medians, measured=crossover(medians), formula=formula)
        del cache
    return records, summary


# ---- (b) whole model, stock vs patched -------------------------------------------------------


def prefill(model: nn.Module, cache: list, context: int, vocab: int, seed: int = 0) -> None:
    mx.random.seed(seed)
    tokens = mx.random.randint(0, vocab, (1, context))
    for start in range(0, context, PREFILL_CHUNK):
        model(tokens[:, start : start + PREFILL_CHUNK], cache=cache)
        mx.eval([c.state for c in cache])
        mx.clear_cache()


def model_sweep(
    family: str,
    contexts: Sequence[int],
    widths: Sequence[int],
    reps: int,
    size: str = "full",
    layers: int | None = None,
    bits: int | None = None,
    env: dict | None = None,
    progress: Callable[[str], None] = lambda s: None,
    dtype: mx.Dtype = mx.float32,
) -> tuple[list[BenchRecord], dict[int, dict[str, Any]]]:
    """Stock vs patched twin (shared weights), each with its own copy of one prefilled cache."""
    stock = families.build_model(family, size, layers, bits=bits, dtype=dtype)
    patched = mla.twin(stock)
    report = mla.patch_model(patched)
    mla.count_branches(stock)
    if not can_trim_prompt_cache(make_prompt_cache(stock)):
        raise ValueError(
            f"{family} has a non-trimmable cache (linear-attention layers); part (b) needs trim"
        )
    vocab = families.text_config(families.config_for(family, size))["vocab_size"]
    settings = dict(
        size=size,
        bits=bits,
        dtype=str(dtype),
        layers=layers,
        reps=reps,
        geometry=report.geometry.key,
    )
    widths = sorted(set(widths) | {1})
    arms = {"stock": stock, "patched": patched}
    records, summary = [], {}
    for context in contexts:
        base = make_prompt_cache(stock)
        prefill(stock, base, context, vocab)
        caches = {k: copy.deepcopy(base) for k in arms}
        del base
        samples: dict[tuple[str, int], list[float]] = {}
        for width in widths:
            mx.random.seed(100 + width)
            tokens = mx.random.randint(0, vocab, (1, width))
            for i, name in enumerate([*arms, *abba(list(arms), reps)]):
                ms = timed_ms(lambda n=name, t=tokens, c=caches: arms[n](t, cache=c[n]), _sync)
                trim_prompt_cache(caches[name], width)
                if i >= len(arms):  # the first call per arm and width is the warm-up
                    samples.setdefault((name, width), []).append(ms)
            progress(
                f"T={context} L={width}: stock {statistics.median(samples['stock', width]):.1f} ms, "
                f"patched {statistics.median(samples['patched', width]):.1f} ms"
            )
        s1, p1, diff, valid = l1_check(samples["stock", 1], samples["patched", 1])
        summary[context] = dict(
            l1_diff_pct=diff,
            valid=valid,
            medians={k: statistics.median(v) for k, v in samples.items()},
        )
        note = "" if valid else f"L=1 medians differ by {diff:.1f}% (> 2%): invalid"
        for (name, width), ms in samples.items():
            records.append(
                BenchRecord(
                    "attention-model",
                    family,
                    name,
                    context,
                    width,
                    ms,
                    settings,
                    env or {},
                    valid,
                    note,
                )
            )
        del caches
        mx.clear_cache()
    return records, summary
