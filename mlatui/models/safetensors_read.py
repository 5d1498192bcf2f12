"""Read chosen tensors of a .safetensors file without reading the rest of it.

A safetensors file is an 8-byte little-endian header length, a JSON header naming each tensor's
dtype, shape and byte range, then the bytes. Reading the header and seeking to the ranges wanted
lets `mtp extract` take the few hundred MB of one MTP layer out of a multi-GB shard. Pickle-based
formats (`*.bin`, `*.pt`, `*.pth`, `*.ckpt`) can run code when loaded and are never opened.
"""

from __future__ import annotations

import hashlib
import json
import struct
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import mlx.core as mx
import numpy as np

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
