"""Resumable training checkpoints (exact) and the shippable mlx-lm folders.

A checkpoint is a folder: `params.safetensors` (every trained parameter, float32 as trained),
`optimizer.safetensors` (AdamW's moments, step and learning rate) and `state.json` (step, planned
steps, the data sampler's RNG state, the arguments that define the run). It is written beside the
old one and swapped in with renames, so a run killed while saving still has the previous one.
Resuming from it continues bit-identically to a run that never stopped.

The shippable folders hold float16 weights: OUT/model is the target with its MTP layer under the
key prefix real DeepSeek-V3 checkpoints use (`model.layers.{num_hidden_layers}.*`, config
`num_nextn_predict_layers = 1`), OUT/draft the draft model.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import mlx.core as mx
import mlx.nn as nn
from mlx.utils import tree_flatten, tree_unflatten

from mlatui.models.mlatui_mla import Model
from mlatui.models.mx_typed import flat_arrays, load_safetensors

SHARD_BYTES = 15 * 2**20  # files coming back from the device are capped at 16 MiB each
STATE_FILE = "state.json"


class CheckpointError(ValueError):
    pass


@dataclass
class TrainState:
    step: int = 0
    total_steps: int = 0  # 0 until planned (--steps auto plans it after a few timed steps)
    tokens: int = 0
    train_seconds: float = 0.0  # training time over every call so far
    calls: int = 0  # processes that have trained this run
    sparse_from: int | None = None
    done: bool = False
    rng: dict = field(default_factory=dict)  # numpy Generator.bit_generator.state
    run: dict = field(default_factory=dict)  # arguments that define the run (must match on resume)
    step_seconds: float | None = None  # the planning measurement


def save_checkpoint(folder: Path, net: nn.Module, opt: Any, state: TrainState) -> float:
    """Write the checkpoint atomically; returns the bytes written."""
    folder = Path(folder)
    tmp = folder.with_name(folder.name + ".tmp")
    old = folder.with_name(folder.name + ".old")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    params = dict(tree_flatten(net.parameters()))
    opt_state = dict(tree_flatten(opt.state))
    mx.save_safetensors(str(tmp / "params.safetensors"), params)
    mx.save_safetensors(str(tmp / "optimizer.safetensors"), opt_state)
    (tmp / STATE_FILE).write_text(json.dumps(asdict(state), indent=1) + "\n")
    if folder.exists():
        shutil.rmtree(old, ignore_errors=True)
        folder.rename(old)
    tmp.rename(folder)
    shutil.rmtree(old, ignore_errors=True)
    return sum(f.stat().st_size for f in folder.iterdir())


def read_state(folder: Path) -> TrainState:
    path = Path(folder) / STATE_FILE
    if not path.exists():
        raise CheckpointError(
            f"no checkpoint in {folder} (missing {STATE_FILE}): start without --resume"
        )
    return TrainState(**json.loads(path.read_text()))


def load_checkpoint(folder: Path, net: nn.Module, opt: Any) -> TrainState:
    """Restore parameters and optimizer state into `net` / `opt` (built as for a fresh run)."""
    folder = Path(folder)
    state = read_state(folder)
    params = load_safetensors(str(folder / "params.safetensors"))
    try:
        net.load_weights(list(params.items()), strict=True)
    except ValueError as e:
        raise CheckpointError(f"{folder}: parameters do not match this run's model: {e}") from e
    opt.state = tree_unflatten(
        list(load_safetensors(str(folder / "optimizer.safetensors")).items())
    )
    mx.eval(net.parameters(), opt.state)
    return state


def mismatched(saved: dict, given: dict) -> list[str]:
    """'key: saved X, given Y' for every run-defining argument that differs."""
    return [
        f"{k}: saved {saved.get(k)!r}, given {given.get(k)!r}"
        for k in sorted(set(saved) | set(given))
        if saved.get(k) != given.get(k)
    ]


def _write_shards(folder: Path, weights: dict[str, mx.array]) -> None:
    shards: list[dict[str, mx.array]] = []
    cur: dict[str, mx.array] = {}
    size = 0
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


def mtp_weights(mtp_head: nn.Module, n_layers: int) -> dict[str, mx.array]:
    """The head's layer under the DeepSeek-V3 checkpoint prefix `model.layers.{n_layers}.`."""
    flat = flat_arrays(mtp_head.layer.parameters())
    return {f"model.layers.{n_layers}.{k}": v for k, v in flat}


def save_folder(
    model: Model,
    folder: Path,
    tokenizer: Path | None,
    eot: int,
    dtype=mx.float16,
    mtp_head: nn.Module | None = None,
) -> None:
    """An mlx-lm folder (config.json, float16 safetensors, tokenizer files if `tokenizer`)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    weights = dict(tree_flatten(model.parameters()))
    config = asdict(model.args) | {"eos_token_id": eot, "torch_dtype": "float16"}
    if mtp_head is not None:
        weights |= mtp_weights(mtp_head, model.args.num_hidden_layers)
        config["num_nextn_predict_layers"] = 1
    _write_shards(folder, {k: v.astype(dtype) for k, v in weights.items()})
    (folder / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    if tokenizer is not None:
        for f in ("tokenizer.json", "tokenizer_config.json"):
            shutil.copy(Path(tokenizer) / f, folder / f)
