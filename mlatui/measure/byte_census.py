"""Necessary bytes per step, as arithmetic on a model's byte census (pure Python: estimates
carry each step's bytes, `StepBytes.to_dict`, so any printer reads them back without mlx).
mlatui.models.step_bytes takes the census of a built model; what each figure counts is said
there."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


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

    @classmethod
    def from_dict(cls, data: Mapping[str, int]) -> StepBytes:
        """As `to_dict` wrote it (a bench record's `step_bytes`)."""
        return cls(
            ByteRange(int(data["weights_low"]), int(data["weights_high"])),
            ByteRange(int(data["cache_low"]), int(data["cache_high"])),
            int(data["materialised_extra"]),
        )


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
