"""The embedded default model: a small trained MLA model and its draft, shipped as package data.

Both are plain mlx-lm folders (config.json, float16 safetensors, tokenizer files) loaded by the
same `mlx_lm.load` that loads real checkpoints, after `mlatui.models.register()` has made the
`mlatui_mla` model type known to it. Rebuild them from a source checkout with tools/train/
(docs/embedded-model.md).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

EMBEDDED_DIR = Path(__file__).parent / "embedded"
MODEL_PATH = EMBEDDED_DIR / "model"
DRAFT_PATH = EMBEDDED_DIR / "draft"
PROMPTS_PATH = EMBEDDED_DIR / "prompts.json"
MANIFEST_PATH = EMBEDDED_DIR / "MANIFEST.json"
SHIPPED_SUFFIXES = (".json", ".safetensors")


def shipped_files() -> list[Path]:
    """Every file of the two model folders, sorted (what MANIFEST.json covers)."""
    return sorted(
        p for d in (MODEL_PATH, DRAFT_PATH) for p in d.iterdir() if p.suffix in SHIPPED_SUFFIXES
    )


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def manifest() -> dict[str, Any]:
    """What the committed MANIFEST.json should say about the files on disk."""
    return {
        "files": {
            p.relative_to(EMBEDDED_DIR).as_posix(): {"sha256": sha256(p), "bytes": p.stat().st_size}
            for p in shipped_files()
        }
    }


def verify_manifest() -> list[str]:
    """Paths whose checksum differs from MANIFEST.json, or that are missing/extra; [] if all match."""
    want = json.loads(MANIFEST_PATH.read_text())["files"]
    have = manifest()["files"]
    return sorted(
        name
        for name in set(want) | set(have)
        if want.get(name, {}).get("sha256") != have.get(name, {}).get("sha256")
    )


def prompts() -> list[str]:
    return json.loads(PROMPTS_PATH.read_text())["prompts"]


def load_embedded(draft: bool = True) -> tuple[Any, Any, Any]:
    """(model, tokenizer, draft_model) through `mlx_lm.load`; draft_model is None if not asked for."""
    from mlatui.models import register

    register()
    import mlx_lm

    if not (MODEL_PATH / "config.json").exists():
        raise FileNotFoundError(
            f"the embedded model is missing from {MODEL_PATH}: reinstall mlatui "
            "(package data) or rebuild it from a source checkout (docs/embedded-model.md)"
        )
    model, tokenizer = _quiet_load(mlx_lm, MODEL_PATH)
    draft_model = _quiet_load(mlx_lm, DRAFT_PATH)[0] if draft else None
    return model, tokenizer, draft_model


def _quiet_load(mlx_lm: Any, path: Path) -> tuple[Any, Any]:
    # transformers warns that it does not know the model type `mlatui_mla` while it reads
    # config.json for the tokenizer; the tokenizer itself is a plain PreTrainedTokenizerFast.
    with transformers_quiet():
        return mlx_lm.load(str(path))


@contextlib.contextmanager
def transformers_quiet() -> Iterator[None]:
    """transformers' warnings silenced, its verbosity put back after."""
    from transformers.utils import logging as hf_logging

    level = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        yield
    finally:
        hf_logging.set_verbosity(level)


# the MTP head's sampled acceptance (T = 0.8, position 1) a context must keep for the tune to run there
ACCEPTANCE_FLOOR = 0.7


def trained_window() -> int | None:
    """The longest context the shipped model's drafts are known good at: the widest position
    bucket up to which the long-context measure (MANIFEST `long_context`, tools.train.longctx on
    held-out text) kept the MTP head's sampled acceptance at ACCEPTANCE_FLOOR or above; without
    that measure, the token window it was trained on."""
    try:
        shipped = json.loads((EMBEDDED_DIR / "MANIFEST.json").read_text())
    except (OSError, ValueError):
        return None
    buckets = (
        (shipped.get("long_context") or {}).get("measured", {}).get("longctx-extended", {})
    ).get("buckets", [])
    good = 0
    for bucket in buckets:
        if (bucket.get("mtp_rejection") or 0.0) < ACCEPTANCE_FLOOR:
            break
        good = int(str(bucket["context"]).split("-")[-1])
    if good:
        return good
    try:
        return int(shipped["training"]["args"]["seq"])
    except (KeyError, TypeError, ValueError):
        return None
