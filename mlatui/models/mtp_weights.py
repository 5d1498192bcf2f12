"""Where an MTP layer's tensors are: a sidecar beside an mlx folder, the checkpoint's own shards, or
an mlx-vlm split drafter folder; and what a folder says about a missing one.

Names come back layer-local (`enorm.weight`, `self_attn.kv_b_proj.weight`, `mlp.experts.0...`):
mlx-lm's `sanitize` of the target then applies its own transforms to them.
"""

from __future__ import annotations

import glob
import json
import re
from pathlib import Path
from typing import Any

import mlx.core as mx

from mlatui.models.mx_typed import load_safetensors

SIDECARS = ("mtp.safetensors", "mtp/weights.safetensors", "model-mtp.safetensors")
PROVENANCE = "mtp.provenance.json"
EXTRACT_HINT = "mlatui mtp extract {source} --into {folder}"

# mlx-vlm's split drafters (mlx_vlm.speculative.drafters.<family>_mtp): flat names -> layer-local
VLM_DRAFTERS = {"glm4_moe_lite_mtp": "glm4_moe_lite"}
_VLM_TOP = {
    "model.enorm.weight": "enorm.weight",
    "model.hnorm.weight": "hnorm.weight",
    "model.eh_proj.weight": "eh_proj.weight",
    "model.shared_head_norm.weight": "shared_head.norm.weight",
    "lm_head.weight": "shared_head.head.weight",
}


def layer_local(weights: dict[str, mx.array], layer: int) -> dict[str, mx.array]:
    prefix = f"model.layers.{layer}."
    return {k[len(prefix) :]: v for k, v in weights.items() if k.startswith(prefix)}


def from_vlm_drafter(weights: dict[str, mx.array]) -> dict[str, mx.array]:
    """mlx-vlm's flat drafter names back to the checkpoint's layer-local ones (its own
    embed_tokens, a copy of the target's, is dropped like the checkpoint's)."""
    out = {}
    for k, v in weights.items():
        for suffix in (".weight", ".scales", ".biases"):
            base = k.removesuffix(suffix)
            if base + ".weight" in _VLM_TOP:
                out[_VLM_TOP[base + ".weight"].removesuffix(".weight") + suffix] = v
                break
        else:
            if k.startswith("model.mtp_block."):
                out[k.removeprefix("model.mtp_block.")] = v
    return out


def vlm_drafter_family(folder: Path) -> str | None:
    """The mlx-lm family of an mlx-vlm split drafter folder, None for any other folder."""
    try:
        config = json.loads((folder / "config.json").read_text())
    except (OSError, ValueError):
        return None
    return VLM_DRAFTERS.get(str(config.get("model_type", "")))


def read_mtp_weights(model_path: str | Path, layer: int) -> tuple[dict[str, mx.array], str]:
    """Layer-local MTP tensors of checkpoint layer `layer`, from a sidecar, the shards named in the
    index, or the model*.safetensors files. Returns (weights, where they came from); empty weights
    when the checkpoint has none."""
    folder = Path(model_path)
    for name in SIDECARS:
        path = folder / name
        if path.exists():
            w = load_safetensors(str(path))
            local = layer_local(w, layer) or (w if "enorm.weight" in w else {})
            return local, str(path)
    index = folder / "model.safetensors.index.json"
    if index.exists():
        weight_map = json.loads(index.read_text())["weight_map"]
        prefix = f"model.layers.{layer}."
        files = sorted({f for k, f in weight_map.items() if k.startswith(prefix)})
    else:
        files = sorted(Path(f).name for f in glob.glob(str(folder / "model*.safetensors")))
    weights: dict[str, mx.array] = {}
    for f in files:
        weights.update(layer_local(load_safetensors(str(folder / f)), layer))
    return weights, str(index if index.exists() else folder)


_HUB_ID = re.compile(r"\b([A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*)\b")


def named_source(folder: Path) -> str | None:
    """The original checkpoint an mlx folder says it was converted from: the provenance of an
    earlier extract, config.json's `_name_or_path`, or the README's `converted ... from [id]` /
    `base_model:` line (what mlx-lm's model card writes)."""
    from mlatui.models.checkpoint_source import local_folder

    folder = local_folder(folder)
    prov = folder / PROVENANCE
    if prov.exists():
        try:
            return str(json.loads(prov.read_text())["source"])
        except (OSError, ValueError, KeyError):
            pass
    try:
        config: dict[str, Any] = json.loads((folder / "config.json").read_text())
    except (OSError, ValueError):
        config = {}
    name = config.get("_name_or_path")
    if isinstance(name, str) and _HUB_ID.fullmatch(name) and not Path(name).exists():
        return name
    readme = folder / "README.md"
    if readme.exists():
        text = readme.read_text(errors="replace")
        for pattern in (
            r"^base_model:\s*\n?\s*-?\s*(\S+/\S+)\s*$",
            r"converted to MLX format from \[?([\w.-]+/[\w.-]+)\]?",
        ):
            m = re.search(pattern, text, flags=re.MULTILINE)
            if m:
                return m.group(1).strip("'\"")
    return None


def missing_head_line(folder: str | Path) -> str:
    """What the screen, the verdict strip and the log say when the config announces an MTP layer
    the folder does not have."""
    source = named_source(Path(folder)) or "<original checkpoint>"
    cmd = EXTRACT_HINT.format(source=source, folder=folder)
    return f"MTP head missing (dropped by the converter) — `{cmd}`"
