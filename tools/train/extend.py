"""Extend the embedded model to long contexts: YaRN RoPE scaling plus a long-window fine-tune.

    python -m tools.train.extend --data .corpus16 --out RUN --factor 8 --seq 16384 \
        --max-seconds 420 [--target-share 0.6]

The shipped model was trained on 4096-token windows and breaks past them (held-out loss 2.0 at
2-4K, 4.8 nats/token at 8-16K; `tools.train.longctx`). Three stages, in one process:
1. Target, MTP head and draft get DeepSeek's YaRN scaling (`rope_scaling`, factor `--factor`
   over the trained window: the low-frequency RoPE dimensions are interpolated, the
   high-frequency ones kept) and `max_position_embeddings` = factor x window, on copies
   (RUN/base).
2. The target and its MTP head fine-tune on `--seq`-token training windows with their own
   objective (`objective.target_losses`: cross-entropy, the sparse layer's indexer loss, the
   head's loss on token t + 2), for `--target-share` of the time left.
3. `tools.train.distil` trains the MTP head and the draft model for sampled acceptance against
   the extended (frozen) target on the same windows, until `--max-seconds` from the start.
Each decoder layer's activations are recomputed in the backward pass (mx.checkpoint), so a
16K window fits: its attention scores alone are 4 heads x 16K x 16K floats per layer.
RUN/extend.jsonl logs every stage; `tools.train.ship --extended RUN` installs the outcome.
"""

# isort: skip_file
from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path
from typing import Any

import mlx.core as mx
import mlx.nn as nn
import mlx.optimizers as optim
import numpy as np
from mlx_lm.models import deepseek_v3 as dsv3

from mlatui.models.embedded import DRAFT_PATH, MODEL_PATH
from mlatui.models.mlatui_mla import SparseDecoderLayer
from mlatui.models.mtp_weights import read_mtp_weights
from tools.train import distil
from tools.train.checkpoint import save_folder
from tools.train.longctx import with_config
from tools.train.objective import Trainee, set_sparse_training, target_losses
from tools.train.runlog import RunLog, run_command
from tools.train.teacher import TeacherError, load_teacher
from tools.train.train import next_batch, process_start

WARMUP = 20


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="extend the embedded model to long contexts")
    p.add_argument("--data", type=Path, required=True, help="folder of tools.train.prepare")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--model", type=Path, default=MODEL_PATH, help="target + MTP head folder")
    p.add_argument("--draft", type=Path, default=DRAFT_PATH)
    p.add_argument("--window", type=int, default=4096, help="the window the model was trained on")
    p.add_argument("--factor", type=float, default=8.0, help="YaRN scaling factor")
    p.add_argument("--mscale-all-dim", type=float, default=0.0,
                   help="DeepSeek's attention temperature term (0: softmax scale unchanged)")  # fmt: skip
    p.add_argument("--seq", type=int, default=16384, help="training window, tokens")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--lr", type=float, default=3e-4, help="target stage")
    p.add_argument("--distil-lr", type=float, default=3e-4)
    p.add_argument("--mtp-weight", type=float, default=0.1)
    p.add_argument("--max-seconds", type=float, default=420.0, help="all stages, from the start")
    p.add_argument("--target-share", type=float, default=0.6,
                   help="share of the time left after loading that the target stage takes")  # fmt: skip
    p.add_argument("--max-target-steps", type=int, default=0, help="0: as the time allows")
    p.add_argument("--distil-steps", type=int, default=100000, help="distil stops on time first")
    p.add_argument("--eval-every", type=int, default=50, help="distil stage")
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def checkpointed(cls: type) -> None:
    """Recompute `cls` layers' activations in the backward pass (training calls have no cache)."""
    if getattr(cls, "_mlatui_checkpointed", False):
        return
    plain = cls.__call__

    def call(self: nn.Module, x: mx.array, mask: Any = None, cache: Any = None) -> mx.array:
        if cache is not None or not isinstance(mask, mx.array):
            return plain(self, x, mask, cache)

        def inner(params: Any, x: mx.array) -> mx.array:  # the mask is a constant, not an input
            self.update(params)
            return plain(self, x, mask, None)

        return mx.checkpoint(inner)(self.trainable_parameters(), x)

    cls.__call__ = call  # type: ignore[method-assign]
    cls._mlatui_checkpointed = True  # type: ignore[attr-defined]


def scaled_copies(a: argparse.Namespace) -> tuple[Path, Path, dict[str, Any]]:
    overrides = {
        "max_position_embeddings": int(a.window * a.factor),
        "rope_scaling": {
            "type": "deepseek_yarn", "factor": a.factor, "original_max_position_embeddings": a.window,
            "beta_fast": 32, "beta_slow": 1, "mscale": 1.0, "mscale_all_dim": a.mscale_all_dim,
        },
    }  # fmt: skip
    base = a.out / "base"
    base.mkdir(parents=True, exist_ok=True)
    for old in (base / "model", base / "draft"):
        if old.exists():
            raise TeacherError(f"{old} exists: give a new --out")
    return with_config(a.model, overrides, base), with_config(a.draft, overrides, base), overrides


def target_stage(a: argparse.Namespace, model: Path, until: float, emit: Any) -> Path:
    """Fine-tune target + MTP head on long windows until `until` (perf_counter); RUN/model."""
    info = json.loads((a.data / "corpus.json").read_text())
    train_ids = np.load(a.data / "tokens.npz")["train"]
    target = load_teacher(model, info["vocab_size"], a.data / "tokenizer")
    net = Trainee(target, None, with_mtp=True)
    local, _ = read_mtp_weights(model, target.args.num_hidden_layers)
    net.mtp.layer.load_weights([(k, v.astype(mx.float32)) for k, v in local.items()], strict=True)
    net.unfreeze()
    set_sparse_training(target, True)
    opt = optim.AdamW(learning_rate=a.lr, weight_decay=0.0, betas=[0.9, 0.95])
    rng = np.random.default_rng(a.seed)
    grad = nn.value_and_grad(
        net, lambda n, x, y: target_losses(n, x, y, a.mtp_weight, 1.0)
    )  # (loss, parts), grads
    step, total, step_s = 0, a.max_target_steps or 10**9, 0.0
    while step < total and time.perf_counter() + 1.5 * step_s < until:
        t0 = time.perf_counter()
        lr = a.lr * min(1.0, (step + 1) / WARMUP)
        if step >= WARMUP:
            frac = min(1.0, (step - WARMUP) / max(1, total - WARMUP))
            lr = a.lr * (0.1 + 0.45 * (1 + math.cos(math.pi * frac)))
        opt.learning_rate = lr
        x, y = next_batch(train_ids, a.batch, a.seq, rng)
        (loss, parts), grads = grad(net, x, y)
        grads, norm = optim.clip_grad_norm(grads, 1.0)
        opt.update(net, grads)
        mx.eval(loss, net.parameters(), opt.state)
        step += 1
        step_s = time.perf_counter() - t0 if step <= 3 else 0.9 * step_s + 0.1 * (
            time.perf_counter() - t0)  # fmt: skip
        if step == 5 and not a.max_target_steps:  # the cosine ends where the time does
            total = step + int((until - time.perf_counter()) / step_s)
            emit({"event": "planned", "steps": total, "step_s": round(step_s, 3)})
        if step % 10 == 0 or step <= 2:
            emit({"stage": "target", "step": step, "loss": round(float(loss), 4),
                  "ce_target": round(float(parts.ce_target), 4),
                  "ce_mtp": round(float(parts.ce_mtp), 4), "grad_norm": round(float(norm), 3),
                  "lr": round(lr, 7), "step_s": round(step_s, 3)})  # fmt: skip
    out = a.out / "model"
    save_folder(target, out, a.data / "tokenizer", info["eot_id"], mtp_head=net.mtp)
    emit({"event": "target-done", "steps": step, "tokens": step * a.batch * a.seq})
    return out


def extend(a: argparse.Namespace) -> int:
    t_start = process_start()
    a.out.mkdir(parents=True, exist_ok=True)
    log = RunLog(a.out / "extend.jsonl")
    model, draft, overrides = scaled_copies(a)
    for cls in (dsv3.DeepseekV3DecoderLayer, SparseDecoderLayer):
        checkpointed(cls)
    mx.random.seed(a.seed)
    log.emit({"event": "start", "device": str(mx.default_device()), "mlx": getattr(mx, "__version__", "?"),
              "args": {k: str(v) for k, v in vars(a).items()}, "overrides": overrides})  # fmt: skip
    left = a.max_seconds - (time.perf_counter() - t_start)
    target = target_stage(a, model, time.perf_counter() + a.target_share * left, log.emit)
    ns = argparse.Namespace(
        model=target, draft=draft, mtp=None, data=a.data, out=a.out / "distil",
        parts="mtp,draft", part_list=["mtp", "draft"], temperature=0.8, anchor=0.1,
        steps=a.distil_steps, max_seconds=a.max_seconds, lr=a.distil_lr, batch=a.batch,
        seq=a.seq, eval_every=a.eval_every, eval_batches=2, seed=a.seed,
    )  # fmt: skip
    code = distil.distil(ns)
    log.emit({"event": "done", "distil_exit": code,
              "elapsed_s": round(time.perf_counter() - t_start, 1)})  # fmt: skip
    log.close()
    return 0 if code in (0, 3) else code


def main(argv: list[str] | None = None) -> int:
    return run_command(extend, parse(argv), (TeacherError,))


if __name__ == "__main__":
    from mlatui.host.blas import choose_blas

    choose_blas()  # the fast CPU BLAS (may run this script again with LD_PRELOAD)
    raise SystemExit(main())
