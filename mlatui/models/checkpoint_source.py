"""An original checkpoint to take tensors from: a local folder or a hub id, one file at a time.

A hub id goes through huggingface_hub's `hf_hub_download`, one call per file, so only the files
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

import hashlib
import json
import struct
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import mlx.core as mx
import numpy as np


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
