"""Distil the shipped drafts against their frozen target, each for the acceptance its rule computes.

    python -m tools.train.distil --model mlatui/models/embedded/model \
        --draft mlatui/models/embedded/draft --data .corpus16 --out RUN --steps 1000

Sampled speculative decoding keeps a draft token by one of two rules
(`mlatui.run.decode_stream.AcceptanceRule`), with p the target's next-token distribution and q the
draft's, both at the sampling temperature:
- the MTP loop's rejection sampling keeps d with probability min(1, p(d) / q(d)): the expected
  acceptance at a position is sum_x min(p(x), q(x)) = 1 - TV(p, q), so the MTP head learns
  that total variation;
- mlx-lm's exact match (the separate draft model) keeps d when the target's own sampled token
  equals it: the expected acceptance is sum_x p(x) q(x), so the draft model learns that inner
  product. It rewards a draft that puts its mass on the target's likeliest tokens: its ceiling,
  for any draft, is max_x p(x).
The earlier training (cross-entropy and KL at T = 1) optimises neither. `--anchor` adds
KL(target || draft) at T = 1, which keeps the argmax agreement that greedy acceptance counts.
The target is frozen and runs as it decodes (its sparse layer selecting).

Every `--eval-every` steps, on fixed held-out windows: for each part, both rules' acceptance and
the argmax agreement, plus the target's exact-match ceiling. RUN/model (the target with the MTP
head of the best evaluation by its rule) and RUN/draft (likewise) are float16 mlx-lm folders,
written when a part improves, and RUN/mtp.safetensors is the head alone (2.8 MB, under the
checkpoint's `model.layers.{N}.*` names: what comes back from a device, whose target is the
shipped one); a part that never beats its start is never written, so RUN/{model,draft} are at
least as good as the shipped ones on that text. RUN/last/ is written when the run stops
(`--max-seconds`, or the end); a stopped run continues with `--mtp RUN/last --draft
RUN/last/draft` (the optimizer and the schedule restart). `--steps 0` evaluates what it is given
and writes RUN/{model,draft}: with `--mtp DIR` holding a head that came back alone, that grafts it
onto `--model`'s target. RUN/distil.jsonl gets one JSON line per record. Ship with `ship
--distilled RUN`.
"""

# isort: skip_file
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import mlx.core as mx
import mlx.nn as nn
import mlx.optimizers as optim
import numpy as np

from mlatui.models.mtp_weights import read_mtp_weights
from tools.train.checkpoint import mtp_weights, save_folder
from tools.train.finetune import lr_at
from tools.train.objective import Trainee, set_sparse_training
from tools.train.teacher import TeacherError, load_teacher
from tools.train.runlog import RunLog, run_command
from tools.train.train import next_batch, process_start

PARTS = ("mtp", "draft")
RULE_OF_PART = {"mtp": "rejection", "draft": "exact_match"}


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", type=Path, required=True, help="mlx-lm folder: target + MTP head")
    p.add_argument("--draft", type=Path, required=True, help="mlx-lm folder: the draft model")
    p.add_argument("--mtp", type=Path, default=None,
                   help="the head's folder (a checkpoint, or one holding mtp.safetensors); "
                   "default --model")  # fmt: skip
    p.add_argument("--data", type=Path, required=True, help="folder of tools.train.prepare")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--parts", default="mtp,draft", help="what learns: mtp, draft or both")
    p.add_argument("--temperature", type=float, default=0.8,
                   help="the sampling temperature the acceptance is for (scenarios sample at 0.8)")  # fmt: skip
    p.add_argument("--anchor", type=float, default=0.1, help="weight of KL(target || part) at T=1")
    p.add_argument("--steps", type=int, default=1000, help="0: evaluate and write what is given")
    p.add_argument("--max-seconds", type=float, default=0.0, help="save and stop before (0: none)")
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--seq", type=int, default=2048)
    p.add_argument("--eval-every", type=int, default=100)
    p.add_argument("--eval-batches", type=int, default=4)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    a.part_list = [x.strip() for x in a.parts.split(",") if x.strip()]
    if not a.part_list or any(x not in PARTS for x in a.part_list):
        p.error(f"--parts takes mtp, draft or mtp,draft, got {a.parts!r}")
    if not a.temperature > 0:
        p.error(f"--temperature must be above 0 (sampled acceptance), got {a.temperature}")
    return a


def load_parts(a: argparse.Namespace, vocab_size: int) -> Trainee:
    """The frozen target, its MTP head and the draft model in float32; only --parts train."""
    tok = a.data / "tokenizer"
    target = load_teacher(a.model, vocab_size, tok)
    draft = load_teacher(a.draft, vocab_size, tok)
    net = Trainee(target, draft, with_mtp=True)
    n = target.args.num_hidden_layers
    local, _ = read_mtp_weights(a.mtp or a.model, n)
    if not local:
        raise TeacherError(f"{a.mtp or a.model}: no MTP head (model.layers.{n}.* tensors)")
    net.mtp.layer.load_weights([(k, v.astype(mx.float32)) for k, v in local.items()], strict=True)
    net.freeze()
    for part in a.part_list:
        getattr(net, part).unfreeze()
    set_sparse_training(target, True)  # the target's sparse layer selects, as it decodes
    mx.eval(net.parameters())
    return net


def _probs(logits: mx.array, t: float) -> mx.array:
    return mx.softmax(logits / t, axis=-1)


def rule_terms(lt: mx.array, lq: mx.array, t: float) -> dict[str, mx.array]:
    """Per-position means for target logits lt and a part's logits lq, both (B, S, V)."""
    p, q = _probs(lt, t), _probs(lq, t)
    logp = lt - mx.logsumexp(lt, axis=-1, keepdims=True)
    logq = lq - mx.logsumexp(lq, axis=-1, keepdims=True)
    return {
        "rejection": mx.minimum(p, q).sum(-1).mean(),  # 1 - TV(p, q)
        "exact_match": (p * q).sum(-1).mean(),
        "kl_t1": (mx.exp(logp) * (logp - logq)).sum(-1).mean(),
        "agree": (mx.argmax(lt, -1) == mx.argmax(lq, -1)).mean(),
    }


def forward(net: Trainee, x: mx.array, t: float) -> tuple[dict[str, dict[str, mx.array]], mx.array]:
    """Both parts' terms on windows x (B, S), and the target's exact-match ceiling."""
    h = mx.stop_gradient(net.target.model(x))  # (B, S, D): the final norm's output
    lt = mx.stop_gradient(net.target.model.embed_tokens.as_linear(h))  # (B, S, V)
    # MTP slot t pairs h_t with token t+1 and drafts token t+2: the target's position t+1
    hm = net.mtp(x[:, 1:], h[:, :-1], [None])  # (B, S-1, D)
    terms = {
        "mtp": rule_terms(lt[:, 1:], net.mtp.logits(hm), t),
        "draft": rule_terms(lt, net.draft(x), t),
    }
    return terms, _probs(lt, t).max(-1).mean()


def loss_fn(net: Trainee, x: mx.array, parts: list[str], t: float, anchor: float) -> mx.array:
    terms, _ = forward(net, x, t)
    total = mx.array(0.0)
    for part in parts:
        got = terms[part]
        total = total + (1 - got[RULE_OF_PART[part]]) + anchor * got["kl_t1"]
    return total


def evaluate(net: Trainee, valid: np.ndarray, a: argparse.Namespace) -> dict:
    rng, sums = np.random.default_rng(1234), dict[str, float]()
    for _ in range(a.eval_batches):
        x, _ = next_batch(valid, a.batch, a.seq, rng)
        terms, ceiling = forward(net, x, a.temperature)
        found = {f"{part}_{k}": v for part, d in terms.items() for k, v in d.items()}
        for k, v in (found | {"exact_match_ceiling": ceiling}).items():
            sums[k] = sums.get(k, 0.0) + float(v) / a.eval_batches
    return {f"valid_{k}": round(v, 4) for k, v in sums.items()}


def distil(a: argparse.Namespace) -> int:
    t_start = process_start()
    info = json.loads((a.data / "corpus.json").read_text())
    data = np.load(a.data / "tokens.npz")
    train_ids, valid_ids = data["train"], data["valid"]
    mx.random.seed(a.seed)
    net = load_parts(a, info["vocab_size"])
    opt = optim.AdamW(learning_rate=a.lr, weight_decay=0.0, betas=[0.9, 0.95])
    rng = np.random.default_rng(a.seed)
    a.out.mkdir(parents=True, exist_ok=True)
    log = RunLog(a.out / "distil.jsonl")
    emit = log.emit
    tok = a.data / "tokenizer"

    def write(folder: Path, which: tuple[str, ...]) -> None:
        if "mtp" in which:
            save_folder(net.target, folder / "model", tok, info["eot_id"], mtp_head=net.mtp)
            head = mtp_weights(net.mtp, net.target.args.num_hidden_layers)
            mx.save_safetensors(str(folder / "mtp.safetensors"),
                                {k: v.astype(mx.float16) for k, v in head.items()})  # fmt: skip
        if "draft" in which:
            save_folder(net.draft, folder / "draft", tok, info["eot_id"])

    def keep_best(rec: dict) -> None:
        better = tuple(p for p in a.part_list if rec[key(p)] > best[p])
        for p in better:
            best[p] = rec[key(p)]
        if better:
            write(a.out, better)
            emit({"event": "best", "step": step, "parts": list(better),
                  **{key(p): rec[key(p)] for p in better}})  # fmt: skip

    def key(part: str) -> str:
        return f"valid_{part}_{RULE_OF_PART[part]}"

    grad = nn.value_and_grad(net, loss_fn)
    step = 0
    first = evaluate(net, valid_ids, a)
    best = {p: first[key(p)] for p in a.part_list}
    emit({"event": "start", "device": str(mx.default_device()), "mlx": getattr(mx, "__version__", "?"),
          "args": {k: str(v) for k, v in vars(a).items()}, **first})  # fmt: skip
    step_s = 0.0
    while step < a.steps:
        if a.max_seconds and time.perf_counter() - t_start + 4 * step_s + 30 > a.max_seconds:
            write(a.out / "last", tuple(a.part_list))
            emit({"event": "paused", "step": step, "why": "max-seconds"})
            return 3
        lr = lr_at(step, a.steps, a.lr)
        opt.learning_rate = lr
        t0 = time.perf_counter()
        x, _ = next_batch(train_ids, a.batch, a.seq, rng)
        loss, grads = grad(net, x, a.part_list, a.temperature, a.anchor)
        grads, norm = optim.clip_grad_norm(grads, 1.0)
        opt.update(net, grads)
        mx.eval(loss, net.parameters(), opt.state)
        step += 1
        step_s = max(0.9 * step_s, time.perf_counter() - t0)
        if step % 10 == 0 or step <= 2:
            emit({"step": step, "loss": round(float(loss), 4), "grad_norm": round(float(norm), 3),
                  "lr": round(lr, 7), "elapsed_s": round(time.perf_counter() - t_start, 1)})  # fmt: skip
        if step % a.eval_every == 0:
            rec = {"step": step, **evaluate(net, valid_ids, a)}
            emit(rec)
            keep_best(rec)
    if a.steps == 0:
        write(a.out, tuple(a.part_list))
    elif step % a.eval_every:
        rec = {"step": step, **evaluate(net, valid_ids, a)}
        emit(rec)
        keep_best(rec)
    if a.steps:
        write(a.out / "last", tuple(a.part_list))
    emit({"event": "done", "steps": step, "best": best,
          "start": {key(p): first[key(p)] for p in a.part_list}})  # fmt: skip
    log.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_command(distil, parse(argv), (TeacherError,))


if __name__ == "__main__":
    from mlatui.host.blas import choose_blas

    choose_blas()  # the fast CPU BLAS (may run this script again with LD_PRELOAD)
    raise SystemExit(main())
