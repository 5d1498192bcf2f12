"""A scenario's `[model.config]` (and `[draft.config]`) values against the types the family's
config dataclass declares: mlx-lm's `ModelArgs`, mlx-vlm's `ModelConfig` and `TextConfig`, or
mlatui's own model type. A string or a float where an integer belongs is one line naming the key,
the value and the type, before anything is built (MLX itself says only "incompatible function
arguments" from deep inside the build).

The declarations are read from the runtime's source files (their syntax tree, nothing imported:
no mlx here). A type that is not a plain one (a Literal, a class) is not checked, nor is a key the
dataclass does not declare (its `from_dict` ignores those)."""

from __future__ import annotations

import ast
import functools
import importlib.util
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mlatui.config.vlm_paths import PREFIX, SOURCE_ENV, installed_folder, package_folder
from mlatui.errors import UserError

OWN_TYPES = {"mlatui_mla": Path(__file__).resolve().parents[1] / "models" / "mlatui_mla.py"}
HINT = 'give the value its declared type (TOML: 8 is an integer, 8.0 a float, "8" a string)'


@dataclass(frozen=True)
class Declared:
    """One field's declared type: its words and the check of a TOML value (None: any)."""

    words: str
    accepts: Callable[[Any], bool] | None


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_float(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


PLAIN: dict[str, tuple[str, Callable[[Any], bool]]] = {
    "int": ("an integer", _is_int),
    "float": ("a number", _is_float),
    "bool": ("true or false", lambda v: isinstance(v, bool)),
    "str": ("a string", lambda v: isinstance(v, str)),
    "list": ("an array", lambda v: isinstance(v, list)),
    "List": ("an array", lambda v: isinstance(v, list)),
    "tuple": ("an array", lambda v: isinstance(v, list)),
    "Tuple": ("an array", lambda v: isinstance(v, list)),
    "Sequence": ("an array", lambda v: isinstance(v, list)),
    "dict": ("a table", lambda v: isinstance(v, dict)),
    "Dict": ("a table", lambda v: isinstance(v, dict)),
    "Mapping": ("a table", lambda v: isinstance(v, dict)),
}
NONE = ("None", lambda v: v is None)


def _alternatives(node: ast.expr) -> list[tuple[str, Callable[[Any], bool]]] | None:
    """The plain types an annotation allows (None: one of them is not plain, so anything goes)."""
    if isinstance(node, ast.Constant):
        if node.value is None:
            return [NONE]
        if isinstance(node.value, str):  # a quoted annotation
            try:
                return _alternatives(ast.parse(node.value, mode="eval").body)
            except SyntaxError:
                return None
        return None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        left, right = _alternatives(node.left), _alternatives(node.right)
        return None if left is None or right is None else left + right
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
        outer, inner = node.value.id, node.slice
        if outer in ("Optional", "Union"):
            parts = inner.elts if isinstance(inner, ast.Tuple) else [inner]
            found = [_alternatives(p) for p in parts]
            if outer == "Optional":
                found.append([NONE])
            return None if any(f is None for f in found) else [a for f in found for a in f or []]
        return [PLAIN[outer]] if outer in PLAIN else None
    if isinstance(node, ast.Name) and node.id in PLAIN:
        return [PLAIN[node.id]]
    return None


def declared(node: ast.expr) -> Declared:
    alternatives = _alternatives(node)
    if alternatives is None:
        return Declared(ast.unparse(node), None)
    real = [a for a in alternatives if a is not NONE]
    if not real:
        return Declared(ast.unparse(node), None)
    words = " or ".join(dict.fromkeys(w for w, _ in real))
    return Declared(words, lambda v: any(ok(v) for _, ok in real))


@functools.lru_cache(maxsize=64)
def _classes(path: Path) -> dict[str, ast.ClassDef]:
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return {}
    return {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}


def fields_of(path: Path, name: str) -> dict[str, Declared]:
    """The annotated fields of class `name` in `path`, with those of its bases defined there."""
    classes = _classes(path)
    out: dict[str, Declared] = {}
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
                out[stmt.target.id] = declared(stmt.annotation)

    if name in classes:
        collect(classes[name])
    return out


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


def _vlm_root() -> Path | None:
    named = os.environ.get(SOURCE_ENV)
    return package_folder(Path(named).expanduser()) if named else installed_folder()


@dataclass(frozen=True)
class ConfigTypes:
    """Where a model type's config is declared: the top level's fields and, for mlx-vlm, the
    nested `text_config` table's."""

    where: str  # e.g. "mlx-lm deepseek_v3.ModelArgs"
    top: Mapping[str, Declared]
    text: Mapping[str, Declared]


def config_types(model_type: str) -> ConfigTypes | None:
    """The declared field types of `model_type`'s config (None: no runtime here declares it)."""
    bare = model_type.removeprefix(PREFIX)
    if model_type in OWN_TYPES:
        return ConfigTypes(
            f"mlatui {model_type}.ModelArgs", fields_of(OWN_TYPES[model_type], "ModelArgs"), {}
        )
    lm = _package("mlx_lm") if not model_type.startswith(PREFIX) else None
    if lm is not None:
        try:
            name = _mlx_lm_remapping(lm).get(bare, bare)
        except (OSError, SyntaxError, UnicodeDecodeError):
            name = bare
        module = lm / "models" / f"{name}.py"
        if module.is_file():
            return ConfigTypes(f"mlx-lm {name}.ModelArgs", fields_of(module, "ModelArgs"), {})
    vlm = _vlm_root()
    declared_in = vlm / "models" / bare / "config.py" if vlm is not None else None
    if declared_in is None or not declared_in.is_file():
        return None
    return ConfigTypes(
        f"mlx-vlm {bare} config",
        fields_of(declared_in, "ModelConfig"),
        fields_of(declared_in, "TextConfig"),
    )


def _first_mismatch(
    config: Mapping[str, Any], fields: Mapping[str, Declared], prefix: str = ""
) -> tuple[str, Any, Declared] | None:
    for key, value in config.items():
        d = fields.get(key)
        if value is None or d is None or d.accepts is None:
            continue  # None: a config.json's null (TOML has none), the dataclass's default
        if not d.accepts(value):
            return f"{prefix}{key}", value, d
    return None


def check_config_types(where: str, model_type: str | None, config: Mapping[str, Any]) -> None:
    """A UserError naming the first key whose value is not of its declared type, e.g.
    `FILE [model.config]: num_hidden_layers = "8": expected an integer (mlx-lm
    deepseek_v3.ModelArgs declares int)`."""
    if not model_type or not config:
        return
    types = config_types(str(model_type))
    if types is None:
        return  # an unknown type: the loader names it
    found = _first_mismatch(config, types.top)
    text = config.get("text_config")
    if found is None and types.text and isinstance(text, Mapping):
        found = _first_mismatch(text, types.text, "text_config.")
    if found is None:
        return
    key, value, d = found
    shown = _toml(value)
    raise UserError(
        f"{where}: {key} = {shown} is {_kind(value)}: expected {d.words} ({types.where})", HINT
    )


def _toml(value: Any) -> str:
    import json

    text = json.dumps(value) if not isinstance(value, bool) else str(value).lower()
    return text if len(text) <= 40 else text[:39] + "…"


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a float"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "a table"
    return type(value).__name__
