"""A scenario's `[model.config]` (and `[draft.config]`) values against the types the family's
config dataclass declares: mlx-lm's `ModelArgs`, mlx-vlm's `ModelConfig` and `TextConfig`, or
mlatui's own model type. A string or a float where an integer belongs is one line naming the key,
the value and the type, before anything is built (MLX itself says only "incompatible function
arguments" from deep inside the build).

The declarations are read from the runtime's source files (their syntax tree, nothing imported:
no mlx here) and become a msgspec Struct that validates the table. A type that is not a plain one
(a Literal, a class) is not checked, nor is a key the dataclass does not declare (its
`from_dict` ignores those), nor a null (a config.json's; the dataclass's default)."""

from __future__ import annotations

import ast
import functools
import importlib.util
import operator
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import msgspec

from mlatui.config.checks import validation_error
from mlatui.config.vlm_paths import PREFIX, SOURCE_ENV, installed_folder, package_folder

OWN_TYPES = {"mlatui_mla": Path(__file__).resolve().parents[1] / "models" / "mlatui_mla.py"}
HINT = 'give the value its declared type (TOML: 8 is an integer, 8.0 a float, "8" a string)'
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
        said = msgspec.Meta(description=f"{where} declares {ast.unparse(node)}; {HINT}")
        return Annotated[more.get(name, _plain(node)) | None, said]

    declared = [(n, typed(n, node), None) for n, node in fields.items() if n not in more]
    return msgspec.defstruct("Config", [*declared, *((n, t | None, None) for n, t in more.items())])


def _package(name: str) -> Path | None:
    try:
        spec = importlib.util.find_spec(name)  # the package's __init__ is not run
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


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
