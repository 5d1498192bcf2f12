"""What the trainer optimises: the target, its draft model and its MTP head, and their losses.

Loss = target cross-entropy + draft cross-entropy + distill * KL(target || draft) + the sparse
layer's indexer loss + mtp_weight * (MTP cross-entropy on token t+2 + mtp_distill * KL(target at
t+2 || MTP head)). KL terms detach the target. The MTP head is DeepSeek-V3's: one decoder layer fed
eh_proj([enorm(emb(t+1)); hnorm(h_t)]) with h_t the target's final-norm output, the target's
embedding and output head shared; it is `mlatui.run.drafts.MTPHead` itself, built by `mlatui.run.drafts.mtp_layer`,
so training computes exactly what loading and drafting compute. Its gradient reaches the trunk,
as in DeepSeek-V3.
"""

# isort: skip_file
from __future__ import annotations

import math
from typing import NamedTuple

import mlx.core as mx
import mlx.nn as nn
from mlx_lm.models import deepseek_v3 as dsv3
from mlx_lm.models.base import create_attention_mask

from mlatui.gate.policy import STOCK_POLICY
from mlatui.models.indexer import pool_windows
from mlatui.models.mlatui_mla import Model
from mlatui.run.drafts import MTPHead, mtp_layer


class Trainee(nn.Module):
    """Everything trained together; `mtp` is absent when the run trains no MTP head."""

    def __init__(self, target: Model, draft: Model | None, with_mtp: bool):
        super().__init__()
        self.target = target
        if draft is not None:  # a fine-tune of a shipped target trains none
            self.draft = draft
        if with_mtp:
            layer = mtp_layer(
                dsv3.DeepseekV3DecoderLayer, target.args, target.args.num_hidden_layers
            )
            embed = target.model.embed_tokens
            self.mtp = MTPHead(layer, embed, embed.as_linear)

    @property
    def has_mtp(self) -> bool:
        return "mtp" in self


class Parts(NamedTuple):
    ce_target: mx.array
    ce_draft: mx.array
    kl: mx.array
    indexer_kl: mx.array
    agree: mx.array  # draft argmax == target argmax (teacher-forced)
    ce_mtp: mx.array
    kl_mtp: mx.array
    agree_mtp: mx.array  # MTP argmax at t == target argmax at t + 1


def sparse_attention_layers(model: Model) -> list[nn.Module]:
    return [model.layers[i].self_attn for i in sorted(model.model.sparse_layers)]


def set_sparse_training(model: Model, sparse: bool) -> None:
    for attn in sparse_attention_layers(model):
        attn.indexer.index_topk = attn.config.index_topk if sparse else 1 << 30
        attn.set_modes(STOCK_POLICY)  # L > 1 in training: always the materialised path


def indexer_loss(attn: nn.Module, x: mx.array) -> mx.array:
    """KL(dense attention mass per pool || indexer pool distribution) for one sparse layer,
    `x` (B, S, hidden) its normalised input. The attention side is detached."""
    B, S, _ = x.shape
    H, kp = attn.num_heads, attn.indexer.kpool
    P = S // kp
    qr = attn.q_a_layernorm(attn.q_a_proj(x)) if attn.q_lora_rank else x
    q = (attn.q_b_proj(qr) if attn.q_lora_rank else attn.q_proj(x)).reshape(B, S, H, -1)
    q = q.transpose(0, 2, 1, 3)  # (B, H, S, nope+rope)
    ckv = attn.kv_a_proj_with_mqa(x)  # (B, S, r + rope)
    latent = attn.kv_a_layernorm(ckv[..., : attn.kv_lora_rank])[:, None]  # (B, 1, S, r)
    scores = attn.embed_q(q[..., : attn.qk_nope_head_dim]) @ latent.swapaxes(-1, -2)  # (B, H, S, S)
    if attn.qk_rope_head_dim:
        q_pe = attn.rope(q[..., attn.qk_nope_head_dim :])
        k_pe = attn.rope(ckv[..., attn.kv_lora_rank :][:, None])  # (B, 1, S, rope)
        scores = scores + q_pe @ k_pe.swapaxes(-1, -2)
    pos = mx.arange(S)
    scores = mx.where(pos[None, :] <= pos[:, None], scores * attn.scale, -math.inf)
    probs = mx.softmax(scores, axis=-1, precise=True).mean(axis=1)  # (B, S, S)
    mass = probs[..., : P * kp].reshape(B, S, P, kp).sum(-1)  # (B, S, P)
    visible = mx.arange(P)[None, :] < ((pos + 1) // kp)[:, None]  # (S, P)
    mass = mx.where(visible, mass, 0.0)
    target = mx.stop_gradient(mass / mx.maximum(mass.sum(-1, keepdims=True), 1e-9))

    iq, ik, ig, iw = attn.indexer.project(x, qr)  # (B, Hi, S, D) x2, (B, Hi, S), (B, S, Hi)
    pooled = pool_windows(ik, ig, kp, attn.indexer.compress_ape)[:, :, :P]  # (B, Hi, P, D)
    s = mx.maximum(iq @ pooled.swapaxes(-1, -2), 0)  # (B, Hi, S, P)
    s = (s * iw.transpose(0, 2, 1)[..., None]).sum(1)  # (B, S, P)
    logp = mx.where(visible, s, -1e9)
    logp = logp - mx.logsumexp(logp, axis=-1, keepdims=True)
    rows = visible.any(-1)  # queries with at least one complete pool
    kl = (target * (mx.log(target + 1e-9) - logp)).sum(-1)  # (B, S)
    return (kl * rows).sum() / (B * mx.maximum(rows.sum(), 1))


def _log_softmax(logits: mx.array) -> mx.array:
    return logits - mx.logsumexp(logits, axis=-1, keepdims=True)


def _kl(teacher_logp: mx.array, student_logits: mx.array) -> mx.array:
    """KL(teacher || student) per position, averaged; the teacher is already detached."""
    return (mx.exp(teacher_logp) * (teacher_logp - _log_softmax(student_logits))).sum(-1).mean()


def _trunk(target: Model, x: mx.array) -> tuple[mx.array, mx.array, mx.array]:
    """The target's training forward: (h_post (B, S, D), logits (B, S, V), indexer loss)."""
    h = target.model.embed_tokens(x)
    mask = create_attention_mask(h, None, return_array=True)  # (S, S) bool
    aux = mx.array(0.0)
    for i, layer in enumerate(target.layers):
        if i in target.model.sparse_layers:
            aux = aux + indexer_loss(layer.self_attn, mx.stop_gradient(layer.input_layernorm(h)))
        h = layer(h, mask, None)
    h_post = target.model.norm(h)  # (B, S, D): what MTP heads are fed ("post_norm")
    return h_post, target.model.embed_tokens.as_linear(h_post), aux


def _mtp_terms(
    net: Trainee, y: mx.array, h_post: mx.array, lt: mx.array, best_t: mx.array
) -> tuple[mx.array, mx.array, mx.array]:
    """(cross-entropy on token t+2, KL(target at t+2 || head), argmax agreement)."""
    # slot t pairs h_t with token t+1 (= y_t) and predicts token t+2 (= y_{t+1})
    hm = net.mtp(y[:, :-1], h_post[:, :-1], [None])  # (B, S-1, D)
    logits_m = net.mtp.logits(hm)  # (B, S-1, V)
    ce_m = nn.losses.cross_entropy(logits_m, y[:, 1:]).mean()
    kl_m = _kl(lt[:, 1:], logits_m)
    agree_m = (best_t[:, 1:] == mx.argmax(logits_m, -1)).mean()
    return ce_m, kl_m, agree_m


def losses(
    net: Trainee,
    x: mx.array,
    y: mx.array,
    distill: float,
    mtp_weight: mx.array,
    mtp_distill: float,
) -> tuple[mx.array, Parts]:
    """x, y (B, S): inputs and next tokens. `mtp_weight` is an array so a compiled step sees
    its schedule change."""
    h_post, logits_t, aux = _trunk(net.target, x)
    logits_d = net.draft(x)  # (B, S, V)
    ce_t = nn.losses.cross_entropy(logits_t, y).mean()
    ce_d = nn.losses.cross_entropy(logits_d, y).mean()
    lt = mx.stop_gradient(_log_softmax(logits_t))
    kl = _kl(lt, logits_d)
    best_t = mx.argmax(logits_t, -1)  # (B, S)
    agree = (best_t == mx.argmax(logits_d, -1)).mean()
    total = ce_t + ce_d + distill * kl + aux
    zero = mx.array(0.0)
    ce_m = kl_m = agree_m = zero
    if net.has_mtp:
        ce_m, kl_m, agree_m = _mtp_terms(net, y, h_post, lt, best_t)
        total = total + mtp_weight * (ce_m + mtp_distill * kl_m)
    return total, Parts(ce_t, ce_d, kl, aux, agree, ce_m, kl_m, agree_m)


def target_losses(
    net: Trainee, x: mx.array, y: mx.array, mtp_weight: float, mtp_distill: float
) -> tuple[mx.array, Parts]:
    """The target and its MTP head only (a fine-tune of a shipped model; no draft)."""
    h_post, logits_t, aux = _trunk(net.target, x)
    ce_t = nn.losses.cross_entropy(logits_t, y).mean()
    lt = mx.stop_gradient(_log_softmax(logits_t))
    best_t = mx.argmax(logits_t, -1)  # (B, S)
    ce_m, kl_m, agree_m = _mtp_terms(net, y, h_post, lt, best_t)
    total = ce_t + aux + mtp_weight * (ce_m + mtp_distill * kl_m)
    zero = mx.array(0.0)
    return total, Parts(ce_t, zero, zero, aux, zero, ce_m, kl_m, agree_m)


def draft_losses(
    net: Trainee, x: mx.array, y: mx.array, distill: float, hard: float
) -> tuple[mx.array, Parts]:
    """Only the draft learns; the target is a frozen teacher. Loss = draft cross-entropy on the
    data + distill * KL(teacher || draft) + hard * cross-entropy on the teacher's argmax (what
    greedy acceptance counts)."""
    logits_t = mx.stop_gradient(net.target(x))  # (B, S, V)
    logits_d = net.draft(x)  # (B, S, V)
    ce_t = nn.losses.cross_entropy(logits_t, y).mean()
    ce_d = nn.losses.cross_entropy(logits_d, y).mean()
    lt = _log_softmax(logits_t)
    kl = _kl(lt, logits_d)
    best_t = mx.argmax(logits_t, -1)  # (B, S)
    ce_hard = nn.losses.cross_entropy(logits_d, best_t).mean()
    agree = (best_t == mx.argmax(logits_d, -1)).mean()
    total = ce_d + distill * kl + hard * ce_hard
    zero = mx.array(0.0)
    return total, Parts(ce_t, ce_d, kl, zero, agree, zero, zero, zero)
