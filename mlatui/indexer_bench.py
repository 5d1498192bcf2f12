"""Sparse indexer benchmark: per-step ms of the pooled-window indexer, stock vs patched, and of the
whole sparse MLA layer, at GLM-5.3-Flash geometry with random weights.

Both arms share one module (same weights); each has its own cache, copied from one prefill so they
start bit-identical. A step appends S tokens and the cache keeps them: consecutive verify steps
with every draft accepted. Trimming them off again (as the attention benchmark does) would make
the patched pool rebuild on every sample, which is the rejection case, not the steady state.
Samples are interleaved A B B A, warm-up excluded, and S = 1 is the control: both arms run the
same code there, so their medians must agree within 2% or the context is marked invalid.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import mlx.core as mx

from mlatui.indexer import Indexer, IndexerCache, SparseMLAConfig
from mlatui.measure import abba, l1_check, timed_ms
from mlatui.records import BenchRecord, environment
from mlatui.sparse_mla import SparseMLACache, SparseMLAttention

ARMS = ("stock", "patched")
FAMILY = "glm5.3-flash"
DTYPES = {"float32": mx.float32, "bfloat16": mx.bfloat16, "float16": mx.float16}


def default_dtype() -> str:
    return "float32" if mx.default_device() == mx.cpu else "bfloat16"


def _sync(out: Any) -> None:
    mx.eval(out)


def _random_index(
    config: SparseMLAConfig, context: int, dtype: mx.Dtype
) -> tuple[mx.array, mx.array]:
    shape = (1, config.index_n_heads, context, config.index_head_dim)  # (B, H, T, D)
    keys = mx.random.normal(shape).astype(dtype)
    gates = mx.random.normal(shape[:3]).astype(dtype)  # (B, H, T)
    mx.eval(keys, gates)
    return keys, gates


def _time_arms(
    step: Callable[[str, int], Any],
    reps: int,
    warmup: int,
    emit: Callable[[dict], None] | None,
    info: dict[str, Any],
) -> dict[str, list[float]]:
    samples: dict[str, list[float]] = {a: [] for a in ARMS}
    order = abba(list(ARMS), warmup + reps)
    for i, arm in enumerate(order):
        ms = timed_ms(lambda arm=arm, i=i: step(arm, i // 2), _sync)
        warm = i < 2 * warmup
        if not warm:
            samples[arm].append(ms)
        if emit is not None:
            emit({**info, "arm": arm, "sample": i // 2, "ms": ms, "warmup": warm})
    return samples


def _records(
    bench: str,
    context: int,
    per_width: dict[int, dict[str, list[float]]],
    settings: dict[str, Any],
    env: dict[str, Any],
) -> list[BenchRecord]:
    valid, note = True, ""
    if 1 in per_width:
        s, p, diff, valid = l1_check(per_width[1]["stock"], per_width[1]["patched"])
        note = f"S=1 control: stock {s:.3f} ms, patched {p:.3f} ms, diff {diff:.1f}%"
        if not valid:
            note = "INVALID: " + note
    return [
        BenchRecord(
            bench, FAMILY, arm, context, width, per_width[width][arm], settings, env, valid, note
        )
        for width in per_width
        for arm in ARMS
    ]


def bench_indexer(
    config: SparseMLAConfig,
    context: int,
    widths: Sequence[int],
    reps: int,
    warmup: int,
    dtype: mx.Dtype,
    emit: Callable[[dict], None] | None = None,
    seed: int = 0,
) -> dict[int, dict[str, list[float]]]:
    mx.random.seed(seed)
    ix = Indexer(config)
    ix.set_dtype(dtype)
    mx.eval(ix.parameters())
    keys, gates = _random_index(config, context, dtype)
    reserve = (warmup + reps) * sum(widths) + 256
    caches = {}
    for arm in ARMS:
        caches[arm] = IndexerCache()
        caches[arm].prefill(keys, gates, reserve)
    del keys, gates
    first = caches["stock"]
    ix.mode = "patched"
    first_sel = ix(*_inputs(config, 1, dtype, seed), first)  # builds the pool once
    mx.eval(first_sel, first.keys, first.gates, first.pooled)
    caches["patched"] = first.copy()
    mx.eval(caches["patched"].keys, caches["patched"].pooled)
    out = {}
    for width in widths:
        inputs = [_inputs(config, width, dtype, seed + 1 + i) for i in range(warmup + reps)]

        def step(arm: str, i: int, inputs=inputs) -> Any:
            ix.mode = arm
            cache = caches[arm]
            sel = ix(*inputs[i], cache)
            return sel, cache.keys, cache.gates, cache.pooled

        info = {"bench": "indexer", "context": context, "width": width}
        out[width] = _time_arms(step, reps, warmup, emit, info)
        assert caches["stock"].offset == caches["patched"].offset
    return out


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


def bench_layer(
    config: SparseMLAConfig,
    context: int,
    widths: Sequence[int],
    reps: int,
    warmup: int,
    dtype: mx.Dtype,
    emit: Callable[[dict], None] | None = None,
    seed: int = 0,
) -> dict[int, dict[str, list[float]]]:
    """Whole layer: stock = (mla_gate stock, indexer stock), patched = (patched, patched)."""
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
    reserve = (warmup + reps) * sum(widths) + 256
    base = SparseMLACache()
    base.prefill(latent, keys, gates, pe, reserve)
    del keys, gates, latent
    x0 = mx.random.normal((1, 1, config.hidden_size)).astype(dtype)
    mx.eval(layer(x0, cache=base), base.latent, base.index.keys, base.index.pooled)  # pool once
    caches = {"stock": base, "patched": base.copy()}
    mx.eval(caches["patched"].latent, caches["patched"].index.keys, caches["patched"].index.pooled)
    out = {}
    for width in widths:
        xs = []
        for i in range(warmup + reps):
            x = mx.random.normal((1, width, config.hidden_size), key=mx.random.key(seed + 1 + i))
            xs.append(x.astype(dtype))  # (B, L, hidden)
        mx.eval(xs)

        def step(arm: str, i: int, xs=xs, width=width) -> Any:
            layer.set_modes(arm, arm)
            cache = caches[arm]
            mask = cache.make_mask(width, return_array=True)
            y = layer(xs[i], mask=mask, cache=cache)
            return y, cache.latent, cache.index.keys, cache.index.pooled

        info = {"bench": "sparse-layer", "context": context, "width": width}
        out[width] = _time_arms(step, reps, warmup, emit, info)
    return out


def run_indexer_bench(
    contexts: Sequence[int],
    widths: Sequence[int],
    reps: int,
    warmup: int,
    emit: Callable[[dict], None] | None = None,
    layer_contexts: Sequence[int] | None = None,
    dtype: str | None = None,
    config: SparseMLAConfig | None = None,
) -> list[BenchRecord]:
    """Indexer ms per step at every context x width, and the whole sparse layer's step ms at
    `layer_contexts` (default: the same contexts; pass [] to skip). S = 1 is always measured first
    as the control. `emit` receives one progress dict per sample (warm-up included, flagged)."""
    config = config or SparseMLAConfig()
    dtype = dtype or default_dtype()
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
    widths = [1, *sorted({int(w) for w in widths} - {1})]
    layer_contexts = list(contexts) if layer_contexts is None else list(layer_contexts)
    env = environment()
    settings = dict(
        reps=reps,
        warmup=warmup,
        dtype=dtype,
        order="ABBA",
        steps="consecutive, cache grows by S per step (all drafts accepted)",
        index_n_heads=config.index_n_heads,
        index_head_dim=config.index_head_dim,
        index_kpool=config.index_kpool,
        index_topk=config.index_topk,
        geometry=f"r{config.kv_lora_rank}-n{config.qk_nope_head_dim}-v{config.v_head_dim}",
        heads=config.num_attention_heads,
        hidden=config.hidden_size,
    )
    records: list[BenchRecord] = []
    for context in contexts:
        if context <= config.index_topk:
            raise ValueError(
                f"context {context} is within index_topk {config.index_topk}: the indexer is "
                "bypassed there; use contexts above it"
            )
        per_width = bench_indexer(config, context, widths, reps, warmup, DTYPES[dtype], emit)
        records += _records("indexer", context, per_width, settings, env)
        mx.clear_cache()
    for context in layer_contexts:
        per_width = bench_layer(config, context, widths, reps, warmup, DTYPES[dtype], emit)
        records += _records("sparse-layer", context, per_width, settings, env)
        mx.clear_cache()
    return records
