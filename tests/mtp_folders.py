"""Tiny original checkpoints with an MTP layer (Hugging Face layout: two shards and an index, the
MTP layer alone in the second) and their `mlx_lm convert -q` conversions, which drop that layer.

GLM-4.7-Flash-shaped: 2 layers, MTP layer model.layers.2.*, converted to 4 bits.
DeepSeek-V3-shaped: 61 layers, MTP layer model.layers.61.* (mlx-lm's deepseek_v3 sanitize drops
that layer by number, so a DeepSeek-V3 needs its real depth to convert), converted to 8 bits.
Dimensions are multiples of 32 so the converter's group size 32 quantizes every projection.
"""

from __future__ import annotations

import contextlib
import io
import sys
from dataclasses import dataclass
from pathlib import Path

from tests.test_mtp import save_checkpoint

WIDE = dict(
    vocab_size=64,
    qk_nope_head_dim=32,
    v_head_dim=32,
    moe_intermediate_size=32,
    intermediate_size=64,
)
FAMILIES = {
    "glm": ("glm4_moe_lite", dict(WIDE, num_hidden_layers=2), 4),
    "dsv3": ("deepseek_v3", dict(WIDE, num_hidden_layers=61), 8),
}
GROUP = 32


@dataclass(frozen=True)
class Pair:
    family: str
    model_type: str
    original: Path  # HF layout, the MTP layer in model-00002-of-00002.safetensors
    converted: Path  # mlx_lm convert -q output (no MTP layer)
    layer: int
    bits: int


def build_pair(root: Path, name: str) -> Pair:
    from mlx_lm.convert import convert

    from tests.checkpoints import tiny_tokenizer

    model_type, overrides, bits = FAMILIES[name]
    original = root / f"{name}-hf"
    save_checkpoint(
        original, model_type, "index", shared_head=model_type == "deepseek_v3", overrides=overrides
    )
    tiny_tokenizer(original, int(overrides["vocab_size"]))
    converted = root / f"{name}-mlx{bits}"
    with contextlib.redirect_stdout(io.StringIO()):
        convert(str(original), str(converted), quantize=True, q_group_size=GROUP, q_bits=bits)
    return Pair(name, model_type, original, converted, int(overrides["num_hidden_layers"]), bits)


class OpenedFiles:
    """Counts the files Python opens under `root` while active (an audit hook: every `open`,
    whoever calls it)."""

    _active: list[OpenedFiles] = []
    _installed = False

    def __init__(self, root: Path):
        self.root = str(root)
        self.paths: list[str] = []

    def __enter__(self) -> OpenedFiles:
        if not OpenedFiles._installed:
            sys.addaudithook(OpenedFiles._hook)
            OpenedFiles._installed = True
        OpenedFiles._active.append(self)
        return self

    def __exit__(self, *exc) -> None:
        OpenedFiles._active.remove(self)

    @staticmethod
    def _hook(event: str, args: tuple) -> None:
        if event != "open" or not OpenedFiles._active or not isinstance(args[0], str | Path):
            return
        path = str(args[0])
        for watch in OpenedFiles._active:
            if path.startswith(watch.root):
                watch.paths.append(Path(path).name)


_BUILT: dict[str, Pair] = {}


def pair(tmp_path_factory, name: str) -> Pair:
    """Built once per test session (shared by every module that asks); tests copy what they
    change."""
    if name not in _BUILT:
        _BUILT[name] = build_pair(tmp_path_factory.mktemp(f"mtp-{name}"), name)
    return _BUILT[name]


def embedded_pair(root: Path, head_from: int | None = None) -> Pair:
    """The embedded model (trained, with its MTP layer model.layers.6.*) written out in the hub
    layout (its two shards and an index) and converted with `mlx_lm convert -q`. `head_from`: the
    original's MTP layer replaced, tensor by tensor, with trunk layer `head_from`'s where it has
    one (a head read from the wrong layer)."""
    import json
    import shutil

    import mlx.core as mx
    from mlx_lm.convert import convert

    from mlatui.models import embedded, register

    register()
    original = root / ("embedded-hf" if head_from is None else f"embedded-hf-from-{head_from}")
    shutil.copytree(embedded.MODEL_PATH, original)
    config = json.loads((original / "config.json").read_text())
    mtp = f"model.layers.{config['num_hidden_layers']}."
    weight_map = {}
    for shard in sorted(original.glob("*.safetensors")):
        tensors = mx.load(str(shard))
        if head_from is not None:
            every = {
                k: v for s in original.glob("*.safetensors") for k, v in mx.load(str(s)).items()
            }
            for name in [k for k in tensors if k.startswith(mtp)]:
                other = name.replace(mtp, f"model.layers.{head_from}.", 1)
                if other in every and every[other].shape == tensors[name].shape:
                    tensors[name] = every[other]
            mx.save_safetensors(str(shard), tensors, metadata={"format": "mlx"})
        weight_map.update({k: shard.name for k in tensors})
    (original / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {}, "weight_map": dict(sorted(weight_map.items()))})
    )
    converted = root / f"{original.name}-mlx4"
    with contextlib.redirect_stdout(io.StringIO()):
        convert(str(original), str(converted), quantize=True, q_group_size=GROUP, q_bits=4)
    return Pair("embedded", "mlatui_mla", original, converted, config["num_hidden_layers"], 4)
