"""Seeded joint training of the embedded target, its draft model and its MTP head (CPU/CUDA/Metal).

    python -m tools.train.prepare --out .corpus
    python -m tools.train.train --data .corpus --out RUN --steps 4000 --seq 4096 --batch 4
    python -m tools.train.train ... --resume          # continues RUN/ckpt exactly
    python -m tools.train.train ... --teacher mlatui/models/embedded/model --draft-preset deep
                                                          # a new draft only, the target frozen

Losses: see tools.train.objective (`draft_losses` with `--teacher`, which writes RUN/draft only). The schedule is by step (linear warm-up, then cosine to 10 %
of `--lr`), so a run split over several processes is the run that never stopped: every
`--ckpt-every-min` minutes (and before exiting) RUN/ckpt gets parameters, AdamW state, the data
sampler's RNG state and the step; `--resume` restores them. `--max-seconds` ends the process,
with a checkpoint, before that much wall time (exit status 3: resume to continue; 0: finished).
`--steps auto` plans the step count from `--train-budget-s` after timing the first steps (inside
the warm-up, whose learning rates do not depend on the plan). RUN/model (target + MTP layer under
`model.layers.{N}.*`) and RUN/draft are written as float16 mlx-lm folders at every checkpoint;
RUN/train.jsonl gets one JSON line per log record, across calls.
"""

# isort: skip_file
from __future__ import annotations

import argparse
import json
import math
import signal
import sys
import time
from pathlib import Path

import mlx.core as mx
import mlx.nn as nn
import mlx.optimizers as optim
import numpy as np
from mlatui.models.mx_typed import flat_arrays

from mlatui.models.mlatui_mla import Model
from tools.train.checkpoint import (
    CheckpointError,
    TrainState,
    load_checkpoint,
    mismatched,
    read_state,
    save_checkpoint,
    save_folder,
)
from tools.train.objective import Trainee, draft_losses, losses, set_sparse_training
from tools.train.presets import DRAFT_PRESETS, PRESETS
from tools.train.runlog import RunLog
from tools.train.teacher import TeacherError, init_from_teacher, load_teacher, truncated_args

# arguments that define the run: a resume must be given the same ones
RUN_KEYS = (
    "preset", "steps", "train_budget_s", "batch", "seq", "lr", "warmup", "distill",
    "dense_fraction", "mtp_weight", "mtp_weight_final", "mtp_switch", "mtp_distill", "no_mtp",
    "seed", "data_id", "teacher", "draft_preset", "draft_init_layers", "hard_distill",
    "draft_init",
)  # fmt: skip
PAUSED_EXIT = 3


def process_start() -> float:
    """This process's start on the perf_counter clock: --max-seconds counts the imports too."""
    import psutil

    age = time.time() - psutil.Process().create_time()
    return time.perf_counter() - max(0.0, age)


def lr_at(step: int, total: int, lr: float, warmup: int) -> float:
    """Linear warm-up over `warmup` steps, then cosine from lr to lr/10 at `total`."""
    if step < warmup:
        return lr * (step + 1) / warmup
    frac = min(1.0, (step - warmup) / max(1, total - warmup))
    return lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * frac)))


def mtp_weight_at(step: int, total: int, a: argparse.Namespace) -> float:
    """DeepSeek-V3's schedule: `--mtp-weight` (0.3), then `--mtp-weight-final` (0.1) from
    `--mtp-switch` of the steps on."""
    return a.mtp_weight if step < a.mtp_switch * total else a.mtp_weight_final


def next_batch(ids: np.ndarray, batch: int, seq: int, rng: np.random.Generator):
    starts = rng.integers(0, ids.size - seq - 1, size=batch)
    win = np.stack([ids[s : s + seq + 1] for s in starts]).astype(np.int32)  # (B, S+1)
    return mx.array(win[:, :-1]), mx.array(win[:, 1:])


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="train the embedded model, its draft and MTP head")
    p.add_argument("--data", type=Path, required=True, help="folder of tools.train.prepare")
    p.add_argument("--out", type=Path, required=True, help="RUN folder: ckpt, model, draft, log")
    p.add_argument("--preset", choices=sorted(PRESETS), default="full")
    p.add_argument("--steps", default="auto", help="total steps, or 'auto' (--train-budget-s)")
    p.add_argument("--train-budget-s", type=float, default=1380.0, help="--steps auto: training "
                   "seconds over all calls (planned after --plan-steps timed steps)")  # fmt: skip
    p.add_argument("--plan-steps", type=int, default=30)
    p.add_argument("--max-seconds", type=float, default=0.0,
                   help="this process: checkpoint and exit before this much wall time (0: none)")  # fmt: skip
    p.add_argument("--stop-at-step", type=int, default=0,
                   help="this process: checkpoint and exit once this step is done (0: never)")  # fmt: skip
    p.add_argument("--ckpt-every-min", type=float, default=3.0)
    p.add_argument("--resume", action="store_true", help="continue RUN/ckpt")
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--seq", type=int, default=4096)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--warmup", type=int, default=200)
    p.add_argument("--distill", type=float, default=1.0)
    p.add_argument("--dense-fraction", type=float, default=0.3)
    p.add_argument("--mtp-weight", type=float, default=0.3)
    p.add_argument("--mtp-weight-final", type=float, default=0.1)
    p.add_argument("--mtp-switch", type=float, default=0.7)
    p.add_argument("--mtp-distill", type=float, default=1.0,
                   help="KL(target || MTP) inside the MTP loss (0: cross-entropy only)")  # fmt: skip
    p.add_argument("--no-mtp", action="store_true", help="train no MTP head")
    p.add_argument("--teacher", type=Path, default=None,
                   help="train only a draft, distilled from this frozen mlx-lm folder's target")  # fmt: skip
    p.add_argument("--draft-preset", choices=sorted(DRAFT_PRESETS), default=None,
                   help="the draft's geometry (default: the --preset's own)")  # fmt: skip
    p.add_argument("--draft-init-layers", default="",
                   help="--teacher: the draft is these teacher layers (e.g. 0,2,5), then distilled")  # fmt: skip
    p.add_argument("--draft-init", type=Path, default=None,
                   help="--teacher: the draft starts as this mlx-lm folder's model, then distilled")  # fmt: skip
    p.add_argument("--hard-distill", type=float, default=0.0,
                   help="--teacher: weight of cross-entropy on the teacher's argmax")  # fmt: skip
    p.add_argument("--eval-every", type=int, default=200)
    p.add_argument("--eval-batches", type=int, default=4)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--compile", action="store_true",
                   help="mx.compile the step (on the CPU it builds C++ kernels first: slow start)")  # fmt: skip
    p.add_argument("--no-tokenizer", action="store_true", help="copy no tokenizer files into RUN")
    a = p.parse_args(argv)
    if a.steps != "auto" and not (a.steps.isdigit() and int(a.steps) > 0):
        p.error(f"--steps must be a positive integer or 'auto', got {a.steps!r}")
    if (a.draft_init_layers or a.hard_distill or a.draft_init) and a.teacher is None:
        p.error("--draft-init, --draft-init-layers and --hard-distill need --teacher")
    if a.draft_init and (a.draft_init_layers or a.draft_preset):
        p.error(
            "--draft-init sets the draft's geometry: leave out --draft-init-layers/--draft-preset"
        )
    if a.draft_init is not None:
        a.draft_init = str(a.draft_init.resolve())  # a string: state.json keeps it
    if a.draft_init_layers and a.draft_preset:
        p.error("--draft-init-layers sets the draft's geometry: leave out --draft-preset")
    try:
        a.init_layers = [int(i) for i in a.draft_init_layers.split(",") if i.strip()]
    except ValueError:
        p.error(f"--draft-init-layers takes layer numbers like 0,2,5, got {a.draft_init_layers!r}")
    if a.teacher is not None:
        a.teacher, a.no_mtp = str(a.teacher.resolve()), True  # a string: state.json keeps it
    if a.steps == "auto" and not 0 < a.plan_steps < a.warmup:
        p.error(
            "--plan-steps must lie inside the warm-up (its learning rates do not need the plan)"
        )
    return a


class Run:
    """One process's share of a run: the model, optimizer, data, state and log."""

    def __init__(self, a: argparse.Namespace):
        self.a, self.t_start = a, process_start()
        self.info = json.loads((a.data / "corpus.json").read_text())
        data = np.load(a.data / "tokens.npz")
        self.train_ids, self.valid_ids = data["train"], data["valid"]
        a.data_id = f"{self.info.get('train_tokens')}/{self.info.get('valid_tokens')}"
        targs, dargs = PRESETS[a.preset]()
        if a.draft_preset:
            dargs = DRAFT_PRESETS[a.draft_preset]()
        mx.random.seed(a.seed)
        self.init: dict = {}
        if a.teacher is None:
            targs.vocab_size = dargs.vocab_size = self.info["vocab_size"]
            target = Model(targs)
        else:
            target = load_teacher(Path(a.teacher), self.info["vocab_size"], a.data / "tokenizer")
            if a.init_layers:
                dargs = truncated_args(target.args, a.init_layers)
            dargs.vocab_size = self.info["vocab_size"]
        if a.draft_init:
            draft = load_teacher(Path(a.draft_init), self.info["vocab_size"], a.data / "tokenizer")
            draft.unfreeze()
            self.init = {"from": a.draft_init}
        else:
            draft = Model(dargs)
        if a.teacher is not None and not a.draft_init:
            self.init = init_from_teacher(draft, target, a.init_layers)
        self.net = Trainee(target, draft, with_mtp=not a.no_mtp)
        mx.eval(self.net.parameters())
        self.opt = optim.AdamW(learning_rate=a.lr, weight_decay=0.1, betas=[0.9, 0.95])
        self.rng = np.random.default_rng(a.seed)
        run = {k: getattr(a, k) for k in RUN_KEYS}
        self.ckpt = a.out / "ckpt"
        if a.resume:
            saved = read_state(self.ckpt)
            if bad := mismatched(saved.run, run):
                raise CheckpointError(f"{self.ckpt} is another run ({'; '.join(bad)})")
            self.state = load_checkpoint(self.ckpt, self.net, self.opt)
            self.rng.bit_generator.state = self.state.rng
        else:
            if (self.ckpt / "state.json").exists():
                raise CheckpointError(f"{self.ckpt} exists: pass --resume, or another --out")
            self.state = TrainState(total_steps=0 if a.steps == "auto" else int(a.steps), run=run)
        self.state.calls += 1
        a.out.mkdir(parents=True, exist_ok=True)
        self.log = RunLog(a.out / "train.jsonl")
        self.stop_signal = False

    def losses(self, net: Trainee, x: mx.array, y: mx.array, lam: mx.array):
        if self.a.teacher is not None:
            return draft_losses(net, x, y, self.a.distill, self.a.hard_distill)
        return losses(net, x, y, self.a.distill, lam, self.a.mtp_distill)

    def emit(self, rec: dict) -> None:
        self.log.emit(rec)

    def counts(self) -> dict:
        n = {k: sum(v.size for _, v in flat_arrays(getattr(self.net, k).parameters()))
             for k in ("target", "draft", "mtp") if k in self.net}  # fmt: skip
        return {f"{k}_params": v for k, v in n.items()}

    def evaluate(self) -> dict:
        a, vr = self.a, np.random.default_rng(1234)
        tot = np.zeros(8)
        for _ in range(a.eval_batches):
            x, y = next_batch(self.valid_ids, a.batch, a.seq, vr)
            _, parts = self.losses(self.net, x, y, mx.array(0.0))
            tot += np.array([float(v) for v in parts])
        names = ("ce_target", "ce_draft", "kl", "indexer_kl", "agree", "ce_mtp", "kl_mtp",
                 "agree_mtp")  # fmt: skip
        return {f"valid_{k}": round(v, 4) for k, v in zip(names, tot / a.eval_batches, strict=True)}

    def save(self, tag: str) -> float:
        t0 = time.perf_counter()
        self.state.rng = dict(self.rng.bit_generator.state)
        nbytes = save_checkpoint(self.ckpt, self.net, self.opt, self.state)
        tok = None if self.a.no_tokenizer else self.a.data / "tokenizer"
        mtp = self.net.mtp if self.net.has_mtp else None
        if self.a.teacher is None:  # a teacher stays as shipped: only the draft is written
            save_folder(
                self.net.target, self.a.out / "model", tok, self.info["eot_id"], mtp_head=mtp
            )
        save_folder(self.net.draft, self.a.out / "draft", tok, self.info["eot_id"])
        dt = time.perf_counter() - t0
        self.emit({"event": "saved", "tag": tag, "step": self.state.step, "seconds": round(dt, 2),
                   "ckpt_mb": round(nbytes / 2**20, 1)})  # fmt: skip
        return dt


def train(a: argparse.Namespace) -> int:
    r = Run(a)
    st = r.state
    if st.done:
        r.emit({"event": "already_done", "step": st.step})
        return 0
    r.emit({"event": "resume" if a.resume else "start", "step": st.step, "call": st.calls,
            "device": str(mx.default_device()), "mlx": getattr(mx, "__version__", "?"), **r.counts(),
            "args": {k: str(v) for k, v in vars(a).items()}, "corpus": r.info,
            **({"teacher": teacher_record(Path(a.teacher)), "draft_init": r.init} if a.teacher else {})})  # fmt: skip
    signal.signal(signal.SIGTERM, lambda *_: setattr(r, "stop_signal", True))

    vg = nn.value_and_grad(r.net, r.losses)

    def step(x, y, lam):
        (loss, parts), grads = vg(r.net, x, y, lam)
        grads, norm = optim.clip_grad_norm(grads, 1.0)
        r.opt.update(r.net, grads)
        return loss, parts, norm

    def compiled():
        if not a.compile:
            return step
        state = [r.net.state, r.opt.state, mx.random.state]
        return mx.compile(step, inputs=state, outputs=state)

    if a.teacher is not None and st.sparse_from is None:
        st.sparse_from = 0  # the teacher runs as shipped: its sparse layer selects from step 0
    sparse = st.sparse_from is not None
    set_sparse_training(r.net.target, sparse)
    fn = compiled()
    t_loop = time.perf_counter()
    base_s = st.train_seconds
    last_save, save_s, step_s, eval_s, plan_times = t_loop, 5.0, 0.0, 0.0, []
    tokens_here = 0

    def save(tag: str) -> float:
        st.train_seconds = base_s + time.perf_counter() - t_loop
        return r.save(tag)

    def evaluate() -> dict:
        nonlocal eval_s
        t0 = time.perf_counter()
        out = r.evaluate()
        eval_s = time.perf_counter() - t0
        return out

    while True:
        total = st.total_steps
        if total and st.step >= total:
            break
        now = time.perf_counter()
        reserve_s = 2 * step_s + save_s + max(eval_s, a.eval_batches * step_s) + 10
        why = (
            "signal" if r.stop_signal
            else "max-seconds" if a.max_seconds and now - r.t_start + reserve_s > a.max_seconds
            else "stop-at-step" if a.stop_at_step and st.step >= a.stop_at_step
            else None
        )  # fmt: skip
        if why:
            save(f"step{st.step}")
            r.emit({"event": "paused", "step": st.step, "total_steps": total,
                    "train_seconds": round(st.train_seconds, 1),
                    "why": why, "elapsed_s": round(time.perf_counter() - r.t_start, 1)})  # fmt: skip
            return PAUSED_EXIT
        if total and not sparse and st.step >= int(a.dense_fraction * total):
            sparse, st.sparse_from = True, st.step
            set_sparse_training(r.net.target, True)
            fn = compiled()
            r.emit({"event": "sparse", "step": st.step})
        lr = lr_at(st.step, max(total, a.warmup + 1), a.lr, a.warmup)
        lam = mtp_weight_at(st.step, total, a) if total else a.mtp_weight
        r.opt.learning_rate = lr
        x, y = next_batch(r.train_ids, a.batch, a.seq, r.rng)
        t0 = time.perf_counter()
        loss, parts, norm = fn(x, y, mx.array(lam))
        mx.eval(loss, parts, norm, r.net.state, r.opt.state)
        step_s = time.perf_counter() - t0
        st.step += 1
        st.tokens += x.size
        tokens_here += x.size
        if not total:
            plan_times.append(step_s)
            # plan on the median of the later timed steps, before the warm-up ends in any case
            if len(plan_times) == a.plan_steps or st.step + 1 >= a.warmup:
                st.step_seconds = float(np.median(plan_times[len(plan_times) // 3 :]))
                left = a.train_budget_s - base_s - (time.perf_counter() - t_loop)
                st.total_steps = st.step + max(1, int(0.96 * left / st.step_seconds))
                r.emit({"event": "planned", "step": st.step, "total_steps": st.total_steps,
                        "step_seconds": round(st.step_seconds, 4)})  # fmt: skip
        if st.step % 20 == 0 or st.step == 1:
            names = ("ce_target", "ce_draft", "kl", "indexer_kl", "agree", "ce_mtp", "kl_mtp",
                     "agree_mtp")  # fmt: skip
            dt = time.perf_counter() - t_loop
            r.emit({"step": st.step, "loss": round(float(loss), 4),
                    **{k: round(float(v), 4) for k, v in zip(names, parts, strict=True)},
                    "grad_norm": round(float(norm), 3), "lr": round(lr, 6), "mtp_weight": lam,
                    "tok_per_s": round(tokens_here / dt),
                    "elapsed_s": round(time.perf_counter() - r.t_start, 1)})  # fmt: skip
        if st.step % a.eval_every == 0:
            r.emit({"step": st.step, **evaluate()})
        if time.perf_counter() - last_save > a.ckpt_every_min * 60:
            save_s = save(f"step{st.step}")
            last_save = time.perf_counter()
    final = evaluate()
    st.done = True
    save("final")
    r.emit({"event": "done", "steps": st.step, "tokens": st.tokens, "calls": st.calls,
            "train_seconds": round(st.train_seconds, 1), "sparse_from_step": st.sparse_from,
            **final})  # fmt: skip
    r.log.close()
    return 0


def teacher_record(folder: Path) -> dict:
    from mlatui.models.embedded import sha256

    return {"path": str(folder), "files": {f.name: sha256(f) for f in sorted(folder.glob("*"))
                                           if f.suffix in (".json", ".safetensors")}}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    a = parse(argv)
    try:
        return train(a)
    except (CheckpointError, TeacherError) as e:
        print(f"mlatui: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    from mlatui.host.blas import choose_blas

    choose_blas()  # the fast CPU BLAS (may run this script again with LD_PRELOAD)
    raise SystemExit(main())
