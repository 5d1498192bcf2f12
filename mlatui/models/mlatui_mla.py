"""mlatui's embedded model type: DeepSeek-V3 dense MLA layers plus pooled-indexer sparse layers.

Dense layers are mlx-lm's own `deepseek_v3` classes (so `mlatui.gate.mla.patch_model` finds them as
it finds any checkpoint's); layers listed in `sparse_layers` use `mlatui.models.indexer`'s sparse MLA
attention. Weights ship as float16 and are widened to `compute_dtype` on load: float32 is what
the CPU runs fastest (OpenBLAS) and what Metal/CUDA run without surprises.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import mlx.core as mx
import mlx.nn as nn
from mlx_lm.models import deepseek_v3 as dsv3
from mlx_lm.models.base import BaseModelArgs, create_attention_mask
from mlx_lm.models.cache import KVCache

from mlatui.gate.policy import STOCK_POLICY
from mlatui.models.indexer import SparseMLAConfig
from mlatui.models.sparse_mla import SparseMLAttention


@dataclass
class ModelArgs(BaseModelArgs):
    model_type: str = "mlatui_mla"
    vocab_size: int = 4096
    hidden_size: int = 256
    intermediate_size: int = 512
    num_hidden_layers: int = 6
    num_attention_heads: int = 4
    kv_lora_rank: int = 512
    q_lora_rank: int | None = None
    qk_rope_head_dim: int = 32
    qk_nope_head_dim: int = 128
    v_head_dim: int = 128
    sparse_layers: list[int] = field(default_factory=lambda: [4])
    index_n_heads: int = 4
    index_head_dim: int = 64
    index_kpool: int = 4
    index_topk: int = 256
    max_position_embeddings: int = 8192
    rms_norm_eps: float = 1e-6
    rope_theta: float = 10000.0
    rope_scaling: dict[str, Any] | None = None  # DeepSeek's YaRN keys, as real checkpoints carry
    tie_word_embeddings: bool = True
    compute_dtype: str = "float32"

    def dense_args(self) -> dsv3.ModelArgs:
        return dsv3.ModelArgs(
            vocab_size=self.vocab_size,
            hidden_size=self.hidden_size,
            intermediate_size=self.intermediate_size,
            num_hidden_layers=self.num_hidden_layers,
            num_attention_heads=self.num_attention_heads,
            num_key_value_heads=self.num_attention_heads,
            n_routed_experts=None,
            kv_lora_rank=self.kv_lora_rank,
            # dsv3 reads None as "no q LoRA" but annotates the field int
            q_lora_rank=self.q_lora_rank,  # type: ignore[arg-type]
            qk_rope_head_dim=self.qk_rope_head_dim,
            v_head_dim=self.v_head_dim,
            qk_nope_head_dim=self.qk_nope_head_dim,
            max_position_embeddings=self.max_position_embeddings,
            rms_norm_eps=self.rms_norm_eps,
            rope_theta=self.rope_theta,
            # dsv3 reads None as "no scaling" but annotates the field Dict
            rope_scaling=self.rope_scaling,  # type: ignore[arg-type]
        )

    def sparse_args(self) -> SparseMLAConfig:
        """The sparse layers' config: SparseMLAConfig's own schema, read from these flat keys."""
        return SparseMLAConfig.from_dict(asdict(self))


class SparseDecoderLayer(nn.Module):
    def __init__(self, args: ModelArgs):
        super().__init__()
        dense = args.dense_args()
        # Loaded as stock (mlx-lm's L == 1 gate, S == 1 pool reuse); the patched arm flips both.
        self.self_attn = SparseMLAttention(args.sparse_args(), STOCK_POLICY, indexer_mode="stock")
        self.mlp = dsv3.DeepseekV3MLP(dense)
        self.input_layernorm = nn.RMSNorm(args.hidden_size, eps=args.rms_norm_eps)
        self.post_attention_layernorm = nn.RMSNorm(args.hidden_size, eps=args.rms_norm_eps)

    def __call__(self, x: mx.array, mask: mx.array | None = None, cache: Any = None) -> mx.array:
        h = x + self.self_attn(self.input_layernorm(x), mask, cache)
        return h + self.mlp(self.post_attention_layernorm(h))


class MlatuiModel(nn.Module):
    def __init__(self, args: ModelArgs):
        super().__init__()
        dense = args.dense_args()
        self.sparse_layers = set(args.sparse_layers)
        self.embed_tokens = nn.Embedding(args.vocab_size, args.hidden_size)
        self.layers = [
            SparseDecoderLayer(args)
            if i in self.sparse_layers
            else dsv3.DeepseekV3DecoderLayer(dense, i)
            for i in range(args.num_hidden_layers)
        ]
        self.norm = nn.RMSNorm(args.hidden_size, eps=args.rms_norm_eps)

    def __call__(self, inputs: mx.array, cache: list[Any] | None = None) -> mx.array:
        h = self.embed_tokens(inputs)
        if cache is None:
            cache = [None] * len(self.layers)
        mask = create_attention_mask(h, cache[0], return_array=True)  # sparse caches make masks too
        for layer, c in zip(self.layers, cache, strict=True):
            h = layer(h, mask, c)
        return self.norm(h)


class Model(nn.Module):
    def __init__(self, args: ModelArgs):
        super().__init__()
        self.args = args
        self.model_type = args.model_type
        self.model = MlatuiModel(args)
        if not args.tie_word_embeddings:
            self.lm_head = nn.Linear(args.hidden_size, args.vocab_size, bias=False)

    def __call__(self, inputs: mx.array, cache: list[Any] | None = None) -> mx.array:
        h = self.model(inputs, cache)
        if self.args.tie_word_embeddings:
            return self.model.embed_tokens.as_linear(h)
        return self.lm_head(h)

    @property
    def layers(self) -> list[nn.Module]:
        return list(self.model.layers)

    # Tensor parallel exactly as mlx-lm shards deepseek_v3 (its own method, run on this model):
    # heads and MLP columns split, o_proj / down_proj summed across ranks. The sparse layers'
    # attention has the same projections and is split alike; their indexer stays whole on every
    # rank, so every rank selects the same tokens.
    shard = dsv3.Model.shard

    def make_cache(self) -> list[Any]:
        return [
            layer.self_attn.make_cache() if i in self.model.sparse_layers else KVCache()
            for i, layer in enumerate(self.layers)
        ]

    def sanitize(self, weights: dict[str, mx.array]) -> dict[str, mx.array]:
        """Widen to compute_dtype; drop the MTP layers (`model.layers.{n}.*`, n >= the trunk's
        layers), which `mlatui.run.drafts.load_mtp_draft` reads from the files, as deepseek_v3 does."""
        dtype = getattr(mx, self.args.compute_dtype)
        n = self.args.num_hidden_layers
        return {
            k: v.astype(dtype)
            if mx.issubdtype(v.dtype, mx.floating) and not k.endswith((".scales", ".biases"))
            else v
            for k, v in weights.items()
            if not (k.startswith("model.layers.") and int(k.split(".")[2]) >= n)
        }
