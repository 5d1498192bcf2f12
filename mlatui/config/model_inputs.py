"""A model's inputs, checked before anything loads (no mlx here).

- Where mlx-vlm is: named as a source tree (`MLATUI_MLX_VLM_SOURCE`: the `mlx_vlm` package folder
  or a folder holding it) or installed (`pip install 'mlatui[vlm]'`); mlatui.models.vlm loads it.
- `--model` / `--draft-model`: a local folder must look like an mlx-lm checkpoint (config.json
  with a model type mlx-lm knows, safetensors weights whose headers parse), so `launch` refuses it
  in one line before the screen opens instead of showing the load error on a dashboard that then
  waits for `q`. A hub id (org/name) is left to mlx_lm.load.
- A scenario's `[model.config]` (and `[draft.config]`) values against the types the family's
  config dataclass declares: mlx-lm's `ModelArgs`, mlx-vlm's `ModelConfig` and `TextConfig`, or
  mlatui's own model type. A string or a float where an integer belongs is one line naming the
  key, the value and the type, before anything is built (MLX itself says only "incompatible
  function arguments" from deep inside the build). The declarations are read from the runtime's
  source files (their syntax tree, nothing imported) and become a msgspec Struct that validates
  the table. A type that is not a plain one (a Literal, a class) is not checked, nor is a key the
  dataclass does not declare (its `from_dict` ignores those), nor a null (a config.json's; the
  dataclass's default).
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import json
import operator
import os
import struct
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import msgspec

from mlatui.config.checks import validation_error
from mlatui.errors import UserError

# ---- where mlx-vlm is ---------------------------------------------------------------------------

SOURCE_ENV = "MLATUI_MLX_VLM_SOURCE"
INSTALL_HINT = "pip install 'mlatui[vlm]'"
PREFIX = "mlx-vlm:"  # a family spelled "mlx-vlm:glm4_moe_lite" builds through mlx-vlm


def package_folder(path: Path) -> Path | None:
    """The `mlx_vlm` folder itself, given it or a folder holding it (None: neither)."""
    for folder in (path, path / "mlx_vlm"):
        if (folder / "models" / "base.py").is_file():
            return folder
    return None


def _package(name: str) -> Path | None:
    """An installed package's folder (its __init__ is not run)."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def installed_folder() -> Path | None:
    """The installed mlx_vlm package's folder (its __init__ is not run)."""
    return _package("mlx_vlm")


def vlm_has_model_type(model_type: str) -> bool:
    """Whether the mlx-vlm mlatui would use (the named tree, else the installed one) has a
    language model of `model_type`."""
    named = os.environ.get(SOURCE_ENV)
    root = package_folder(Path(named).expanduser()) if named else installed_folder()
    return root is not None and (root / "models" / model_type / "language.py").is_file()


def split_name(name: str) -> tuple[bool, str]:
    """("mlx-vlm:glm4_moe_lite") -> (True, "glm4_moe_lite"); a bare name -> (False, name)."""
    if name.startswith(PREFIX):
        return True, name[len(PREFIX) :]
    return False, name


# ---- --model / --draft-model ------------------------------------------------------------------

OWN_TYPES = {"mlatui_mla": Path(__file__).resolve().parents[1] / "models" / "mlatui_mla.py"}
MAX_CONFIG_BYTES = 16 << 20  # real configs are a few KB (quantisation tables: a few MB)
MAX_SAFETENSORS_HEADER = 100 << 20
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
    from mlx_lm.utils import MODEL_REMAPPING

    if model_type in OWN_TYPES:
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


# ---- [model.config]'s types --------------------------------------------------------------------

TYPE_HINT = 'give the value its declared type (TOML: 8 is an integer, 8.0 a float, "8" a string)'
ARRAY, TABLE = ("list", "List", "tuple", "Tuple", "Sequence"), ("dict", "Dict", "Mapping")
PLAIN = {"int": int, "float": float, "bool": bool, "str": str}
PLAIN |= {n: list for n in ARRAY} | {n: dict for n in TABLE}


def _plain(node: ast.expr) -> Any:
    """The type a TOML value must have for an annotation (Any: a part of it is not plain)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):  # a quoted annotation
        try:
            return _plain(ast.parse(node.value, mode="eval").body)
        except SyntaxError:
            return Any
    if isinstance(node, ast.Constant) and node.value is None:
        return None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        parts = [node.left, node.right]
    elif isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
        inner = node.slice
        if node.value.id not in ("Optional", "Union"):
            return PLAIN.get(node.value.id, Any)
        parts = list(inner.elts) if isinstance(inner, ast.Tuple) else [inner]
    else:
        return PLAIN.get(node.id, Any) if isinstance(node, ast.Name) else Any
    types = {_plain(p) for p in parts} - {None}
    return Any if Any in types or not types else functools.reduce(operator.or_, types)


@functools.lru_cache(maxsize=64)
def _classes(path: Path) -> dict[str, ast.ClassDef]:
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return {}
    return {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}


def fields_of(path: Path, name: str) -> dict[str, ast.expr]:
    """The annotations of class `name` in `path`, with those of its bases defined there."""
    classes = _classes(path)
    out: dict[str, ast.expr] = {}
    seen: set[str] = set()

    def collect(cls: ast.ClassDef) -> None:
        if cls.name in seen:
            return
        seen.add(cls.name)
        for base in cls.bases:
            if isinstance(base, ast.Name) and base.id in classes:
                collect(classes[base.id])
        for stmt in cls.body:
            if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                out[stmt.target.id] = stmt.annotation

    if name in classes:
        collect(classes[name])
    return out


def _schema(where: str, fields: Mapping[str, ast.expr], **more: Any) -> type[msgspec.Struct]:
    """A Struct of the plain fields, each also null; its description names the declaration."""

    def typed(name: str, node: ast.expr) -> Any:
        said = msgspec.Meta(description=f"{where} declares {ast.unparse(node)}; {TYPE_HINT}")
        return Annotated[more.get(name, _plain(node)) | None, said]

    declared = [(n, typed(n, node), None) for n, node in fields.items() if n not in more]
    return msgspec.defstruct("Config", [*declared, *((n, t | None, None) for n, t in more.items())])


def _mlx_lm_remapping(root: Path) -> dict[str, str]:
    for node in ast.parse((root / "utils.py").read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "MODEL_REMAPPING" for t in node.targets
        ):
            try:
                value = ast.literal_eval(node.value)
            except ValueError:
                return {}
            return value if isinstance(value, dict) else {}
    return {}


def _vlm_root(named: str | None) -> Path | None:
    return package_folder(Path(named).expanduser()) if named else installed_folder()


def config_schema(model_type: str) -> type[msgspec.Struct] | None:
    """The declared types of `model_type`'s config as a Struct (None: no runtime here declares
    it); mlx-vlm's nest the text model's in `text_config`."""
    return _config_schema(model_type, os.environ.get(SOURCE_ENV))


@functools.lru_cache(maxsize=64)
def _config_schema(model_type: str, vlm_source: str | None) -> type[msgspec.Struct] | None:
    bare = model_type.removeprefix(PREFIX)
    if model_type in OWN_TYPES:
        own = f"mlatui {model_type}.ModelArgs"
        return _schema(own, fields_of(OWN_TYPES[model_type], "ModelArgs"))
    lm = _package("mlx_lm") if not model_type.startswith(PREFIX) else None
    if lm is not None:
        try:
            name = _mlx_lm_remapping(lm).get(bare, bare)
        except (OSError, SyntaxError, UnicodeDecodeError):
            name = bare
        module = lm / "models" / f"{name}.py"
        if module.is_file():
            return _schema(f"mlx-lm {name}.ModelArgs", fields_of(module, "ModelArgs"))
    vlm = _vlm_root(vlm_source)
    declared_in = vlm / "models" / bare / "config.py" if vlm is not None else None
    if declared_in is None or not declared_in.is_file():
        return None
    where = f"mlx-vlm {bare} config"
    text = _schema(where, fields_of(declared_in, "TextConfig"))
    return _schema(where, fields_of(declared_in, "ModelConfig"), text_config=text)


def check_config_types(
    where: object, key: str, model_type: str | None, config: Mapping[str, Any]
) -> None:
    """A ScenarioError naming the first key whose value is not of its declared type, e.g.
    `FILE: model.config.num_hidden_layers: expected an integer, got "8" — mlx-lm
    deepseek_v3.ModelArgs declares int; give the value its declared type (...)`."""
    schema = config_schema(str(model_type)) if model_type and config else None
    if schema is None:
        return  # nothing to check, or an unknown type: the loader names it
    try:
        msgspec.convert(config, schema)
    except msgspec.ValidationError as e:
        raise validation_error(where, schema, config, e, prefix=key) from None
