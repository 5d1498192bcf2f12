"""`--model` / `--draft-model` checked before anything loads: a local folder must look like an
mlx-lm checkpoint (config.json with a model type mlx-lm knows, safetensors weights whose headers
parse), so `launch` refuses it in one line before the screen opens instead of showing the load
error on a dashboard that then waits for `q`. A hub id (org/name) is left to mlx_lm.load."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

from mlatui.config.vlm_paths import INSTALL_HINT, vlm_has_model_type
from mlatui.errors import UserError

MAX_CONFIG_BYTES = 16 << 20  # real configs are a few KB (quantisation tables: a few MB)
MAX_SAFETENSORS_HEADER = 100 << 20
OWN_MODEL_TYPES = ("mlatui_mla",)  # registered with mlx-lm by mlatui.models.register()
HINT = "give a local mlx-lm model folder (config.json + *.safetensors) or a hub id like org/name"


def is_positive_int(value: object) -> bool:
    """An int above 0 in parsed JSON/TOML (a bool is not one)."""
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def text_config(config: dict[str, Any]) -> dict[str, Any]:
    """The dict that holds the text model's geometry (kimi and VLM wrappers nest it)."""
    nested = config.get("text_config")
    return nested if isinstance(nested, dict) else config


def _config(folder: Path, flag: str) -> dict[str, Any]:
    path = folder / "config.json"
    if not path.is_file():
        raise UserError(f"{flag} {folder}: {path.name} is not a file", HINT)
    try:
        if path.stat().st_size > MAX_CONFIG_BYTES:
            raise UserError(f"{flag} {folder}: config.json is too large to be a model config", HINT)
        text = path.read_bytes().decode("utf-8")
        config = json.loads(text)
    except OSError as e:
        raise UserError(f"{flag} {folder}: cannot read config.json ({e.strerror})", HINT) from None
    except UnicodeDecodeError:
        raise UserError(f"{flag} {folder}: config.json is not UTF-8 text", HINT) from None
    except RecursionError:
        raise UserError(f"{flag} {folder}: config.json is nested too deeply", HINT) from None
    except ValueError as e:
        raise UserError(f"{flag} {folder}: config.json is not JSON ({e})", HINT) from None
    if not isinstance(config, dict):
        raise UserError(
            f"{flag} {folder}: config.json holds a {type(config).__name__}, not an object", HINT
        )
    return config


def _known_model_type(model_type: str) -> bool:
    import importlib.util

    from mlx_lm.utils import MODEL_REMAPPING

    if model_type in OWN_MODEL_TYPES:
        return True
    name = MODEL_REMAPPING.get(model_type, model_type)
    try:
        return importlib.util.find_spec(f"mlx_lm.models.{name}") is not None
    except (ImportError, ValueError):
        return False


def _check_safetensors(path: Path, flag: str, folder: Path) -> None:
    """The header of a safetensors file: 8 bytes of length, then a JSON object."""
    try:
        with open(path, "rb") as f:
            raw = f.read(8)
            size = struct.unpack("<Q", raw)[0] if len(raw) == 8 else -1
            if not 0 < size <= MAX_SAFETENSORS_HEADER:
                raise ValueError("no safetensors header")
            header = json.loads(f.read(size))
            if not isinstance(header, dict):
                raise ValueError("header is not an object")
    except OSError as e:
        raise UserError(f"{flag} {folder}: cannot read {path.name} ({e.strerror})", HINT) from None
    except (ValueError, RecursionError) as e:
        raise UserError(
            f"{flag} {folder}: {path.name} is not a safetensors file ({e})",
            "re-download or re-convert the checkpoint",
        ) from None


def check_model_ref(ref: str | None, flag: str = "--model") -> None:
    """UserError (one line) unless `ref` is None, a hub id, or a usable local model folder."""
    if ref is None:
        return
    folder = Path(ref).expanduser()
    if not folder.exists():
        if ref.startswith((".", "/", "~")) or ref.count("/") != 1:
            raise UserError(f"{flag} {ref}: no such folder", HINT)
        return  # a hub id: mlx_lm.load fetches it (or says it cannot)
    if not folder.is_dir():
        raise UserError(f"{flag} {ref}: not a folder", HINT)
    if not (folder / "config.json").exists():
        raise UserError(f"{flag} {ref}: folder has no config.json (not an mlx-lm folder)", HINT)
    config = _config(folder, flag)
    model_type = config.get("model_type") or text_config(config).get("model_type")
    if not isinstance(model_type, str) or not model_type:
        raise UserError(f"{flag} {ref}: config.json has no model_type", HINT)
    if not _known_model_type(model_type) and not vlm_has_model_type(model_type):
        raise UserError(
            f"{flag} {ref}: model_type {model_type!r} is not a model type the installed mlx-lm "
            "knows",
            f"upgrade mlx-lm, add mlx-vlm for its model types ({INSTALL_HINT}), or pick a supported model",
        )
    weights = sorted(folder.glob("*.safetensors"))
    if not weights:
        raise UserError(f"{flag} {ref}: no *.safetensors weights in the folder", HINT)
    for path in weights:
        _check_safetensors(path, flag, folder)
