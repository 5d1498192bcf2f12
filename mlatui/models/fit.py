"""Whether a run fits in memory, estimated from its model's config and scenario before loading.

MLX does not fail politely when it cannot allocate: a random build of a full-size DeepSeek-V3 or a
4M-token context ended in signal 11 with no message and no recording. So the engine refuses, with
the estimate, what cannot fit:

- weights: the parameters' bytes (a random build counts its lazy arrays before evaluating them; a
  checkpoint folder its safetensors files), shared by both arms;
- caches: every MLA layer caches the latent (kv_lora_rank) and the rope key (qk_rope_head_dim)
  per token, in the model's dtype, for three copies (the prefill's base and one per arm), at the
  largest context plus what the widest step or a decode round appends;
- the stock arm's materialised K/V of one layer at that context (what the L >= 2 branch builds).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mlatui.errors import UserError


class FitError(UserError):
    """The run would not fit the device: refused before loading, with the estimate."""


DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}
CACHE_COPIES = 3  # the prefill's base cache and each arm's copy
GB = 1024**3


@dataclass(frozen=True)
class FitEstimate:
    weights_bytes: int
    cache_bytes: int
    transient_bytes: int
    context: int
    device_bytes: int | None
    device_what: str

    @property
    def total_bytes(self) -> int:
        return self.weights_bytes + self.cache_bytes + self.transient_bytes

    @property
    def fits(self) -> bool:
        return self.device_bytes is None or self.total_bytes <= self.device_bytes

    def describe(self) -> str:
        have = (
            f"this device has {size(self.device_bytes)} ({self.device_what})"
            if self.device_bytes is not None
            else "device memory unknown"
        )
        return (
            f"needs ~{size(self.total_bytes)} (weights {size(self.weights_bytes)} + caches "
            f"{size(self.cache_bytes + self.transient_bytes)} at context {self.context}), {have}"
        )


def size(n: int) -> str:
    return f"{n / GB:.1f} GB" if n >= GB / 10 else f"{n / 1024**2:.1f} MB"


def largest_context(scenario: Any, decoded_only: bool = False) -> int:
    """The longest cache any phase builds: its context plus the widest step or a decode round.
    `decoded_only`: the tune and decode phases', whose text and acceptance depend on the model
    having been trained that far (a sweep's or indexer's step costs the same on any tokens)."""
    longest = 0
    for p in scenario.phases:
        timing_only = p.kind.rules.timed_widths
        if decoded_only and timing_only:
            continue
        extra = max(p.widths) if timing_only else p.tokens * 2 * (2 + len(p.depths))
        longest = max(longest, max(p.contexts) + extra)
    return longest


def cache_bytes_per_token(config: dict[str, Any], dtype: str) -> int:
    """One cache copy, all layers, one token: latent + rope key (MLA); K + V heads otherwise."""
    layers = int(config.get("num_hidden_layers", 0))
    b = DTYPE_BYTES.get(dtype, 4)
    if config.get("kv_lora_rank"):
        return layers * (int(config["kv_lora_rank"]) + int(config.get("qk_rope_head_dim", 0))) * b
    heads = int(config.get("num_key_value_heads") or config.get("num_attention_heads", 0))
    head_dim = int(
        config.get("head_dim")
        or config.get("hidden_size", 0) // max(1, config.get("num_attention_heads", 1))
    )
    return layers * 2 * heads * head_dim * b


def materialised_bytes(config: dict[str, Any], dtype: str, context: int) -> int:
    """The stock arm's K and V of one MLA layer at `context` (its L >= 2 branch)."""
    if not config.get("kv_lora_rank"):
        return 0
    heads = int(config.get("num_attention_heads", 0))
    per_head = int(config.get("qk_nope_head_dim", 0)) + int(config.get("qk_rope_head_dim", 0))
    per_head += int(config.get("v_head_dim", 0))
    return context * heads * per_head * DTYPE_BYTES.get(dtype, 4)


def folder_weights_bytes(folder: str | Path) -> int:
    return sum(f.stat().st_size for f in Path(folder).glob("*.safetensors"))


def device_memory() -> tuple[int | None, str]:
    """What the run may use: on Metal the smaller of its recommended working set and the memory
    available now (unified memory: other apps hold part of it), CUDA's free memory, RAM on CPU.
    Memory the host shares (Metal's, the CPU's) is divided among the ranks on this host."""
    import mlx.core as mx

    info: dict[str, Any] = {}
    try:
        info = dict(mx.device_info())
    except Exception:  # noqa: BLE001 - device_info differs per backend
        pass
    if mx.default_device() == mx.gpu:
        working_set = info.get("max_recommended_working_set_size")
        if working_set:
            return _host_share(*_unified_memory(int(working_set)))
        for key, what in (("free_memory", "free GPU memory"), ("total_memory", "GPU memory")):
            if info.get(key):
                return int(info[key]), what
        return None, "unknown"
    return _host_share(*_cpu_memory())


def _unified_memory(working_set: int) -> tuple[int, str]:
    import psutil

    available = int(psutil.virtual_memory().available)
    if working_set <= available:
        return working_set, "Metal working set (recommended)"
    return available, f"available now, under Metal's recommended working set of {size(working_set)}"


def _host_share(have: int, what: str) -> tuple[int, str]:
    """One rank's share of memory that every rank on this host draws from."""
    from mlatui.host.distributed import host_ranks

    ranks = host_ranks()
    if ranks == 1:
        return have, what
    return have // ranks, f"{what}, shared by {ranks} ranks on this host"


def _cpu_memory() -> tuple[int, str]:
    """Available RAM, or less where an address-space limit (ulimit -v) leaves less: past it MLX
    cannot allocate and dies with signal 11."""
    import resource

    import psutil

    have, what = int(psutil.virtual_memory().available), "available RAM"
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft != resource.RLIM_INFINITY:
        left = max(0, soft - psutil.Process().memory_info().vms)
        if left < have:
            have, what = left, "left under the address-space limit, ulimit -v"
    return have, what


def estimate(
    config: dict[str, Any], dtype: str, weights_bytes: int, context: int, device=None
) -> FitEstimate:
    have, what = device if device is not None else device_memory()
    return FitEstimate(
        weights_bytes,
        CACHE_COPIES * context * cache_bytes_per_token(config, dtype),
        materialised_bytes(config, dtype, context),
        context,
        have,
        what,
    )


FIT_HINT = (
    "use smaller contexts (the scenario's, or bench's --contexts), fewer layers, or --force to "
    "try anyway"
)


def refuse_unless_fits(e: FitEstimate, force: bool, hint: str = FIT_HINT) -> None:
    if not e.fits and not force:
        raise FitError(e.describe(), hint)


def context_warnings(
    config: dict[str, Any], context: int, trained_window: int | None = None
) -> list[str]:
    """Contexts a model was not built or trained for: run, but say so."""
    out = []
    limit = config.get("max_position_embeddings")
    if isinstance(limit, int) and context > limit:
        out.append(
            f"context {context} is beyond the model's max_position_embeddings {limit}: positions "
            "past it are extrapolated"
        )
    if trained_window and context > trained_window:
        out.append(
            f"context {context} is beyond the {trained_window} tokens the model and its drafts "
            "were trained and measured at: its text and acceptance there are out of distribution"
        )
    return out


# ---- the benchmarks of one layer: bench attention (a), calibrate, bench indexer ------------


def _bytes(dtype: str, bits: int | None = None) -> float:
    return bits / 8 + 0.125 if bits else DTYPE_BYTES.get(dtype, 4)  # + group scales and biases


def attention_weights_bytes(config: dict[str, Any], dtype: str, bits: int | None = None) -> int:
    """One MLA attention layer's projections (q, kv_a, kv_b or embed_q/unembed_out, o)."""
    hidden, heads = int(config["hidden_size"]), int(config["num_attention_heads"])
    r, rope = int(config["kv_lora_rank"]), int(config.get("qk_rope_head_dim", 0))
    nope, v = int(config["qk_nope_head_dim"]), int(config["v_head_dim"])
    q_rank = config.get("q_lora_rank")
    q = (
        hidden * q_rank + q_rank * heads * (nope + rope)
        if q_rank
        else hidden * heads * (nope + rope)
    )
    params = q + hidden * (r + rope) + r * heads * (nope + v) + heads * v * hidden
    return int(params * _bytes(dtype, bits))


def step_bytes(heads: int, width: int, context: int, dtype: str) -> int:
    """The attention scores of one step (L x T per head) and their softmax: the unfused path
    MLX takes for MLA's head sizes builds both."""
    return 2 * heads * width * (context + width) * DTYPE_BYTES.get(dtype, 4)


def forced_layer_estimate(
    config: dict[str, Any], dtype: str, bits: int | None, context: int, width: int, device=None
) -> FitEstimate:
    """`bench attention` (a) and `calibrate`: one layer, its random latent cache at `context`
    (drawn in float32, then cast), the materialised K/V and one step's scores at `width`."""
    have, what = device if device is not None else device_memory()
    heads = int(config["num_attention_heads"])
    per_token = int(config["kv_lora_rank"]) + int(config.get("qk_rope_head_dim", 0))
    cache = (context + width) * per_token * (DTYPE_BYTES.get(dtype, 4) + 4)
    transient = materialised_bytes(config, dtype, context + width)
    transient += step_bytes(heads, width, context, dtype)
    return FitEstimate(
        attention_weights_bytes(config, dtype, bits), cache, transient, context, have, what
    )


def indexer_estimate(config: Any, dtype: str, context: int, width: int, device=None) -> FitEstimate:
    """`bench indexer`: the sparse layer (indexer included) and, per context, the index keys and
    gates (drawn in float32), the latent, three copies (the base and each arm's), the pooled
    keys, one step's pool scores and the stock arm's materialised K/V."""
    have, what = device if device is not None else device_memory()
    b = DTYPE_BYTES.get(dtype, 4)
    c = dataclasses.asdict(config)
    ix_heads, ix_dim = c["index_n_heads"], c["index_head_dim"]
    weights = attention_weights_bytes(c, dtype)
    weights += int(
        (c["hidden_size"] + (c["q_lora_rank"] or c["hidden_size"])) * ix_heads * ix_dim * b
    )
    length = context + width + 256
    per_token = ix_heads * (ix_dim + 1) * b * (1 + 1 / c["index_kpool"])
    per_token += (c["kv_lora_rank"] + c["qk_rope_head_dim"]) * b
    cache = int(CACHE_COPIES * length * per_token + length * ix_heads * (ix_dim + 1) * 4)
    transient = materialised_bytes(c, dtype, length)
    transient += ix_heads * width * (length // c["index_kpool"] + 1) * 4 * 2
    return FitEstimate(weights, cache, transient, context, have, what)


# ---- before a model is even built -----------------------------------------------------------


def _int(config: dict[str, Any], key: str) -> int:
    value = config.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def config_weights_lower_bound(config: dict[str, Any], dtype: str, bits: int | None = None) -> int:
    """Weights a decoder of this config holds at least (embeddings, attention, dense and expert
    MLPs; whatever is unknown counts 0). Only used to refuse before building: a random build of
    100K layers takes minutes to make its modules, a 2e9-token vocabulary crashes MLX's init."""
    hidden, layers = _int(config, "hidden_size"), _int(config, "num_hidden_layers")
    vocab = _int(config, "vocab_size")
    embed = vocab * hidden * (1 if config.get("tie_word_embeddings") else 2)
    if _int(config, "kv_lora_rank") and _int(config, "qk_nope_head_dim"):
        attention = (
            attention_weights_bytes(
                {**config, "q_lora_rank": _int(config, "q_lora_rank") or None}, "float32"
            )
            // 4
        )
    else:
        attention = 4 * hidden * hidden
    dense = 3 * hidden * _int(config, "intermediate_size")
    experts = _int(config, "n_routed_experts") + _int(config, "n_shared_experts")
    moe = 3 * hidden * _int(config, "moe_intermediate_size") * experts
    moe_layers = max(0, layers - _int(config, "first_k_dense_replace")) if moe else 0
    params = embed + layers * attention + (layers - moe_layers) * dense + moe_layers * moe
    return int(params * _bytes(dtype, bits))


def prebuild_checks(
    scenario: Any, model_ref: str | None, random_weights: bool
) -> tuple[dict[str, Any], str, int] | None:
    """(config, dtype, weights bytes) to check before the target (and a draft built from a
    config) is built or loaded, where the loader's own check comes too late or not at all: a
    random build (checked exactly again once its arrays exist, still lazy) and the embedded
    model (its float16 files are widened to its compute dtype)."""
    spec = scenario.model
    if model_ref is not None and not random_weights:
        return None  # a checkpoint folder: the loader checks its safetensors sizes
    if random_weights or spec.source == "random":
        config = {**spec.config}
        weights = config_weights_lower_bound(config, spec.dtype, spec.bits)
        from mlatui.config.draft_spec import DraftSource

        draft = scenario.draft
        if draft.source is DraftSource.DRAFT_MODEL and draft.config and not draft.path:
            weights += config_weights_lower_bound(draft.config, spec.dtype)
        return config, spec.dtype, weights
    if spec.source == "path":
        return None
    import json

    from mlatui.models.embedded import MODEL_PATH

    config = json.loads((MODEL_PATH / "config.json").read_text())
    dtype = str(config.get("compute_dtype", "float32"))
    stored = DTYPE_BYTES.get(str(config.get("torch_dtype", "float16")), 2)
    return config, dtype, folder_weights_bytes(MODEL_PATH) * DTYPE_BYTES.get(dtype, 4) // stored
