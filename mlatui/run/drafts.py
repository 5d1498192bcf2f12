"""Speculative decoding's draft sources: a separate draft model (run by mlx-lm's own
speculative loop) and an MTP head (run by mlatui's loop of the same shape,
mlatui.run.decode_stream.mtp_block); rejection sampling's acceptance rule.

State convention shared by the sources and the loops: the target's cache covers every token
except the last emitted one (`last`), which is fed first in the next verify. A draft source keeps
its own cache aligned the same way.

MTP heads (DeepSeek-V3 / GLM-4.7-Flash multi-token prediction): the checkpoints carry `num_nextn_predict_layers` extra layers, `model.layers.{N}.*` with
N = num_hidden_layers, which mlx-lm's `sanitize` drops on load. We read them back from the
checkpoint folder (or its sidecar) and build the head around one decoder layer of the target's own mlx-lm class:

    x = eh_proj(concat(enorm(embed(t_{j+1})), hnorm(h_j)))   # h_j: target hidden at position j
    h' = layer(x)                                             # cached at position j, like the target
    logits = head(shared_head.norm(h'))                       # predicts t_{j+2}

Target hidden: the final-norm output of the target trunk (`post_norm`, the default), which is what
vLLM (`DeepSeekMultiTokenPredictor`), SGLang and MTPLX (`mtp_hidden_variant="post_norm"`) feed the
head, i.e. the convention real acceptance rates were measured with. Depth > 1 chains the head on its own
pre-`shared_head.norm` output, as vLLM and MTPLX do.

Only the first MTP layer is used (DeepSeek-V3 and GLM-4.7-Flash ship one); deeper drafts reuse it.
"""

from __future__ import annotations

import json
import random
import time
from pathlib import Path
from typing import Any

import mlx.core as mx
import mlx.nn as nn
from mlx_lm.models.base import create_attention_mask
from mlx_lm.models.cache import (
    KVCache,
    can_trim_prompt_cache,
    make_prompt_cache,
    trim_prompt_cache,
)

from mlatui.models.mtp_weights import (
    EXTRACT_HINT,
    dequantize_weights,
    folder_quant,
    local_folder,
    named_source,
    quantize_like,
    read_mtp_weights,
    saved_quant,
)
from mlatui.models.mx_typed import as_float, as_int, as_ints, evaluate_buffers


class DraftModelSource:
    """A separate small model sharing the target's tokenizer (mlx-lm's `--draft-model`): its
    `model` and `cache` go to mlx-lm's speculative loop."""

    needs_hidden = False  # the target forward need not return hidden states

    def __init__(self, model: nn.Module, name: str = "draft-model"):
        self.model = model
        self.name = name
        self.cache: list[Any] | None = None

    @property
    def caches(self) -> list[Any]:
        if self.cache is None:
            raise RuntimeError(f"draft model {self.name}: no cache yet (prefill it first)")
        return self.cache

    def reset(self) -> None:
        self.cache = make_prompt_cache(self.model)
        if not can_trim_prompt_cache(self.cache):
            raise ValueError(
                f"draft model {self.name}: its cache cannot be trimmed, so it cannot roll back rejected drafts"
            )

    def prefill(self, tokens: mx.array, hidden: mx.array | None = None) -> None:
        """Consume the context: `tokens` (1, T) = everything but the last emitted token."""
        self.reset()
        step = 512
        for start in range(0, tokens.shape[1], step):
            self.model(tokens[:, start : start + step], cache=self.cache)
            mx.eval([c.state for c in self.caches])


class UntrimmableCacheError(ValueError):
    pass


def require_trimmable(cache: list[Any], model_name: str) -> None:
    if not can_trim_prompt_cache(cache):
        raise UntrimmableCacheError(
            f"{model_name}: its cache cannot be trimmed (hybrid linear-attention layers keep a "
            "recurrent state), so speculative decoding cannot roll back its steps on this model"
        )


def accept_sampled(
    drafts: list[int], p_target: mx.array, q_draft: mx.array, rng: random.Random
) -> tuple[int, int]:
    """Standard rejection sampling (Leviathan et al.): accept d_i with prob min(1, p/q); on the
    first rejection resample from norm(max(p - q, 0)); if all accepted, sample the bonus from p.
    p_target (k+1, V), q_draft (k, V) are probabilities. Returns (accepted, next token)."""
    k = len(drafts)
    for i, d in enumerate(drafts):
        p, q = as_float(p_target[i, d]), as_float(q_draft[i, d])
        if q > 0 and rng.random() < min(1.0, p / q):
            continue
        residual = mx.maximum(p_target[i] - q_draft[i], 0)
        total = as_float(residual.sum())
        dist = residual / total if total > 0 else p_target[i]
        return i, _sample(dist, rng)
    return k, _sample(p_target[k], rng)


def _sample(probs: mx.array, rng: random.Random) -> int:
    u = rng.random()
    cdf = mx.cumsum(probs.astype(mx.float32))
    return int(min(as_int(mx.sum(cdf < u)), probs.shape[-1] - 1))


def plain_step(model: nn.Module, cache: list[Any], last: int) -> tuple[int, float]:
    """One greedy decode step (L = 1). Returns (next token, ms)."""
    x = mx.array([[last]])  # (1, 1)
    t0 = time.perf_counter_ns()
    logits = model(x, cache=cache)  # (1, 1, V)
    tok = mx.argmax(logits[0, -1])
    mx.eval(tok)
    ms = (time.perf_counter_ns() - t0) / 1e6
    return as_int(tok), ms


SUPPORTED = (
    "deepseek_v3",
    "glm4_moe_lite",
    "mlatui_mla",
)  # modules whose decoder layer the head reuses
_REQUIRED = ("enorm.weight", "hnorm.weight", "shared_head.norm.weight")


class MTPError(ValueError):
    pass


class SharedHead(nn.Module):
    def __init__(self, dims: int, vocab_size: int, eps: float, has_head: bool):
        super().__init__()
        self.norm = nn.RMSNorm(dims, eps=eps)
        if has_head:
            self.head = nn.Linear(dims, vocab_size, bias=False)


class MTPHead(nn.Module):
    """One MTP layer: the target's decoder layer plus enorm/hnorm/eh_proj/shared_head, with the
    checkpoint's own attribute names under `layer`. Embedding (and head, when the checkpoint has
    no `shared_head.head`) are the target's, held outside the module tree so they are not counted
    or loaded twice."""

    def __init__(self, layer: nn.Module, embed_tokens: nn.Module, lm_head: Any):
        super().__init__()
        self.layer = layer
        object.__setattr__(self, "_embed_tokens", embed_tokens)
        object.__setattr__(self, "_lm_head", lm_head)

    def make_cache(self) -> Any:
        return KVCache()

    def logits(self, h: mx.array) -> mx.array:
        h = self.layer.shared_head.norm(h)
        if "head" in self.layer.shared_head:
            return self.layer.shared_head.head(h)
        return self._lm_head(h)

    def __call__(self, tokens: mx.array, hidden: mx.array, cache: list[Any]) -> mx.array:
        """tokens (B, L), hidden (B, L, D) -> the head's hidden (B, L, D), before shared_head.norm."""
        layer = self.layer
        e = layer.enorm(self._embed_tokens(tokens))  # (B, L, D)
        x = layer.eh_proj(
            mx.concatenate([e, layer.hnorm(hidden)], axis=-1)
        )  # (B, L, 2D) -> (B, L, D)
        mask = create_attention_mask(x, cache[0], return_array=True)
        return layer(x, mask, cache=cache[0])


def layer_args(args: Any) -> Any:
    """The mlx-lm args a decoder layer takes: mlatui's embedded type keeps its dense layers'
    `deepseek_v3` args apart (`dense_args()`); real checkpoints' args are those args."""
    dense = getattr(args, "dense_args", None)
    return dense() if callable(dense) else args


def mtp_layer(layer_cls: type, args: Any, layer_idx: int, has_head: bool = False) -> nn.Module:
    """An empty MTP layer in DeepSeek-V3's layout: the decoder block of `layer_cls` plus enorm,
    hnorm, eh_proj and shared_head (its own head only if `has_head`); the trainer builds the
    head it trains with this too, so the saved names are the ones this module loads."""
    args = layer_args(args)
    layer = layer_cls(args, layer_idx=layer_idx)  # MoE exactly where the real MTP layer is
    eps = args.rms_norm_eps
    layer.enorm = nn.RMSNorm(args.hidden_size, eps=eps)
    layer.hnorm = nn.RMSNorm(args.hidden_size, eps=eps)
    layer.eh_proj = nn.Linear(2 * args.hidden_size, args.hidden_size, bias=False)
    layer.shared_head = SharedHead(args.hidden_size, args.vocab_size, eps, has_head)
    return layer


def _lm_head(model: nn.Module) -> Any:
    head = getattr(model, "lm_head", None)
    return head if head is not None else model.model.embed_tokens.as_linear


class MTPDraft:
    """Draft source backed by an MTP head.

    State (the convention above): the target cache holds t_0..t_{n-1}, `last` = t_n. Slot j of the
    head's cache pairs target hidden h_j with token t_{j+1}, so the head is aligned when
    `consumed` (cached slots + queued ones) == target offset - 1. Accepted drafts are queued at
    commit and fed together with `last` in the next propose: one forward of width accepted + 1.
    """

    needs_hidden = True

    def __init__(self, head: MTPHead, name: str = "mtp"):
        self.head = head
        self.name = name
        self.cache: list[Any] = []
        self.reset()

    def twin(self) -> MTPDraft:
        """A second draft (e.g. for the other arm) sharing every weight array, with its own cache."""
        from mlatui.gate.mla import twin

        return MTPDraft(twin(self.head), self.name)

    def reset(self) -> None:
        self.cache = [self.head.make_cache()]
        if not can_trim_prompt_cache(self.cache):
            raise MTPError(
                f"MTP head {self.name}: its cache cannot be trimmed, so it cannot roll back drafts"
            )
        self.pending: list[int] = []  # accepted drafts queued for the next propose
        self._pending_hidden: mx.array | None = None  # (1, len(pending), D)
        self._last_hidden: mx.array | None = None  # (1, 1, D) target hidden before `last`
        self._base = 0  # cache offset after the last real (non-chained) slot
        self._drafts: list[int] = []

    @property
    def offset(self) -> int:
        return self.cache[0].offset

    @property
    def consumed(self) -> int:
        """Target positions the head has cached or queued (== target offset - 1 when aligned)."""
        return self.offset + len(self.pending)

    def target_forward(
        self, model: nn.Module, inputs: mx.array, cache: list[Any]
    ) -> tuple[mx.array, mx.array]:
        h = model.model(inputs, cache)  # (1, L, D), after the final norm
        return _lm_head(model)(h), h

    def prefill(self, tokens: mx.array, hidden: mx.array | None = None) -> None:
        if hidden is None or hidden.shape[1] != tokens.shape[1]:
            raise MTPError("MTP prefill needs the target hidden states for every context token")
        self.reset()
        step = 512
        pairs = tokens.shape[1] - 1  # slot j: (h_j, t_{j+1})
        for start in range(0, pairs, step):
            end = min(start + step, pairs)
            self.head(tokens[:, start + 1 : end + 1], hidden[:, start:end], self.cache)
            mx.eval([c.state for c in self.cache])
        self._last_hidden = hidden[:, -1:]
        self._base = self.offset

    def propose(self, last: int, k: int, hidden: mx.array | None = None) -> list[int]:
        drafts, _ = self.propose_lazy(mx.array([last], mx.uint32), k, hidden)
        self._drafts = as_ints(drafts)
        return self._drafts

    def propose_lazy(
        self, last: mx.array, k: int, hidden: mx.array | None, sampling: Any = None
    ) -> tuple[mx.array, mx.array | None]:
        """`propose` without a sync: drafts (k,) uint32, and when `sampling` is given (a
        `runtime.Sampling`) the drafts are sampled and their distributions (k, V) returned too."""
        h_last = hidden if hidden is not None else self._last_hidden
        if h_last is None:
            raise MTPError("MTP propose needs the target hidden state before `last`; prefill first")
        tokens = mx.concatenate([mx.array(self.pending, mx.uint32), last.astype(mx.uint32)])[None]
        h_in = (  # (1, P + 1, D)
            h_last[:, -1:]
            if self._pending_hidden is None
            else mx.concatenate([self._pending_hidden, h_last[:, -1:]], axis=1)
        )
        self.pending, self._pending_hidden = [], None
        drafts, probs = [], []
        for i in range(k):
            h = self.head(tokens, h_in, self.cache)[:, -1:]  # (1, 1, D)
            if i == 0:
                self._base = self.offset
            logits = self.head.logits(h)[:, -1, :]  # (1, V)
            if sampling is None:
                tok = mx.argmax(logits, axis=-1).astype(mx.uint32)  # (1,)
            else:
                p = sampling.probs(logits)  # (1, V)
                tok = mx.random.categorical(mx.log(p)).astype(mx.uint32)  # (1,)
                probs.append(p)
            drafts.append(tok)
            tokens, h_in = tok[None], h  # (1, 1), (1, 1, D)
        return mx.concatenate(drafts), mx.concatenate(probs) if probs else None

    def catch_up(self, tokens: list[int], hidden: mx.array) -> None:
        """The stream moved on without the head (plain decode): `tokens` are the new stream tokens
        before the new last one, `hidden` (1, m, D) the target's hidden states at them. They are
        queued and fed with the next propose."""
        if hidden.shape[1] != len(tokens):
            raise MTPError("MTP catch-up needs one target hidden state per token")
        if not tokens:
            return
        before = [self._last_hidden] if self._last_hidden is not None else []
        queued = mx.concatenate([*before, hidden[:, :-1]], axis=1)  # (1, m, D)
        self.pending = [*self.pending, *tokens]
        self._pending_hidden = (
            queued
            if self._pending_hidden is None
            else mx.concatenate([self._pending_hidden, queued], axis=1)
        )
        self._last_hidden = hidden[:, -1:]

    def rewind(self, consumed: int, last_hidden: mx.array) -> None:
        """Back to an earlier aligned state: `consumed` cached slots, `last_hidden` (1, 1, D)."""
        trim_prompt_cache(self.cache, self.offset - consumed)
        self.pending, self._pending_hidden = [], None
        self._last_hidden = last_hidden
        self._base = self.offset

    def commit(
        self, accepted: int, hidden: mx.array | None = None, drafts: list[int] | None = None
    ) -> None:
        if hidden is None or hidden.shape[1] != accepted + 1:
            raise MTPError(
                f"MTP commit needs the target hidden states at last + {accepted} accepted drafts"
            )
        if drafts is not None:
            self._drafts = drafts
        trim_prompt_cache(self.cache, self.offset - self._base)  # drop the chained slots
        self.pending = self._drafts[:accepted]
        self._pending_hidden = hidden[:, :accepted] if accepted else None
        self._last_hidden = hidden[:, accepted:]


class MTPMissing(MTPError):
    """The config announces an MTP layer that is not there (mlx-lm's converter drops it)."""


def _no_mtp(ref: str | Path, layer: int, why: str, announced: bool = True) -> MTPError:
    """`ref`: the folder or hub id as the user gave it (the command takes either)."""
    model_path = local_folder(ref)
    source = named_source(model_path) or "<original checkpoint>"
    cmd = EXTRACT_HINT.format(source=source, folder=ref)
    cls = MTPMissing if announced else MTPError
    return cls(
        f"{model_path}: no MTP head ({why}); mlx-lm's conversion drops the model.layers.{layer}.* "
        f"tensors — restore them with `{cmd}` (writes {model_path / 'mtp.safetensors'})"
    )


def load_mtp_draft(
    model_path: str | Path,
    model: nn.Module,
    required: bool = True,
    notes: list[str] | None = None,
) -> MTPDraft | None:
    """Build the MTP draft of `model` (loaded from `model_path` by mlx-lm). Raises MTPError with a
    one-line reason when there is no head (MTPMissing when the config announces one the folder
    lacks), or returns None if not `required`.
    A head stored unlike the target is converted on load, and `notes` gets a line saying so."""
    ref, model_path = model_path, local_folder(model_path)  # a hub id: its hub-cache snapshot
    config = json.loads((model_path / "config.json").read_text())
    args = model.args
    n_layers = args.num_hidden_layers
    try:
        layer_cls = type(model.model.layers[0])
        family = layer_cls.__module__.rsplit(".", 1)[-1]
        if family not in SUPPORTED:
            raise MTPError(
                f"MTP heads are supported for {', '.join(SUPPORTED)} models, not {family}"
            )
        if config.get("num_nextn_predict_layers", 0) < 1:
            raise _no_mtp(ref, n_layers, "config.json has no num_nextn_predict_layers", False)
        local, source = read_mtp_weights(model_path, n_layers)
        if not local:
            raise _no_mtp(ref, n_layers, f"no model.layers.{n_layers}.* tensors in {source}")
        missing = [k for k in _REQUIRED if k not in local]
        if missing or not any(k.startswith(("eh_proj.", "self_attn.")) for k in local):
            raise MTPError(
                f"{source}: incomplete MTP layer {n_layers}, missing {missing or 'eh_proj/self_attn'}"
            )
    except MTPError:
        if required:
            raise
        return None

    w = sanitize_layer(model, local)
    layer = mtp_layer(layer_cls, args, n_layers, "shared_head.head.weight" in w)
    try:
        said = build_layer(model, layer, w, config, n_layers)
    except ValueError as e:
        raise MTPError(
            f"{source}: MTP layer {n_layers} does not match {family}'s decoder layer: {e}"
        ) from e
    if notes is not None:
        notes.extend(said)
    evaluate_buffers(layer)
    return MTPDraft(MTPHead(layer, model.model.embed_tokens, _lm_head(model)))


def sanitize_layer(model: nn.Module, local: dict[str, mx.array]) -> dict[str, mx.array]:
    """mlx-lm's transforms of the target applied to one layer's layer-local tensors."""
    own = {f"model.layers.0.{k}": v for k, v in local.items() if not k.startswith("embed_tokens.")}
    sanitize = getattr(model, "sanitize", None)
    done = sanitize(own) if callable(sanitize) else own
    return {k[len("model.layers.0.") :]: v for k, v in done.items()}


def target_dtype(model: nn.Module) -> Any:
    return model.model.norm.weight.dtype


def build_layer(
    model: nn.Module,
    layer: nn.Module,
    weights: dict[str, mx.array],
    config: dict[str, Any],
    layer_idx: int,
) -> list[str]:
    """Load `weights` (sanitized, layer-local) into the empty `layer`, matched to `model` and its
    folder's `config`: floats in the target's dtype, quantized the way the folder says. A head
    stored otherwise (a bf16 sidecar beside a 4-bit folder, another bit width) is converted, and
    the conversion is said: left unquantized in bf16, its MoE experts would die on the CPU in
    MLX's float32-only GatherMM. Returns what was converted (empty when the head already
    matched). Raises ValueError (mlx's strict load) when the tensors do not fit the layer."""
    notes: list[str] = []
    want, _ = folder_quant(config)
    have = saved_quant(weights, layer)
    dtype = target_dtype(model)
    matches = bool(have) == (want is not None) and all(q == want for q in have.values())
    if not matches:
        weights = dequantize_weights(weights, have, dtype)
        kinds = sorted({q.label for q in have.values()}) or ["unquantized"]
        notes.append(
            f"MTP head stored {', '.join(kinds)}, target {want.label if want else 'unquantized'}: "
            "converted to match"
        )
        have = {}
    if have:  # stored the way the target is: rebuild the same quantized modules

        def stored(path: str, m: nn.Module) -> bool | dict:
            q = have.get(path)
            return q.params() if q is not None and hasattr(m, "to_quantized") else False

        nn.quantize(layer, class_predicate=stored)
    cast = getattr(model, "cast_predicate", lambda k: True)
    weights = {
        k: v.astype(dtype) if mx.issubdtype(v.dtype, mx.floating) and cast(k) else v
        for k, v in weights.items()
    }
    layer.load_weights(list(weights.items()), strict=True)
    if not have and want is not None:
        prefix = f"model.layers.{layer_idx}."
        sibling = f"model.layers.{layer_idx - 1}."
        quantize_like(layer, config, prefix, _quant_predicate(model), sibling)
    layer.eval()
    mx.eval(layer.parameters())
    return notes


def _quant_predicate(model: nn.Module) -> Any:
    pred = getattr(model, "quant_predicate", None)
    return pred if callable(pred) else None
