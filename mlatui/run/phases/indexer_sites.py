"""The sparse layers of the arms' own model, as the indexer phase steps them: where they are,
their geometry, and one arm's layer at one context with its inputs (used on that arm's thread).

One sample appends S tokens to a cache of exactly `context` tokens whose pool is current (all
drafts accepted) and is rewound to it outside the timed region (`rewind` of
mlatui.models.indexer_parts; mlatui.bench.indexer's docstring says why that is exact). Inputs are seeded unit-scale hidden states, the same in both
arms: the pool refresh, the scoring, the top-k and the gathers cost the same whatever the values.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import mlx.core as mx
import numpy as np

from mlatui.config.scenario import Phase
from mlatui.measure.estimates import stable_seed
from mlatui.measure.indexer_records import IndexerPart
from mlatui.measure.timing import timed_ms
from mlatui.models.indexer import SparseMLAConfig
from mlatui.models.indexer_parts import INPUTS_PER_WIDTH, rewind
from mlatui.run.arms import Arm

# Stock re-pools every window, patched only the tail: the same windows from the same tokens, so
# the selections must agree exactly; the layer's MLA branch may differ (absorbed vs materialised:
# the same sums in another order), a few ULP of the dtype relative to the output's scale.
PARITY_ULPS = 64
EPS = {mx.float32: 2.0**-23, mx.bfloat16: 2.0**-7, mx.float16: 2.0**-10}


@dataclass(frozen=True)
class SparseSite:
    """One sparse layer of a model: its position in `model.layers` (and the cache list), its
    module path, its geometry, and how many sparse layers share that geometry."""

    layer: int
    name: str
    config: SparseMLAConfig
    sharing: int = 1

    def describe(self) -> str:
        c = self.config
        return (
            f"{self.name} (MLA r/n/v {c.kv_lora_rank}/{c.qk_nope_head_dim}/{c.v_head_dim}, "
            f"{c.num_attention_heads} heads; indexer {c.index_n_heads}x{c.index_head_dim}, "
            f"pool {c.index_kpool}, top-k {c.index_topk})"
        )


def sparse_sites(model: Any) -> list[SparseSite]:
    """The model's pooled-indexer sparse layers, one per geometry (first layer of each)."""
    found: dict[str, SparseSite] = {}
    for i, layer in enumerate(getattr(model, "layers", None) or []):
        attn = getattr(layer, "self_attn", None)
        config = getattr(attn, "config", None)
        if not (isinstance(config, SparseMLAConfig) and hasattr(attn, "indexer")):
            continue
        key = repr(config)
        if key in found:
            found[key] = replace(found[key], sharing=found[key].sharing + 1)
        else:
            found[key] = SparseSite(i, f"layers.{i}.self_attn", config)
    return list(found.values())


def load_warnings(model: Any, model_name: str, phases: tuple[Phase, ...]) -> list[str]:
    """What the scenario's indexer phases cannot do on this model, said once at load."""
    wanted = [p for p in phases if p.kind.rules.sparse_sites]
    if not wanted:
        return []
    sites = sparse_sites(model)
    if not sites:
        names = ", ".join(p.name for p in wanted)
        return [
            f"{names}: {model_name} has no sparse layer with a pooled indexer, so the indexer "
            "phase is skipped (use a model with sparse layers, e.g. the embedded model)"
        ]
    topk = sites[0].config.index_topk
    out = []
    for p in wanted:
        low = [c for c in p.contexts if c <= topk]
        if low:
            out.append(
                f"{p.name}: contexts {', '.join(map(str, low))} are within index_topk {topk}: the "
                "indexer is bypassed there and they are skipped"
            )
    return out


@dataclass
class ArmSite:
    """One arm's sparse layer at one context, with its inputs; touched only on that arm's thread."""

    attn: Any
    cache: Any  # the arm's SparseMLACache of that layer
    context: int
    inputs: dict[int, list[tuple[mx.array, mx.array]]]  # width -> [(x, qr)]
    masks: dict[int, Any]
    calls: dict[tuple[str, int], int] = field(default_factory=dict)


def prepare(arm: Arm, site: SparseSite, widths: tuple[int, ...], seed: int) -> ArmSite:
    attn = arm.model.layers[site.layer].self_attn
    cache = arm.caches[site.layer]
    index = cache.index
    if index.pool_length != cache.offset:  # e.g. a random-latents fill has no pool yet
        index.refresh_pool(attn.indexer.kpool, 0, False, attn.indexer.compress_ape)
    dtype = attn.kv_a_layernorm.weight.dtype
    inputs: dict[int, list[tuple[mx.array, mx.array]]] = {}
    for w in widths:
        inputs[w] = []
        for i in range(INPUTS_PER_WIDTH):
            key = mx.random.key(stable_seed(seed, "indexer-input", w, i))
            x = mx.random.normal((1, w, site.config.hidden_size), key=key).astype(dtype)
            qr = attn.q_a_layernorm(attn.q_a_proj(x)) if attn.q_lora_rank else x  # (1, S, q)
            inputs[w].append((x, qr))
    masks = {w: cache.make_mask(w, return_array=True) for w in widths}  # every sample at context
    mx.eval(inputs, [m for m in masks.values() if isinstance(m, mx.array)], index.pooled)
    return ArmSite(attn, cache, cache.offset, inputs, masks)


def _forward(s: ArmSite, part: str, width: int, i: int) -> tuple[list[mx.array], Any]:
    """(arrays to sync, the output) of one step of `part`."""
    x, qr = s.inputs[width][i]
    index = s.cache.index
    if part == IndexerPart.INDEXER:
        sel = s.attn.indexer(x, qr, index)
        return [*sel, index.keys, index.gates, index.pooled], sel
    y = s.attn(x, mask=s.masks[width], cache=s.cache)
    return [y, s.cache.latent, index.keys, index.pooled], y


def step(s: ArmSite, arm: Arm, part: str, width: int) -> tuple[float, int, int, int, int]:
    """One timed step from the context, then rewound: (ms, pool rebuilds, pool reuses, absorbed
    calls, materialised calls)."""
    index = s.cache.index
    if s.cache.offset != s.context or index.pool_length != s.context:
        raise RuntimeError(
            f"{part} @ {s.context}: {arm.name} cache at {s.cache.offset} (pool "
            f"{index.pool_length}) before a step; every sample must start at the context"
        )
    n = s.calls.get((part, width), 0)
    s.calls[(part, width)] = n + 1
    rebuilds, reuses = index.rebuilds, index.reuses
    before = arm.counters.total()
    ms = timed_ms(lambda: _forward(s, part, width, n % INPUTS_PER_WIDTH)[0], mx.eval)
    after = arm.counters.total()
    rebuilt = index.rebuilds - rebuilds
    if rebuilt and s.attn.indexer.mode == "patched":
        raise RuntimeError(
            f"{part} @ {s.context}: the {arm.name} arm's patched pool was rebuilt at S={width}; "
            "the harness is measuring the rejection case, not consecutive accepted steps"
        )
    rewind(index if part == IndexerPart.INDEXER else s.cache, index, s.context)
    return ms, rebuilt, index.reuses - reuses, after[0] - before[0], after[1] - before[1]


def output(s: ArmSite, part: str, width: int) -> np.ndarray:
    """One untimed step's output as plain numbers (selections: sorted token ids, -1 unused)."""
    _, out = _forward(s, part, width, 0)
    if part == IndexerPart.INDEXER:
        idx, valid = out
        result = np.sort(np.array(mx.where(valid, idx, -1)), axis=-1)
    else:
        result = np.array(out.astype(mx.float32))
    rewind(s.cache.index if part == IndexerPart.INDEXER else s.cache, s.cache.index, s.context)
    return result


def parity_tolerance(dtype: mx.Dtype) -> float:
    """The layer outputs' allowed max |stock - patched| / max |stock|."""
    return PARITY_ULPS * EPS.get(dtype, EPS[mx.float32])
