"""Model sizes the trainer knows: (target args, draft args), fresh objects on every call.

`full` is the shipped geometry: 6 layers, hidden 256, MLA r/n/v 512/128/128 with RoPE 32 (the
absorbed/materialised threshold tends to 170, as for DeepSeek-V3), layer 4 sparse; the MTP head
adds one dense layer of the same shape. `tiny` is for CPU checks.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mlatui.models.mlatui_mla import ModelArgs


def full() -> tuple[ModelArgs, ModelArgs]:
    return (
        ModelArgs(),
        ModelArgs(
            num_hidden_layers=2,
            sparse_layers=[],
            kv_lora_rank=128,
            qk_nope_head_dim=64,
            v_head_dim=64,
        ),
    )


def tiny() -> tuple[ModelArgs, ModelArgs]:
    small: dict[str, Any] = dict(
        hidden_size=64, intermediate_size=128, qk_nope_head_dim=16, v_head_dim=16
    )
    return (
        ModelArgs(
            num_hidden_layers=2,
            sparse_layers=[1],
            index_topk=16,
            kv_lora_rank=64,
            qk_rope_head_dim=8,
            **small,
        ),
        ModelArgs(
            num_hidden_layers=1, sparse_layers=[], kv_lora_rank=32, qk_rope_head_dim=8, **small
        ),
    )


def deep_draft() -> ModelArgs:
    """A deeper, wider draft for distillation from a frozen teacher (`train --teacher`): 4 layers,
    MLP 768, the small draft's MLA ranks, so drafting stays cheap next to the target."""
    return ModelArgs(
        num_hidden_layers=4,
        intermediate_size=768,
        sparse_layers=[],
        kv_lora_rank=128,
        qk_nope_head_dim=64,
        v_head_dim=64,
    )


PRESETS: dict[str, Callable[[], tuple[ModelArgs, ModelArgs]]] = {"full": full, "tiny": tiny}
DRAFT_PRESETS: dict[str, Callable[[], ModelArgs]] = {
    "small": lambda: full()[1],
    "deep": deep_draft,
    "tiny": lambda: tiny()[1],
}
