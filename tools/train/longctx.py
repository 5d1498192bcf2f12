"""Long-context quality of a target, its MTP head and its draft model, by position, on held-out text.

    python -m tools.train.longctx --data .corpus16 [--model DIR] [--draft DIR] \
        [--length 32768] [--set rope_scaling='{"type": "yarn", "factor": 8, ...}'] [--out FILE]

Each held-out window of `--length` tokens runs through the target in chunks with its KV cache,
as decoding reads it (the sparse layer selects its top-k as it decodes), and so do the MTP head
and the draft model. Per position t, with T = `--temperature`:
- `ce`: the target's cross-entropy of token t + 1;
- `mtp_rejection`: Σ min(p, q) for the MTP head's draft of token t + 2 against the target's
  distribution there, both at T: the probability that rejection sampling accepts the head's
  sampled draft at position 1 (DeepSeek-V3's MTP is verified so); `mtp_agree`: greedy agreement;
- `draft_exact_match`: Σ p·q for the draft model against the target at token t + 1: the
  probability that a sampled draft equals the target's sampled token (mlx-lm's rule);
and each is averaged over the positions whose context length falls in a bucket (`--buckets`).
`--set KEY=JSON` overrides config keys of the target and the draft (e.g. RoPE scaling) on a copy.
"""

# isort: skip_file
from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import mlx.core as mx
import numpy as np

from mlatui.models.embedded import DRAFT_PATH, MODEL_PATH
from tools.train.distil import load_parts
from tools.train.objective import Trainee, set_sparse_training
from tools.train.runlog import run_command
from tools.train.teacher import TeacherError

CHUNK = 1024
MEASURES = ("ce", "mtp_rejection", "mtp_agree", "draft_exact_match", "draft_rejection")


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="long-context quality by position, held-out text")
    p.add_argument("--data", type=Path, required=True, help="folder of tools.train.prepare")
    p.add_argument("--model", type=Path, default=MODEL_PATH, help="target + MTP head folder")
    p.add_argument("--draft", type=Path, default=DRAFT_PATH)
    p.add_argument("--length", type=int, default=32768, help="tokens per held-out window")
    p.add_argument("--windows", type=int, default=2, help="held-out windows (spread over it)")
    p.add_argument("--buckets", default="2048,4096,8192,16384,32768",
                   help="upper context lengths of the buckets")  # fmt: skip
    p.add_argument("--temperature", type=float, default=0.8)
    p.add_argument("--set", action="append", default=[], metavar="KEY=JSON",
                   help="override a config key of the target and the draft (repeatable)")  # fmt: skip
    p.add_argument("--out", type=Path, default=None, help="also write the JSON here")
    a = p.parse_args(argv)
    try:
        a.overrides = {k: json.loads(v) for k, v in (s.split("=", 1) for s in a.set)}
    except (ValueError, json.JSONDecodeError) as e:
        p.error(f"--set takes KEY=JSON, e.g. max_position_embeddings=32768 ({e})")
    a.bucket_list = sorted(int(b) for b in a.buckets.split(","))
    return a


def with_config(folder: Path, overrides: dict[str, Any], into: Path) -> Path:
    """`folder` itself, or a copy in `into` whose config.json carries `overrides`."""
    if not overrides:
        return folder
    copy = into / folder.name
    shutil.copytree(folder, copy)
    config = json.loads((copy / "config.json").read_text())
    (copy / "config.json").write_text(json.dumps(config | overrides, indent=2))
    return copy


def _soft(logits: mx.array, t: float) -> mx.array:
    return mx.softmax(logits.astype(mx.float32) / t, axis=-1)


def window_measures(net: Trainee, ids: np.ndarray, t: float) -> dict[str, np.ndarray]:
    """Per-position measures over one window `ids` (N,): arrays of N - 2 values, index = t."""
    target, mtp, draft = net.target, net.mtp, net.draft
    caches = target.make_cache(), [mtp.make_cache()], draft.make_cache()
    n = ids.size - 2
    out = {k: np.full(n, np.nan, np.float32) for k in MEASURES}
    carry: mx.array | None = None  # the MTP head's logits at the previous chunk's last slot
    for a in range(0, n, CHUNK):
        b = min(a + CHUNK, n)
        x = mx.array(ids[None, a:b].astype(np.int32))  # (1, C)
        h = target.model(x, caches[0])  # (1, C, D)
        lt = target.model.embed_tokens.as_linear(h)[0]  # (C, V)
        ld = draft(x, caches[2])[0]  # (C, V)
        nxt = mx.array(ids[None, a + 1 : b + 1].astype(np.int32))  # (1, C): token t + 1
        lq = mtp.logits(mtp(nxt, h, caches[1]))[0]  # (C, V): drafts of token t + 2
        p, d = _soft(lt, t), _soft(ld, t)
        logp = lt - mx.logsumexp(lt, axis=-1, keepdims=True)
        ce = -mx.take_along_axis(logp, nxt[0][:, None], axis=-1)[:, 0]  # (C,)
        # slot t's draft meets the target at t + 1: rows 1.. of this chunk, and the carried slot
        q_prev = lq[:-1] if carry is None else mx.concatenate([carry, lq[:-1]])
        p_next = p[1:] if carry is None else p
        mtp_rej = mx.minimum(_soft(q_prev, t), p_next).sum(-1)
        mtp_agree = mx.argmax(q_prev, -1) == mx.argmax(lt[1:] if carry is None else lt, -1)
        mx.eval(ce, mtp_rej, mtp_agree, p, d)
        first = a if carry is None else a - 1
        out["ce"][a:b] = np.array(ce)
        out["mtp_rejection"][first : b - 1] = np.array(mtp_rej)
        out["mtp_agree"][first : b - 1] = np.array(mtp_agree)
        out["draft_exact_match"][a:b] = np.array((p * d).sum(-1))
        out["draft_rejection"][a:b] = np.array(mx.minimum(p, d).sum(-1))
        carry = lq[-1:]
    return out


def bucketed(per_pos: list[dict[str, np.ndarray]], buckets: list[int]) -> list[dict[str, Any]]:
    rows, low = [], 0
    for high in buckets:
        row: dict[str, Any] = {"context": f"{low}-{high}"}
        for k in MEASURES:
            vals = np.concatenate([w[k][low:high] for w in per_pos if w[k].size > low])
            vals = vals[~np.isnan(vals)]
            row[k] = round(float(vals.mean()), 4) if vals.size else None
        row["positions"] = int(sum(max(0, min(w["ce"].size, high) - low) for w in per_pos))
        rows.append(row)
        low = high
    return rows


def windows(valid: np.ndarray, length: int, count: int) -> list[np.ndarray]:
    """`count` windows of `length` + 2 tokens spread evenly over the held-out tokens."""
    span = length + 2
    if valid.size < span:
        raise TeacherError(f"the held-out split holds {valid.size} tokens, fewer than {span}")
    starts = np.linspace(0, valid.size - span, count).astype(int)
    return [valid[s : s + span] for s in starts]


def measure(a: argparse.Namespace) -> int:
    t0 = time.perf_counter()
    info = json.loads((a.data / "corpus.json").read_text())
    valid = np.load(a.data / "tokens.npz")["valid"]
    with tempfile.TemporaryDirectory() as tmp:
        model = with_config(a.model, a.overrides, Path(tmp))
        draft = with_config(a.draft, a.overrides, Path(tmp))
        ns = argparse.Namespace(data=a.data, model=model, draft=draft, mtp=None, part_list=[])
        net = load_parts(ns, info["vocab_size"])
    set_sparse_training(net.target, True)  # top-k selection as decoding does, materialised L > 1
    per_pos = [window_measures(net, w, a.temperature) for w in windows(valid, a.length, a.windows)]
    report = {
        "model": str(a.model), "draft": str(a.draft), "overrides": a.overrides,
        "temperature": a.temperature, "length": a.length, "windows": a.windows,
        "device": str(mx.default_device()), "mlx": getattr(mx, "__version__", "?"),
        "seconds": round(time.perf_counter() - t0, 1),
        "buckets": bucketed(per_pos, a.bucket_list),
    }  # fmt: skip
    text = json.dumps(report, indent=1)
    print(text)
    if a.out:
        a.out.write_text(text + "\n")
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_command(measure, parse(argv), (TeacherError,))


if __name__ == "__main__":
    from mlatui.host.blas import choose_blas

    choose_blas()  # the fast CPU BLAS (may run this script again with LD_PRELOAD)
    raise SystemExit(main())
