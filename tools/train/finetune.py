"""Fine-tune a shipped target and its MTP head against greedy loops (sequence-level unlikelihood).

    python -m tools.train.finetune --init mlatui/models/embedded/model --data .corpus16 \
        --out RUN --steps 800 --max-seconds 500

Steps alternate: an odd step is the model's own training objective on a 4096-token window
(target cross-entropy, the sparse layer's indexer loss, the MTP head's loss:
`tools.train.objective.target_losses`); an even step is sequence-level unlikelihood
(`tools.train.unlikelihood`): the target greedily continues `--ul-batch` training-text
prefixes (of one of the `--ul-prefix` lengths; `--ul-openings` of the steps take the openings of
files, like the shipped prompts, the others random offsets) for `--ul-tokens` tokens, and each token of a 4-gram its own
continuation repeats is pushed down. The MTP head keeps learning the changed target on the odd
steps. The learning rate warms up over 20 steps, then cosine to a tenth. Every
`--eval-every` steps: held-out cross-entropy and MTP agreement, and the bar's repetition measure
(distinct 4-grams in 128 greedy tokens after each shipped held-out prompt) and the cross-entropy
of those prompts read from position 0 (`prompt_ce`: a fine-tune without the anchor below broke
the openings of files). RUN/model is written
as a float16 mlx-lm folder (MTP layer under `model.layers.6.*`) every `--ckpt-every-min` minutes
and at the end; a stopped run continues from it with `--init RUN/model` (the optimizer restarts).
RUN/finetune.jsonl gets one JSON line per record.
"""

# isort: skip_file
from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import mlx.core as mx
import mlx.nn as nn
import mlx.optimizers as optim
import numpy as np

from mlatui.models.mtp_weights import read_mtp_weights
from tools.train.checkpoint import save_folder
from tools.train.objective import Trainee, set_sparse_training, target_losses
from tools.train.teacher import TeacherError, load_teacher
from tools.train.runlog import RunLog, run_command
from tools.train.train import next_batch, process_start
from tools.train.unlikelihood import file_openings, sequence_step_inputs, unlikelihood_loss

WARMUP = 20
BEST_KEYS = ("select_distinct_4gram", "select_ce", "greedy_distinct_4gram", "prompt_ce",
             "valid_ce_target", "valid_agree_mtp")  # fmt: skip
PROMPT_CHARS = 1600  # the length `corpus.make_prompts` cuts the shipped prompts at


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="fine-tune a target + MTP head against greedy loops")
    p.add_argument("--init", type=Path, required=True, help="mlx-lm folder: target + MTP head")
    p.add_argument("--data", type=Path, required=True, help="folder of tools.train.prepare")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--steps", type=int, default=800)
    p.add_argument("--max-seconds", type=float, default=0.0, help="save and stop before (0: none)")
    p.add_argument("--lr", type=float, default=3e-4)
    p.add_argument("--batch", type=int, default=4, help="4096-token windows per odd step")
    p.add_argument("--seq", type=int, default=4096)
    p.add_argument("--ul-weight", type=float, default=1.0)
    p.add_argument("--ul-batch", type=int, default=32)
    p.add_argument("--ul-prefix", default="256,1024",
                   help="prefix lengths, one drawn per unlikelihood step")  # fmt: skip
    p.add_argument("--ul-tokens", type=int, default=128)
    p.add_argument("--greedy-tokens", type=int, default=128,
                   help="greedy tokens after each prompt for the repetition measure")  # fmt: skip
    p.add_argument("--ul-openings", type=float, default=0.5,
                   help="share of unlikelihood steps whose prefixes open a file")  # fmt: skip
    p.add_argument("--ul-anchor", type=float, default=1.0,
                   help="weight of the cross-entropy of the unlikelihood step's own prefixes")  # fmt: skip
    p.add_argument("--max-select-ce-rise", type=float, default=0.15,
                   help="RUN/best: the checkpoint with the most distinct selection-set 4-grams "
                   "whose selection-set loss rose at most this much (nats)")  # fmt: skip
    p.add_argument("--mtp-weight", type=float, default=0.1)
    p.add_argument("--mtp-distill", type=float, default=1.0)
    p.add_argument("--eval-every", type=int, default=100)
    p.add_argument("--eval-batches", type=int, default=4)
    p.add_argument("--eval-prompts", type=int, default=8, help="shipped prompts for repetition")
    p.add_argument("--select-prompts", type=int, default=8, help="held-out texts to choose by")
    p.add_argument("--ckpt-every-min", type=float, default=3.0)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    try:
        a.prefixes = [int(x) for x in a.ul_prefix.split(",") if x.strip()]
    except ValueError:
        p.error(f"--ul-prefix takes lengths like 256,1024, got {a.ul_prefix!r}")
    if not a.prefixes or min(a.prefixes) < 1:
        p.error(f"--ul-prefix takes positive lengths, got {a.ul_prefix!r}")
    return a


def load_trainee(folder: Path, vocab_size: int, tokenizer: Path | None) -> Trainee:
    """The folder's target and MTP head in float32, both trainable."""
    target = load_teacher(folder, vocab_size, tokenizer)
    target.unfreeze()
    net = Trainee(target, None, with_mtp=True)
    n = target.args.num_hidden_layers
    local, _ = read_mtp_weights(folder, n)  # saved under the head's own parameter names
    if not local:
        raise TeacherError(f"--init {folder}: no MTP head (model.layers.{n}.* tensors)")
    net.mtp.layer.load_weights([(k, v.astype(mx.float32)) for k, v in local.items()], strict=True)
    mx.eval(net.parameters())
    return net


def lr_at(step: int, total: int, lr: float) -> float:
    if step < WARMUP:
        return lr * (step + 1) / WARMUP
    frac = min(1.0, (step - WARMUP) / max(1, total - WARMUP))
    return lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * frac)))


def unlikelihood_terms(target, inputs: mx.array, cont: mx.array, mask: mx.array):
    """(unlikelihood of the continuation's loops, cross-entropy of the prefix itself): inputs
    (B, P + n - 1) are the prefixes (B, P) and all but the last of their continuations (B, n).
    The second term is the anchor: without it the prefixes read from position 0 (file openings,
    like the shipped prompts) lost what they had learned, 2.73 -> 6.5-6.8 nats."""
    logits = target(inputs)  # (B, P + n - 1, V)
    n = cont.shape[1]
    pushed = unlikelihood_loss(logits[:, -n:], cont, mask)
    p = inputs.shape[1] - n + 1
    anchor = nn.losses.cross_entropy(logits[:, : p - 1], inputs[:, 1:p], reduction="mean")
    return pushed, anchor


def greedy_share(model, prompts: list[list[int]], n: int = 128) -> dict:
    from mlatui.measure.acceptance import distinct_ngram_share
    from tools.train.acceptance import greedy

    shares = [distinct_ngram_share(greedy(model, ids, n)) or 0.0 for ids in prompts]
    return {"greedy_distinct_4gram": round(float(np.mean(shares)), 4),
            "greedy_per_prompt": [round(s, 3) for s in shares]}  # fmt: skip


def prompt_ce(model, prompts: list[list[int]]) -> float:
    """Mean next-token cross-entropy over the shipped prompts, read from position 0 as every
    user's prompt is. The windows of `valid_ce_target` start mid-file; a fine-tune that broke
    the openings of files (two unlikelihood stages here: 2.73 -> 6.5-6.8 nats, while the
    window loss rose only 1.76 -> 1.89-1.91) shows it here."""
    losses = []
    for ids in prompts:
        x = mx.array([ids])  # (1, T)
        logits = model(x[:, :-1])  # (1, T - 1, V)
        losses.append(nn.losses.cross_entropy(logits, x[:, 1:], reduction="mean").item())
    return round(float(np.mean(losses)), 4)


def prompt_ids(folder: Path, count: int) -> list[list[int]]:
    from mlx_lm.utils import load_tokenizer

    from mlatui.models.embedded import prompts

    tok = load_tokenizer(folder)
    return [tok.encode(t) for t in prompts()[:count]]


def selection_ids(folder: Path, valid: np.ndarray, eot: int, count: int = 8) -> list[list[int]]:
    """Held-out text, none of it a shipped prompt, to choose a checkpoint by: the openings of
    the held-out files the shipped prompts left (made by `make_prompts`' rule), then excerpts
    from the middle of the long ones, each read from position 0 as a prompt is. Choosing on the
    shipped prompts would make their repetition figure a selected, not a measured, one."""
    from mlx_lm.utils import load_tokenizer

    from mlatui.models.embedded import prompts
    from tools.train.corpus import Corpus, make_prompts

    tok, shipped = load_tokenizer(folder), set(prompts())
    pieces = np.split(valid, np.flatnonzero(valid == eot))  # each after the first opens on eot
    docs = [tok.decode(d[1:].tolist() if d[:1].tolist() == [eot] else d.tolist()) for d in pieces]
    held_out = Corpus(train=[], valid=docs, files=len(docs), chars=sum(map(len, docs)))
    texts, chars = [t for t in make_prompts(held_out, len(docs)) if t not in shipped], PROMPT_CHARS
    for doc in sorted(docs, key=len, reverse=True):
        start = doc.find("\n", len(doc) // 2) + 1
        cut = doc.rfind("\n", start, start + chars) + 1
        if len(texts) < count and cut - start > chars // 2:
            texts.append(doc[start:cut])
    return [tok.encode(t) for t in texts[:count]]


def finetune(a: argparse.Namespace) -> int:
    t_start = process_start()
    info = json.loads((a.data / "corpus.json").read_text())
    data = np.load(a.data / "tokens.npz")
    train_ids, valid_ids = data["train"], data["valid"]
    mx.random.seed(a.seed)
    net = load_trainee(a.init, info["vocab_size"], a.data / "tokenizer")
    set_sparse_training(net.target, True)  # the shipped model's sparse layer selects
    asks = prompt_ids(a.init, a.eval_prompts)
    chooser = selection_ids(a.init, valid_ids, info["eot_id"], a.select_prompts)
    if not chooser:
        raise TeacherError(f"{a.data}: no held-out text beside the shipped prompts to choose by")
    opt = optim.AdamW(learning_rate=a.lr, weight_decay=0.1, betas=[0.9, 0.95])
    rng = np.random.default_rng(a.seed)
    openings = file_openings(train_ids, info["eot_id"])
    a.out.mkdir(parents=True, exist_ok=True)
    log = RunLog(a.out / "finetune.jsonl")
    emit = log.emit

    def mle(net, x, y):
        return target_losses(net, x, y, a.mtp_weight, a.mtp_distill)

    def ul(net, inputs, cont, mask):
        pushed, anchor = unlikelihood_terms(net.target, inputs, cont, mask)
        pushed = a.ul_weight * pushed
        return pushed + a.ul_anchor * anchor, (pushed, anchor)

    mle_grad, ul_grad = nn.value_and_grad(net, mle), nn.value_and_grad(net, ul)

    def evaluate() -> dict:
        vr, tot = np.random.default_rng(1234), np.zeros(3)
        for _ in range(a.eval_batches):
            x, y = next_batch(valid_ids, a.batch, a.seq, vr)
            _, parts = mle(net, x, y)
            tot += np.array([float(parts.ce_target), float(parts.ce_mtp), float(parts.agree_mtp)])
        ce, ce_m, agree = tot / a.eval_batches
        return {"valid_ce_target": round(ce, 4), "valid_ce_mtp": round(ce_m, 4),
                "valid_agree_mtp": round(agree, 4), "prompt_ce": prompt_ce(net.target, asks),
                **greedy_share(net.target, asks, a.greedy_tokens),
                "select_ce": prompt_ce(net.target, chooser),
                "select_distinct_4gram": greedy_share(net.target, chooser, a.greedy_tokens)[
                    "greedy_distinct_4gram"]}  # fmt: skip

    def keep_best(rec: dict) -> None:
        """RUN/best: the most distinct selection-set continuations among checkpoints whose
        selection-set loss stayed within --max-select-ce-rise of the start's."""
        if rec["select_ce"] > start_ce + a.max_select_ce_rise:
            return
        if rec["select_distinct_4gram"] <= best[0]:
            return
        best[0] = rec["select_distinct_4gram"]
        save("best", a.out / "best")
        emit({"event": "best", "step": step, **{k: rec[k] for k in BEST_KEYS}})

    def save(tag: str, folder: Path | None = None) -> None:
        tok = a.data / "tokenizer"
        save_folder(net.target, folder or a.out / "model", tok, info["eot_id"], mtp_head=net.mtp)
        emit({"event": "saved", "tag": tag, "step": step})

    step = 0
    first = evaluate()
    start_ce, best = first["select_ce"], [first["select_distinct_4gram"]]
    emit({"event": "start", "device": str(mx.default_device()), "args": {k: str(v) for k, v in
          vars(a).items()}, "selection_prompts": len(chooser), **first})  # fmt: skip
    last_save, step_s = time.perf_counter(), 0.0
    while step < a.steps:
        if a.max_seconds and time.perf_counter() - t_start + 4 * step_s + 30 > a.max_seconds:
            save(f"step{step}")
            emit({"event": "paused", "step": step, "why": "max-seconds"})
            return 3
        lr = lr_at(step, a.steps, a.lr)
        opt.learning_rate = lr
        t0 = time.perf_counter()
        if step % 2 == 0:
            x, y = next_batch(train_ids, a.batch, a.seq, rng)
            (loss, parts), grads = mle_grad(net, x, y)
            rec = {"ce_target": parts.ce_target, "ce_mtp": parts.ce_mtp}
        else:
            prefix = int(rng.choice(a.prefixes))
            at_openings = bool(rng.random() < a.ul_openings)
            inputs, cont, mask, share = sequence_step_inputs(
                net.target, train_ids, a.ul_batch, prefix, a.ul_tokens, rng,
                openings if at_openings else None,
            )  # fmt: skip
            (loss, (pushed, anchor)), grads = ul_grad(net, inputs, cont, mask)
            rec = {"ul": pushed, "anchor_ce": anchor, "train_distinct_4gram": share,
                   "prefix": prefix, "openings": float(at_openings)}  # fmt: skip
        grads, norm = optim.clip_grad_norm(grads, 1.0)
        opt.update(net, grads)
        mx.eval(loss, net.parameters(), opt.state)
        step += 1
        step_s = max(0.9 * step_s, time.perf_counter() - t0)  # the slower kind of step
        if step % 10 == 0 or step <= 2:
            emit({"step": step, "loss": round(float(loss), 4), "grad_norm": round(float(norm), 3),
                  "lr": round(lr, 6),
                  **{k: round(float(v), 4) for k, v in rec.items()},
                  "elapsed_s": round(time.perf_counter() - t_start, 1)})  # fmt: skip
        if step % a.eval_every == 0:
            rec = {"step": step, **evaluate()}
            emit(rec)
            keep_best(rec)
        if time.perf_counter() - last_save > a.ckpt_every_min * 60:
            save(f"step{step}")
            last_save = time.perf_counter()
    final = evaluate()
    keep_best(final)
    save("final")
    emit({"event": "done", "steps": step, **final})
    log.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_command(finetune, parse(argv), (TeacherError,))


if __name__ == "__main__":
    from mlatui.host.blas import choose_blas

    choose_blas()  # the fast CPU BLAS (may run this script again with LD_PRELOAD)
    raise SystemExit(main())
