"""Where an MTP layer's tensors are: a sidecar beside an mlx folder, the checkpoint's own shards, or
an mlx-vlm split drafter folder; and what a folder says about a missing one.

Names come back layer-local (`enorm.weight`, `self_attn.kv_b_proj.weight`, `mlp.experts.0...`):
mlx-lm's `sanitize` of the target then applies its own transforms to them.

The head is then quantized the way its target's folder is (`quantize_like` repeats the predicate
`mlx_lm convert -q` applies, mlx_lm.utils.quantize_model: a module is quantized when it has
`to_quantized`, its input width is a multiple of the group size, and the model's own
`quant_predicate`, if any, agrees; per-module entries of the folder's `quantization` table win,
as they do when mlx-lm loads the folder), and saved weights say how they are (`infer_quant` is
mlx-lm's `infer_quant_config`, with a copy for releases that predate it, 0.31.x).

The original checkpoint (`CheckpointSource`) is a local folder or a hub id, read one file at a
time. A hub id goes through huggingface_hub's `hf_hub_download`, one call per file, so only the files
asked for are fetched (resumable, with its progress bar) into the usual hub cache; a local folder
is read in place. Either way the files read are listed, so `mtp extract` can say (and a test can
check) that it touched the index and the shards holding one layer, nothing else.

A safetensors file is read without the rest of it: an 8-byte little-endian header length, a
JSON header naming each tensor's dtype, shape and byte range, then the bytes; seeking to the
ranges wanted lets `mtp extract` take the few hundred MB of one MTP layer out of a multi-GB
shard. Pickle-based formats (`*.bin`, `*.pt`, `*.pth`, `*.ckpt`) can run code when loaded and are
never opened.
"""

from __future__ import annotations

import glob
import hashlib
import json
import re
import struct
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import mlx.core as mx
import mlx.nn as nn
import numpy as np

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


MODES = ("affine", "mxfp4", "nvfp4", "mxfp8")


@dataclass(frozen=True)
class Quant:
    """One quantization: what `to_quantized` / `mx.quantize` take."""

    bits: int
    group_size: int
    mode: str = "affine"

    @property
    def label(self) -> str:
        mode = "" if self.mode == "affine" else f" {self.mode}"
        return f"{self.bits}-bit{mode} g{self.group_size}"

    def params(self) -> dict[str, Any]:
        return {"bits": self.bits, "group_size": self.group_size, "mode": self.mode}


def folder_quant(config: dict[str, Any]) -> tuple[Quant | None, dict[str, Any]]:
    """(the default quantization, per-module overrides) of an mlx folder's config.json; None
    when the folder is not quantized."""
    q = config.get("quantization") or config.get("quantization_config")
    if not isinstance(q, dict) or "bits" not in q:
        return None, {}
    overrides = {k: v for k, v in q.items() if isinstance(v, dict | bool)}
    mode = str(q.get("mode", "affine"))
    return Quant(int(q["bits"]), int(q["group_size"]), mode), overrides


def infer_quant(path: str, module: nn.Module, weights: dict[str, mx.array]) -> dict[str, Any]:
    """group_size, bits and mode a saved weight was packed with (mlx-lm's own rule)."""
    try:
        from mlx_lm.utils import infer_quant_config
    except ImportError:  # mlx-lm < 0.32: the same rule, here
        return _infer(path, module, weights)
    return dict(infer_quant_config(path, module, weights))


def _infer(path: str, module: nn.Module, weights: dict[str, mx.array]) -> dict[str, Any]:
    scales = weights[f"{path}.scales"]
    in_dims = module.weight.shape[-1]
    group_size = in_dims // scales.shape[-1]
    bits = (weights[f"{path}.weight"].shape[-1] * 32) // in_dims
    if scales.dtype != mx.uint8:  # only affine keeps its scales in the weight dtype
        return {"group_size": group_size, "bits": bits, "mode": "affine"}
    modes = {(4, 16): "nvfp4", (4, 32): "mxfp4", (8, 32): "mxfp8"}
    if (bits, group_size) in modes:
        return {"group_size": group_size, "bits": bits, "mode": modes[(bits, group_size)]}
    raise ValueError(f"cannot infer the quantization of {path}: {bits} bits, group {group_size}")


def saved_quant(weights: dict[str, mx.array], module: nn.Module) -> dict[str, Quant]:
    """{module path: its quantization} for every module of `module` stored quantized in
    `weights` (names relative to `module`)."""
    out = {}
    for path, m in module.named_modules():
        if path and hasattr(m, "to_quantized") and f"{path}.scales" in weights:
            p = infer_quant(path, m, weights)
            out[path] = Quant(int(p["bits"]), int(p["group_size"]), str(p.get("mode", "affine")))
    return out


def dequantize_weights(weights: dict[str, mx.array], quant: dict[str, Quant], dtype: Any) -> dict:
    """The same weights with every quantized module's weight unpacked to `dtype`."""
    out = dict(weights)
    for path, q in quant.items():
        scales = out.pop(f"{path}.scales")
        biases = out.pop(f"{path}.biases", None)
        w = mx.dequantize(
            out[f"{path}.weight"], scales, biases, group_size=q.group_size, bits=q.bits, mode=q.mode
        )
        out[f"{path}.weight"] = w.astype(dtype)
    return out


def quantize_like(
    module: nn.Module,
    config: dict[str, Any],
    prefix: str,
    predicate: Any = None,
    sibling: str | None = None,
) -> Quant | None:
    """Quantize `module` (in place) as the folder of `config` is. `prefix` is the module's path in
    the full model ("model.layers.47."), for the per-module table and `predicate` (the model's
    `quant_predicate`); `sibling` another layer's prefix whose table entries apply when the
    module's own are absent (a mixed-precision recipe written before this layer existed)."""
    default, table = folder_quant(config)
    if default is None:
        return None

    def choose(path: str, m: nn.Module) -> bool | dict[str, Any]:
        if not hasattr(m, "to_quantized"):
            return False
        full = prefix + path
        for key in (full, (sibling + path) if sibling else None):
            if key is not None and key in table:
                entry = table[key]
                return dict(entry) if isinstance(entry, dict) else bool(entry)
        if m.weight.shape[-1] % default.group_size != 0:
            return False
        if predicate is not None:
            said = predicate(full, m)
            if isinstance(said, dict) or not said:
                return said
        return default.params()

    nn.quantize(
        module,
        group_size=default.group_size,
        bits=default.bits,
        mode=default.mode,
        class_predicate=choose,
    )
    return default


# ---- the original checkpoint, one file and one tensor at a time ----------------------------------


class SourceError(ValueError):
    """One line: the source cannot give what is asked of it, and what to do."""


def is_hub_id(ref: str) -> bool:
    return (
        not Path(ref).expanduser().exists()
        and ref.count("/") == 1
        and not ref.startswith((".", "/", "~"))
    )


def local_folder(ref: str | Path) -> Path:
    """Where a model folder is on disk: the path itself, or a hub id's snapshot in the local hub
    cache (where `mlx_lm.load` put it); the path as given when neither exists."""
    path = Path(ref).expanduser()
    if path.exists() or not is_hub_id(str(ref)):
        return path
    try:
        import huggingface_hub as hf

        return Path(hf.snapshot_download(str(ref), local_files_only=True))
    except Exception:  # noqa: BLE001 - not cached: the caller says what is missing
        return path


@dataclass
class CheckpointSource:
    """`ref` as given; `fetched` the local paths handed out so far, in order."""

    ref: str
    revision: str | None = None
    fetched: list[Path] = field(default_factory=list[Path])
    _listing: list[str] | None = None

    @property
    def hub(self) -> bool:
        return is_hub_id(self.ref)

    def listing(self) -> list[str]:
        """File names at the top of the checkpoint (a hub listing is one API call)."""
        if self._listing is None:
            if self.hub:
                import huggingface_hub as hf

                try:
                    self._listing = list(hf.list_repo_files(self.ref, revision=self.revision))
                except Exception as e:  # noqa: BLE001 - network, auth, not found: one line
                    raise SourceError(
                        f"{self.ref}: cannot list the hub repository ({_first_line(e)}) — "
                        "check the id, or download it and give the folder"
                    ) from e
            else:
                folder = Path(self.ref).expanduser()
                if not folder.is_dir():
                    raise SourceError(
                        f"{self.ref}: no such folder (give an original checkpoint folder or a hub id like org/name)"
                    )
                self._listing = sorted(p.name for p in folder.iterdir() if p.is_file())
        return self._listing

    def file(self, name: str) -> Path:
        """A local path to `name` (downloaded first for a hub id)."""
        if self.hub:
            import huggingface_hub as hf

            try:
                path = Path(hf.hf_hub_download(self.ref, name, revision=self.revision))
            except Exception as e:  # noqa: BLE001
                raise SourceError(f"{self.ref}: cannot download {name} ({_first_line(e)})") from e
            if self.revision is None or len(self.revision) != 40:
                self.revision = _snapshot_commit(path) or self.revision
        else:
            path = Path(self.ref).expanduser() / name
        self.fetched.append(path)
        return path

    def config(self) -> dict[str, Any]:
        if "config.json" not in self.listing():
            raise SourceError(f"{self.ref}: no config.json (not a model checkpoint)")
        return json.loads(self.file("config.json").read_text())

    def shards_for(self, prefix: str) -> list[str]:
        """The safetensors files holding tensors named `prefix*`: from the index when there is
        one, else the single model.safetensors. Pickle-only checkpoints are refused unread."""
        names = self.listing()
        pickled = pickle_only(names)
        if pickled:
            raise SourceError(
                f"{self.ref}: only pickle-based weights ({', '.join(pickled[:3])}) — these can run "
                "code when loaded and are never opened; use a safetensors copy of the checkpoint"
            )
        if INDEX in names:
            weight_map = json.loads(self.file(INDEX).read_text()).get("weight_map", {})
            return sorted({f for k, f in weight_map.items() if k.startswith(prefix)})
        if SINGLE in names:
            return [SINGLE]
        tensors = sorted(n for n in names if n.endswith(".safetensors"))
        if not tensors:
            raise SourceError(f"{self.ref}: no safetensors weights")
        if len(tensors) > 1:
            raise SourceError(
                f"{self.ref}: {len(tensors)} safetensors files and no {INDEX} to say which holds what"
            )
        return tensors


def _snapshot_commit(path: Path) -> str | None:
    """The commit of a file in the hub cache (.../snapshots/<commit>/<name>)."""
    parts = path.parts
    if "snapshots" in parts:
        i = len(parts) - 1 - parts[::-1].index("snapshots")
        if i + 1 < len(parts):
            return parts[i + 1]
    return None


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl")
INDEX = "model.safetensors.index.json"
SINGLE = "model.safetensors"

# safetensors dtype -> (numpy dtype of the raw bytes, mlx dtype they are viewed as)
_DTYPES: dict[str, tuple[Any, Any]] = {
    "F64": (np.float64, mx.float32),  # mlx has no float64 on every device: narrowed below
    "F32": (np.float32, mx.float32),
    "F16": (np.float16, mx.float16),
    "BF16": (np.uint16, mx.bfloat16),
    "I64": (np.int64, mx.int64),
    "I32": (np.int32, mx.int32),
    "I16": (np.int16, mx.int16),
    "I8": (np.int8, mx.int8),
    "U64": (np.uint64, mx.uint64),
    "U32": (np.uint32, mx.uint32),
    "U16": (np.uint16, mx.uint16),
    "U8": (np.uint8, mx.uint8),
    "BOOL": (np.bool_, mx.bool_),
    "F8_E4M3": (np.uint8, mx.uint8),  # raw fp8 bytes: mlx-lm's sanitize calls mx.from_fp8
}


class SafetensorsError(ValueError):
    """One line naming the file and what is wrong with it."""


def read_header(path: str | Path) -> dict[str, dict[str, Any]]:
    """{tensor name: {"dtype", "shape", "data_offsets"}} (the `__metadata__` entry left out)."""
    path = Path(path)
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) != 8:
            raise SafetensorsError(f"{path}: not a safetensors file (shorter than its header)")
        (n,) = struct.unpack("<Q", head)
        try:
            header = json.loads(f.read(n))
        except ValueError as e:
            raise SafetensorsError(f"{path}: not a safetensors file ({e})") from e
    header.pop("__metadata__", None)
    return header


def read_tensors(
    path: str | Path, names: Iterable[str], digests: dict[str, str] | None = None
) -> dict[str, mx.array]:
    """The named tensors of one file, reading only their bytes (one open of the file).
    `digests` gets the sha256 of each tensor's stored bytes."""
    path = Path(path)
    wanted = list(names)
    out: dict[str, mx.array] = {}
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
        base = 8 + n
        for name in wanted:
            info = header.get(name)
            if info is None:
                raise SafetensorsError(f"{path}: no tensor {name!r}")
            dtype = info["dtype"]
            if dtype not in _DTYPES:
                raise SafetensorsError(f"{path}: tensor {name!r} has unsupported dtype {dtype}")
            start, end = info["data_offsets"]
            f.seek(base + start)
            raw = f.read(end - start)
            if digests is not None:
                digests[name] = hashlib.sha256(raw).hexdigest()
            np_dtype, mx_dtype = _DTYPES[dtype]
            a = np.frombuffer(raw, dtype=np_dtype).reshape(info["shape"])
            arr = mx.array(a)
            if dtype == "BF16":
                arr = arr.view(mx.bfloat16)
            elif dtype == "F64":
                arr = arr.astype(mx.float32)
            out[name] = arr.astype(mx_dtype) if arr.dtype != mx_dtype else arr
    return out


def pickle_only(files: Iterable[str]) -> list[str]:
    """The pickle-based weight files of a listing that has no safetensors (else [])."""
    names = [Path(f).name for f in files]
    if any(n.endswith(".safetensors") for n in names):
        return []
    return sorted(n for n in names if n.endswith(PICKLE_SUFFIXES))
