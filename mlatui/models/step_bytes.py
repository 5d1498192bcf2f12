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
from dataclasses import dataclass
from typing import Any

import mlx.nn as nn

from mlatui.models.mx_typed import flat_arrays

TOP_K_NAMES = ("num_experts_per_tok", "num_experts_per_token", "moe_topk", "top_k")
LAYER_INDEX = re.compile(r"(?:^|\.)layers\.(\d+)\.")


@dataclass(frozen=True)
class ByteRange:
    """Fewest and most bytes a step may need (equal where nothing depends on routing)."""

    low: int
    high: int

    def __add__(self, other: ByteRange) -> ByteRange:
        return ByteRange(self.low + other.low, self.high + other.high)


@dataclass(frozen=True)
class RoutedExperts:
    """One layer's routed experts: how many, the bytes of one, and how many a token takes."""

    count: int
    expert_bytes: int
    top_k: int

    def read(self, width: int) -> ByteRange:
        most = min(self.count, width * self.top_k)
        return ByteRange(min(self.top_k, most) * self.expert_bytes, most * self.expert_bytes)


@dataclass(frozen=True)
class LayerWeights:
    whole_bytes: int  # read whole every step: attention, dense MLP, shared experts, norms, router
    routed: RoutedExperts | None = None

    def read(self, width: int) -> ByteRange:
        whole = ByteRange(self.whole_bytes, self.whole_bytes)
        return whole + self.routed.read(width) if self.routed else whole


@dataclass(frozen=True)
class AttentionCache:
    """What one MLA layer caches per row, and what a sparse layer's indexer adds."""

    kv_lora_rank: int
    qk_rope_head_dim: int
    num_heads: int
    qk_nope_head_dim: int
    v_head_dim: int
    itemsize: int  # bytes per cached element
    index_head_dim: int = 0  # 0: a dense layer
    index_topk: int = 0

    def read(self, rows: int, width: int) -> ByteRange:
        """Latent + rope rows an absorbed step reads (all of them, or the selected ones on a
        sparse layer, whose indexer also reads a key per row)."""
        per_row = (self.kv_lora_rank + self.qk_rope_head_dim) * self.itemsize
        if not self.index_head_dim:
            return ByteRange(rows * per_row, rows * per_row)
        keys = rows * self.index_head_dim * self.itemsize
        fewest, most = min(rows, self.index_topk), min(rows, width * self.index_topk)
        return ByteRange(keys + fewest * per_row, keys + most * per_row)

    def materialised_extra(self, rows: int) -> int:
        """Full K (nope part) and V per head, written once and read back once."""
        return 2 * rows * self.num_heads * (self.qk_nope_head_dim + self.v_head_dim) * self.itemsize


@dataclass(frozen=True)
class StepBytes:
    weights: ByteRange
    cache: ByteRange
    materialised_extra: int  # what the materialised branch builds and reads back, beyond `cache`

    @property
    def total(self) -> ByteRange:
        return self.weights + self.cache

    def to_dict(self) -> dict[str, int]:
        return {
            "weights_low": self.weights.low,
            "weights_high": self.weights.high,
            "cache_low": self.cache.low,
            "cache_high": self.cache.high,
            "materialised_extra": self.materialised_extra,
        }


@dataclass(frozen=True)
class ModelBytes:
    """A model's parameters sorted by how a step reads them, and its attention caches."""

    layers: tuple[LayerWeights, ...]
    other_bytes: int  # outside the layers, read whole: final norm, output projection
    embedding_row_bytes: int  # a row of every input embedding (0: tied, counted in other_bytes)
    caches: tuple[AttentionCache, ...]
    embedding_bytes: int = 0  # the untied input embedding's whole table

    @property
    def parameter_bytes(self) -> int:
        """Every parameter once (the weights' footprint)."""
        layers = sum(
            w.whole_bytes + (w.routed.count * w.routed.expert_bytes if w.routed else 0)
            for w in self.layers
        )
        return layers + self.other_bytes + self.embedding_bytes

    def step(self, width: int, context: int) -> StepBytes:
        """Bytes a step of `width` new tokens reads on a cache holding `context` tokens."""
        rows = context + width
        weights = ByteRange(self.other_bytes, self.other_bytes)
        weights += ByteRange(width * self.embedding_row_bytes, width * self.embedding_row_bytes)
        for layer in self.layers:
            weights += layer.read(width)
        cache = ByteRange(0, 0)
        for c in self.caches:
            cache += c.read(rows, width)
        extra = sum(c.materialised_extra(rows) for c in self.caches)
        return StepBytes(weights, cache, extra)


def _nbytes(params: Any) -> int:
    return sum(int(a.nbytes) for _, a in flat_arrays(params))


def _top_k(owner: nn.Module | None, config: dict[str, Any]) -> int:
    for where in (owner, getattr(owner, "gate", None), getattr(owner, "router", None), config):
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
