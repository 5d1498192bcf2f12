"""A frozen, shipped target as the teacher of a new draft model (`train --teacher DIR`).

Distilling only the draft keeps the shipped target and its MTP head bit-for-bit as they are: every
figure measured on them stays valid, and all the compute goes to the draft. The draft starts from
the teacher's embedding and final norm (shared shapes), and optionally from copies of some of the
teacher's dense layers (`--draft-init-layers`: a truncated teacher, then distilled).
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import mlx.core as mx
from mlx.utils import tree_flatten

from mlatui.models.embedded import sha256
from mlatui.models.mlatui_mla import Model, ModelArgs
from mlatui.models.mx_typed import load_safetensors


class TeacherError(ValueError):
    pass


def load_teacher(folder: Path, vocab_size: int, tokenizer: Path | None) -> Model:
    """The folder's target in float32, frozen (its MTP layer dropped by `sanitize`)."""
    folder = Path(folder)
    if not (folder / "config.json").exists():
        raise TeacherError(f"--teacher {folder}: no config.json there (an mlx-lm model folder)")
    config = json.loads((folder / "config.json").read_text())
    args = ModelArgs.from_dict(config)
    if args.vocab_size != vocab_size:
        raise TeacherError(
            f"--teacher {folder}: vocabulary {args.vocab_size}, the corpus has {vocab_size}"
        )
    theirs, ours = folder / "tokenizer.json", tokenizer / "tokenizer.json" if tokenizer else None
    if ours is not None and ours.exists() and theirs.exists() and sha256(ours) != sha256(theirs):
        raise TeacherError(f"--teacher {folder}: its tokenizer is not the corpus's ({ours})")
    model = Model(args)
    weights: dict[str, mx.array] = {}
    for f in sorted(folder.glob("*.safetensors")):
        weights |= load_safetensors(str(f))
    model.load_weights(list(model.sanitize(weights).items()), strict=True)
    model.freeze()
    mx.eval(model.parameters())
    return model


def truncated_args(teacher: ModelArgs, layers: list[int]) -> ModelArgs:
    """The teacher's geometry with only `layers` (all dense) kept."""
    sparse = sorted(set(layers) & set(teacher.sparse_layers))
    if sparse:
        raise TeacherError(
            f"--draft-init-layers: layer(s) {sparse} are sparse in the teacher; pick dense ones"
        )
    bad = [i for i in layers if not 0 <= i < teacher.num_hidden_layers]
    if bad:
        raise TeacherError(
            f"--draft-init-layers: {bad} not in the teacher's 0..{teacher.num_hidden_layers - 1}"
        )
    return replace(teacher, num_hidden_layers=len(layers), sparse_layers=[])


def init_from_teacher(draft: Model, teacher: Model, layers: list[int]) -> dict[str, list]:
    """Copy the embedding and final norm, and teacher layer `layers[j]` into draft layer j.
    Returns what was copied (for the run's log)."""
    copied: dict[str, list] = {"shared": [], "layers": []}
    if draft.args.hidden_size == teacher.args.hidden_size:
        for name in ("embed_tokens", "norm"):
            src = dict(tree_flatten(getattr(teacher.model, name).parameters()))
            getattr(draft.model, name).load_weights(list(src.items()), strict=True)
            copied["shared"].append(name)
    for j, i in enumerate(layers):
        src = dict(tree_flatten(teacher.model.layers[i].parameters()))
        draft.model.layers[j].load_weights(list(src.items()), strict=True)
        copied["layers"].append([i, j])
    mx.eval(draft.parameters())
    return copied
