"""Necessary bytes per step: what a forward of L new tokens at cache length T must read at least.

Counted from the model's own parameters (their shapes and dtypes, quantised or not: packed
weights, scales and biases are all parameters), so every family mlx-lm or mlx-vlm builds is
counted the same way, and a lazily built model (nothing allocated) counts as well as a loaded one:

- weights: every parameter of a layer is read whole, except routed experts (mlx-lm's SwitchGLU /
  SwitchMLP), of which a step reads between top-k (all its tokens route alike) and
  min(experts, L x top-k) (every token routes elsewhere); the input embedding reads one row per
  token (a tied embedding is also the output projection and is read whole);
- cache: an absorbed step reads every cached latent and rope key of every MLA layer (T + L rows:
  the cache after this step's update); a sparse layer reads its indexer's keys for every row and
  the latent rows of at most L x top-k selected positions;
- the materialised branch writes and reads back full K and V per head for every row: bytes it did
  not need, kept apart (`materialised_extra`).
"""

from __future__ import annotations

import re
from typing import Any

import mlx.nn as nn

from mlatui.measure.bandwidth import (
    AttentionCache,
    LayerWeights,
    ModelBytes,
    RoutedExperts,
    StepBandwidth,
)
from mlatui.models.mx_typed import flat_arrays

TOP_K_NAMES = ("num_experts_per_tok", "num_experts_per_token", "moe_topk", "top_k")
LAYER_INDEX = re.compile(r"(?:^|\.)layers\.(\d+)\.")


def _nbytes(params: Any) -> int:
    return sum(int(a.nbytes) for _, a in flat_arrays(params))


def _top_k(owner: nn.Module | None, config: dict[str, Any]) -> int:
    """How many routed experts a token takes: an attribute of the MoE block or one of its
    children (the router), else the config's."""
    places: list[Any] = [owner]
    if owner is not None:
        places += [m for _, m in owner.named_modules()]
    for where in (*places, config):
        for name in TOP_K_NAMES:
            value = where.get(name) if isinstance(where, dict) else getattr(where, name, None)
            if isinstance(value, int) and value > 0:
                return value
    raise ValueError(
        "routed experts found but no top-k (num_experts_per_tok) in the model or config"
    )


def _routed(model: nn.Module, config: dict[str, Any]) -> dict[str, RoutedExperts]:
    """Path of every routed-expert block (the parent of mlx-lm's or mlx-vlm's SwitchLinear
    modules: SwitchGLU, SwitchMLP, FusedSwitchGLU, ...) -> its experts."""
    modules = dict(model.named_modules())
    blocks = {
        name.rpartition(".")[0]
        for name, m in modules.items()
        if type(m).__name__.endswith("SwitchLinear")
    }
    found = {}
    for name in blocks:
        module = modules[name]
        total = _nbytes(module.parameters())
        leading = {a.shape[0] for _, a in flat_arrays(module.parameters()) if a.ndim == 3}
        if len(leading) != 1:
            raise ValueError(f"{name}: cannot tell the number of experts from its weights")
        count = leading.pop()
        owner = modules.get(name.rpartition(".")[0])
        found[name] = RoutedExperts(count, total // count, _top_k(owner, config))
    return found


def _embeddings(model: nn.Module) -> dict[str, int]:
    """Path -> rows of every input embedding a step reads a row of per token; none where the
    model has no output projection of its own (tied: the table is read whole)."""
    params = flat_arrays(model.parameters())
    if not any(k.endswith("lm_head.weight") for k, _ in params):
        return {}
    return {
        name: int(m.weight.shape[0])
        for name, m in model.named_modules()
        if isinstance(m, (nn.Embedding, nn.QuantizedEmbedding))
    }


def _rope_dim(m: nn.Module) -> int | None:
    rope = getattr(m, "qk_rope_head_dim", None)
    if rope is None and hasattr(m, "q_head_dim"):
        rope = m.q_head_dim - m.qk_nope_head_dim
    return None if rope is None else int(rope)


def _caches(model: nn.Module, itemsize: int, config: dict[str, Any]) -> tuple[AttentionCache, ...]:
    """Every MLA attention module's cache rows (a module with the MLA ranks)."""
    out = []
    for _, m in model.named_modules():
        if not all(hasattr(m, a) for a in ("kv_lora_rank", "qk_nope_head_dim", "v_head_dim")):
            continue
        rope = _rope_dim(m)
        if rope is None:
            continue
        indexer = getattr(m, "indexer", None)
        index_dim = index_topk = 0
        if indexer is not None:
            index_dim = int(getattr(indexer, "head_dim", 0) or config.get("index_head_dim", 0))
            index_topk = int(getattr(indexer, "index_topk", 0) or config.get("index_topk", 0))
        heads = int(getattr(m, "num_heads", 0) or getattr(m, "num_attention_heads", 0))
        out.append(
            AttentionCache(
                int(m.kv_lora_rank),
                rope,
                int(heads),
                int(m.qk_nope_head_dim),
                int(m.v_head_dim),
                itemsize,
                index_dim,
                index_topk,
            )
        )
    return tuple(out)


def model_bytes(
    model: nn.Module, cache_itemsize: int, config: dict[str, Any] | None = None
) -> ModelBytes:
    """`model`'s parameters (evaluated or lazy: only shapes and dtypes are read) sorted by how a
    step reads them; `config` (the text config) supplies top-k and indexer sizes where the
    modules do not say them; `cache_itemsize`: bytes per cached element (the activations' dtype)."""
    config = config or {}
    routed = _routed(model, config)
    embeddings = _embeddings(model)
    layers: dict[int, int] = {}
    routed_of: dict[int, RoutedExperts] = {}
    other = embedding = rows = 0
    for key, array in flat_arrays(model.parameters()):
        size = int(array.nbytes)
        block = next((p for p in routed if key.startswith(p + ".")), None)
        layer = LAYER_INDEX.search(key)
        if block is not None:
            if layer is None:
                raise ValueError(f"{key}: routed experts outside a numbered layer")
            routed_of[int(layer.group(1))] = routed[block]
        elif key.rpartition(".")[0] in embeddings:
            embedding += size
            rows += size // embeddings[key.rpartition(".")[0]]
        elif layer is not None:
            layers[int(layer.group(1))] = layers.get(int(layer.group(1)), 0) + size
        else:
            other += size
    indices = sorted(set(layers) | set(routed_of))
    return ModelBytes(
        tuple(LayerWeights(layers.get(i, 0), routed_of.get(i)) for i in indices),
        other,
        rows,
        _caches(model, cache_itemsize, config),
        embedding,
    )


def attention_bytes(attn: nn.Module, cache_itemsize: int) -> ModelBytes:
    """One attention layer on its own (the forced-branch benchmark): its weights, read whole,
    and its cache."""
    return ModelBytes(
        (LayerWeights(_nbytes(attn.parameters())),), 0, 0, _caches(attn, cache_itemsize, {})
    )


def cache_itemsize(model: nn.Module) -> int:
    """Bytes per cached element: the model's activations' dtype, read off its first norm's
    weight (norms are never quantised)."""
    for _, m in model.named_modules():
        if isinstance(m, (nn.RMSNorm, nn.LayerNorm)) and "weight" in m:
            return int(m.weight.dtype.size)
    return 2


def step_bandwidth(model: nn.Module) -> StepBandwidth | None:
    """A run's StepBandwidth: the target's census and this device's measured read limit (the
    header's, probed at the run's start); None for a model whose experts it cannot count (the
    run goes on without GB/s and MBU)."""
    from mlatui.measure.records import environment
    from mlatui.store import kept_limit

    args = getattr(model, "args", None)
    config = vars(args) if args is not None and hasattr(args, "__dict__") else {}
    try:
        census = model_bytes(model, cache_itemsize(model), config)
    except ValueError:
        return None
    return StepBandwidth(census, kept_limit(environment()).read_gb_s)
