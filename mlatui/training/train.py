"""Seeded joint training of the embedded target model and its draft (CPU, CUDA or Metal).

    python -m mlatui.training.prepare --out .corpus
    python -m mlatui.training.train --data .corpus --out /tmp/emb --minutes 8

Loss = target cross-entropy + draft cross-entropy + KL(target || draft) (distillation toward the
target's next-token distribution, target detached) + an indexer loss: the sparse layer's indexer
learns to score pools like the layer's own (detached) dense attention mass, as DeepSeek-V3.2's
indexer warm-up does. The sparse layer attends densely for the first `--dense-fraction` of
training, then through the indexer's selection. Writes OUT/model and OUT/draft in mlx-lm's
folder format (float16 safetensors) periodically and at the end; prints losses as JSON lines.
"""

# isort: skip_file
from __future__ import annotations

import argparse
import json
import math
import shutil
import time
from dataclasses import asdict
from pathlib import Path

import mlatui  # noqa: F401  (fast BLAS before mlx on Linux CPU)
import mlx.core as mx
import mlx.nn as nn
import mlx.optimizers as optim
import numpy as np
from mlx.utils import tree_flatten
from mlx_lm.models.base import create_attention_mask

from mlatui.indexer import pool_windows
from mlatui.models.mlatui_mla import Model, ModelArgs

SHARD_BYTES = 15 * 2**20  # files coming back from the device are capped at 16 MiB each
PRESETS = {
    "full": (
        ModelArgs(),
        ModelArgs(
            num_hidden_layers=2,
            sparse_layers=[],
            kv_lora_rank=128,
            qk_nope_head_dim=64,
            v_head_dim=64,
        ),
    ),
    "tiny": (
        ModelArgs(
            hidden_size=64,
            intermediate_size=128,
            num_hidden_layers=2,
            sparse_layers=[1],
            index_topk=16,
            kv_lora_rank=64,
            qk_nope_head_dim=16,
            v_head_dim=16,
            qk_rope_head_dim=8,
        ),
        ModelArgs(
            hidden_size=64,
            intermediate_size=128,
            num_hidden_layers=1,
            sparse_layers=[],
            kv_lora_rank=32,
            qk_nope_head_dim=16,
            v_head_dim=16,
            qk_rope_head_dim=8,
        ),
    ),
}


class Pair(nn.Module):
    def __init__(self, target: Model, draft: Model):
        super().__init__()
        self.target = target
        self.draft = draft


def sparse_attention_layers(model: Model) -> list[nn.Module]:
    return [model.layers[i].self_attn for i in sorted(model.model.sparse_layers)]


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


def losses(pair: Pair, x: mx.array, y: mx.array, distill: float) -> tuple[mx.array, tuple]:
    target, draft = pair.target, pair.draft
    h = target.model.embed_tokens(x)
    mask = create_attention_mask(h, None, return_array=True)  # (S, S) bool
    aux = mx.array(0.0)
    for i, layer in enumerate(target.layers):
        if i in target.model.sparse_layers:
            aux = aux + indexer_loss(layer.self_attn, mx.stop_gradient(layer.input_layernorm(h)))
        h = layer(h, mask, None)
    logits_t = target.model.embed_tokens.as_linear(target.model.norm(h))  # (B, S, V)
    logits_d = draft(x)  # (B, S, V)
    ce_t = nn.losses.cross_entropy(logits_t, y).mean()
    ce_d = nn.losses.cross_entropy(logits_d, y).mean()
    lt = mx.stop_gradient(logits_t - mx.logsumexp(logits_t, axis=-1, keepdims=True))
    ld = logits_d - mx.logsumexp(logits_d, axis=-1, keepdims=True)
    kl = (mx.exp(lt) * (lt - ld)).sum(-1).mean()
    agree = (mx.argmax(logits_t, -1) == mx.argmax(logits_d, -1)).mean()
    return ce_t + ce_d + distill * kl + aux, (ce_t, ce_d, kl, aux, agree)


def set_sparse_training(model: Model, sparse: bool) -> None:
    for attn in sparse_attention_layers(model):
        attn.indexer.index_topk = attn.config.index_topk if sparse else 1 << 30
        attn.set_modes(mla_gate="stock")  # L > 1 in training: always the materialised path


def batches(ids: np.ndarray, batch: int, seq: int, rng: np.random.Generator):
    while True:
        starts = rng.integers(0, ids.size - seq - 1, size=batch)
        win = np.stack([ids[s : s + seq + 1] for s in starts]).astype(np.int32)  # (B, S+1)
        yield mx.array(win[:, :-1]), mx.array(win[:, 1:])


def save_folder(
    model: Model, folder: Path, tokenizer: Path | None, eot: int, dtype=mx.float16
) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    weights = {k: v.astype(dtype) for k, v in tree_flatten(model.parameters())}
    shards, cur, size = [], {}, 0
    for k in sorted(weights):
        if cur and size + weights[k].nbytes > SHARD_BYTES:
            shards.append(cur)
            cur, size = {}, 0
        cur[k] = weights[k]
        size += weights[k].nbytes
    shards.append(cur)
    for old in folder.glob("model*.safetensors"):
        old.unlink()
    for n, shard in enumerate(shards, 1):
        name = (
            "model.safetensors"
            if len(shards) == 1
            else f"model-{n:05d}-of-{len(shards):05d}.safetensors"
        )
        mx.save_safetensors(str(folder / name), shard, metadata={"format": "mlx"})
    config = asdict(model.args) | {"eos_token_id": eot, "torch_dtype": "float16"}
    (folder / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    for f in ("tokenizer.json", "tokenizer_config.json") if tokenizer else ():
        shutil.copy(tokenizer / f, folder / f)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="train the embedded model and its draft")
    p.add_argument(
        "--data", type=Path, required=True, help="folder written by mlatui.training.prepare"
    )
    p.add_argument(
        "--out", type=Path, required=True, help="writes OUT/model, OUT/draft, OUT/train.jsonl"
    )
    p.add_argument("--preset", choices=sorted(PRESETS), default="full")
    p.add_argument(
        "--minutes", type=float, default=8.0, help="wall-clock budget; saves before it ends"
    )
    p.add_argument("--steps", type=int, default=0, help="stop after this many steps (0: time only)")
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--seq", type=int, default=1024)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--warmup", type=int, default=200)
    p.add_argument("--distill", type=float, default=1.0)
    p.add_argument("--dense-fraction", type=float, default=0.3)
    p.add_argument("--eval-every", type=int, default=200)
    p.add_argument("--save-every-s", type=float, default=120.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-compile", action="store_true")
    p.add_argument(
        "--no-tokenizer", action="store_true", help="do not copy tokenizer files into OUT"
    )
    a = p.parse_args(argv)

    t_start = time.perf_counter()
    mx.random.seed(a.seed)
    rng = np.random.default_rng(a.seed)
    info = json.loads((a.data / "corpus.json").read_text())
    data = np.load(a.data / "tokens.npz")
    train_ids, valid_ids = data["train"], data["valid"]
    targs, dargs = PRESETS[a.preset]
    targs.vocab_size = dargs.vocab_size = info["vocab_size"]
    pair = Pair(Model(targs), Model(dargs))
    mx.eval(pair.parameters())
    n_t = sum(v.size for _, v in tree_flatten(pair.target.parameters()))
    n_d = sum(v.size for _, v in tree_flatten(pair.draft.parameters()))
    a.out.mkdir(parents=True, exist_ok=True)
    log = open(a.out / "train.jsonl", "a")

    def emit(rec: dict) -> None:
        line = json.dumps(rec)
        print(line, flush=True)
        log.write(line + "\n")
        log.flush()

    emit(
        {
            "event": "start",
            "device": str(mx.default_device()),
            "mlx": mx.__version__,
            "target_params": n_t,
            "draft_params": n_d,
            "args": {k: str(v) for k, v in vars(a).items()},
            "corpus": info,
        }
    )

    budget_s = a.minutes * 60
    opt = optim.AdamW(learning_rate=a.lr, weight_decay=0.1, betas=[0.9, 0.95])
    vg = nn.value_and_grad(pair, lambda m, x, y: losses(m, x, y, a.distill))

    def step(x, y):
        (loss, parts), grads = vg(pair, x, y)
        grads, norm = optim.clip_grad_norm(grads, 1.0)
        opt.update(pair, grads)
        return loss, parts, norm

    def compiled_step():
        if a.no_compile:
            return step
        state = [pair.state, opt.state, mx.random.state]
        return mx.compile(step, inputs=state, outputs=state)

    def evaluate() -> dict:
        vr = np.random.default_rng(1234)
        tot = np.zeros(5)
        n = 4
        for _ in range(n):
            starts = vr.integers(0, valid_ids.size - a.seq - 1, size=a.batch)
            win = np.stack([valid_ids[s : s + a.seq + 1] for s in starts]).astype(np.int32)
            _, parts = losses(pair, mx.array(win[:, :-1]), mx.array(win[:, 1:]), a.distill)
            tot += np.array([float(v) for v in parts])
        ce_t, ce_d, kl, aux, agree = tot / n
        return {
            "valid_ce_target": round(ce_t, 4),
            "valid_ce_draft": round(ce_d, 4),
            "valid_kl": round(kl, 4),
            "valid_indexer_kl": round(aux, 4),
            "valid_agree": round(agree, 4),
        }

    def save(tag: str) -> None:
        t0 = time.perf_counter()
        tok = None if a.no_tokenizer else a.data / "tokenizer"
        save_folder(pair.target, a.out / "model", tok, info["eot_id"])
        save_folder(pair.draft, a.out / "draft", tok, info["eot_id"])
        emit({"event": "saved", "tag": tag, "seconds": round(time.perf_counter() - t0, 2)})

    sparse, sparse_from = False, None
    set_sparse_training(pair.target, False)
    fn = compiled_step()
    it = batches(train_ids, a.batch, a.seq, rng)
    t_train = time.perf_counter()
    last_save = t_train
    reserve_s = 25.0
    step_no, tokens = 0, 0
    while True:
        elapsed = time.perf_counter() - t_start
        frac = max(elapsed / budget_s, step_no / a.steps if a.steps else 0.0)
        if frac >= 1.0 or elapsed > budget_s - reserve_s:
            break
        if not sparse and frac >= a.dense_fraction:
            sparse, sparse_from = True, step_no
            set_sparse_training(pair.target, True)
            fn = compiled_step()
            emit({"event": "sparse", "step": step_no})
        warm = min(1.0, (step_no + 1) / a.warmup)
        opt.learning_rate = (
            a.lr * warm * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(frac, 1.0))))
        )
        x, y = next(it)
        loss, parts, norm = fn(x, y)
        mx.eval(loss, parts, norm, pair.state, opt.state)
        step_no += 1
        tokens += x.size
        if step_no % 20 == 0 or step_no == 1:
            ce_t, ce_d, kl, aux, agree = (round(float(v), 4) for v in parts)
            dt = time.perf_counter() - t_train
            emit(
                {
                    "step": step_no,
                    "loss": round(float(loss), 4),
                    "ce_target": ce_t,
                    "ce_draft": ce_d,
                    "kl": kl,
                    "indexer_kl": aux,
                    "agree": agree,
                    "grad_norm": round(float(norm), 3),
                    "lr": round(float(opt.learning_rate), 6),
                    "tok_per_s": round(tokens / dt),
                    "elapsed_s": round(time.perf_counter() - t_start, 1),
                }
            )
        if step_no % a.eval_every == 0:
            emit({"step": step_no, **evaluate()})
        if time.perf_counter() - last_save > a.save_every_s:
            save(f"step{step_no}")
            last_save = time.perf_counter()
    final = evaluate()
    save("final")
    emit(
        {
            "event": "done",
            "steps": step_no,
            "tokens": tokens,
            "train_seconds": round(time.perf_counter() - t_train, 1),
            "sparse_from_step": sparse_from,
            **final,
        }
    )
    log.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
