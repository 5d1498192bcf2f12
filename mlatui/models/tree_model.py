"""A model built from another source tree's classes, holding the loaded model's very arrays.

A reviewer points an arm at a checkout of a patch (or another release): the tree's package folder
is mounted under a private name (mlatui.models.source_tree), the model module of the loaded
model's `model_type` is imported from it, the model is built from that tree's classes, quantized
where the loaded one is, and then given the loaded model's parameters themselves (no copy: one
set of weights serves both arms). A tree whose model would need other weights is refused, naming
the first parameter whose name, shape or dtype kind differs, before anything is timed.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import subprocess
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

import mlx.core as mx
import mlx.nn as nn
from mlx.utils import tree_unflatten

from mlatui.config.arm_settings import PACKAGES, ArmSourceError, package_folder
from mlatui.models import source_tree
from mlatui.models.mx_typed import evaluate_buffers, flat_arrays

LANGUAGE_PREFIX = "language_model."  # mlx-vlm's TextModel holds the language model under it


class TreeError(ValueError):
    """A source tree cannot serve as an arm (one line saying what to give instead)."""


@dataclass(frozen=True)
class TreeRuntime:
    """One runtime's source tree, mounted: `package_dir` is the package folder (.../mlx_lm)."""

    given: str  # the path as the user gave it
    package_dir: Path
    package: str  # "mlx_lm" | "mlx_vlm"
    version: str
    tree: source_tree.SourceTree

    @property
    def runtime(self) -> str:
        return PACKAGES[self.package]

    @property
    def label(self) -> str:
        return f"{self.runtime} {self.version} ({self.package_dir})"


@cache
def open_tree(path: str) -> TreeRuntime:
    """Mount the tree at `path` (once per path)."""
    try:
        package_dir, package = package_folder(path)
    except ArmSourceError as e:
        raise TreeError(str(e)) from None
    version = source_tree.tree_version(package_dir)
    tree = source_tree.mount(package_dir, version)
    return TreeRuntime(path, package_dir, package, version, tree)


# ---- building the tree's model --------------------------------------------------------------


def _config_of(model: nn.Module) -> dict[str, Any]:
    """The loaded model's config as a dict its runtime's ModelArgs/TextConfig reads back."""
    args = getattr(model, "args", None)
    if args is None or not dataclasses.is_dataclass(args) or isinstance(args, type):
        raise TreeError(
            f"{type(model).__module__}: the loaded model has no config dataclass (args)"
        )
    return dataclasses.asdict(args)


def model_type_of(model: nn.Module) -> str:
    found = getattr(model, "model_type", None) or getattr(
        getattr(model, "args", None), "model_type", None
    )
    if not isinstance(found, str) or not found:
        raise TreeError("the loaded model does not say its model_type")
    return found


def _build(runtime: TreeRuntime, model_type: str, config: dict[str, Any]) -> nn.Module:
    tree = runtime.tree
    if runtime.package == "mlx_vlm":
        from mlatui.models import vlm

        source = vlm.VlmSource(tree.alias, runtime.package_dir, runtime.version, tree)
        if not source.has_family(model_type):
            raise TreeError(f"{runtime.label}: has no model type {model_type!r}")
        text = {**config, "model_type": model_type}
        return vlm.language_model({**text, "text_config": dict(config)}, source)
    from mlx_lm.utils import MODEL_REMAPPING

    name = MODEL_REMAPPING.get(model_type, model_type)
    if not tree.has(f"models.{name}"):
        raise TreeError(f"{runtime.label}: has no model module models/{name}.py for {model_type!r}")
    module = tree.module(f"models.{name}")
    args = module.ModelArgs.from_dict({**config, "model_type": model_type})
    built: nn.Module = module.Model(args)
    return built


def _bare(name: str) -> str:
    return name[len(LANGUAGE_PREFIX) :] if name.startswith(LANGUAGE_PREFIX) else name


def _quantized_like(new: nn.Module, loaded: nn.Module) -> None:
    """Quantize the layers of `new` that are quantized in `loaded` (it has `<path>.scales`),
    with the loaded layer's group size, bits and mode."""
    loaded_layers = {
        _bare(path): m
        for path, m in loaded.named_modules()
        if isinstance(m.get("scales"), mx.array)
    }
    if not loaded_layers:
        return

    def predicate(path: str, module: nn.Module) -> bool | dict[str, Any]:
        found = loaded_layers.get(_bare(path))
        if found is None or not hasattr(module, "to_quantized"):
            return False
        spec: dict[str, Any] = {"group_size": found.group_size, "bits": found.bits}
        if getattr(found, "mode", None):
            spec["mode"] = found.mode
        return spec

    nn.quantize(new, class_predicate=predicate)


def _kind(dtype: mx.Dtype) -> str:
    return "floating" if mx.issubdtype(dtype, mx.floating) else str(dtype)


def parameter_difference(new: nn.Module, loaded: nn.Module) -> str | None:
    """The first parameter whose name, shape or dtype kind differs, in words; None if none.
    Floating widths follow the weights as loaded (a fresh build is float32 wherever a checkpoint
    is bf16); an integer (quantized) tensor where the other has floats is a difference."""
    have = {_bare(k): v for k, v in flat_arrays(new.parameters())}
    want = {_bare(k): v for k, v in flat_arrays(loaded.parameters())}
    for name, array in want.items():
        got = have.get(name)
        if got is None:
            return f"the tree's model has no parameter {name} (the loaded model has it, {tuple(array.shape)})"
        if tuple(got.shape) != tuple(array.shape):
            return f"parameter {name}: shape {tuple(got.shape)} in the tree, {tuple(array.shape)} loaded"
        if _kind(got.dtype) != _kind(array.dtype):
            return f"parameter {name}: dtype {got.dtype} in the tree, {array.dtype} loaded"
    extra = next((name for name in have if name not in want), None)
    if extra is not None:
        return f"the tree's model adds parameter {extra} {tuple(have[extra].shape)}, which the loaded model lacks"
    return None


def share_weights(new: nn.Module, loaded: nn.Module) -> None:
    """Give `new` the very arrays of `loaded` (names matched as parameter_difference matches)."""
    want = {_bare(k): v for k, v in flat_arrays(loaded.parameters())}
    mine = [(k, want[_bare(k)]) for k, _ in flat_arrays(new.parameters())]
    new.update(tree_unflatten(mine))


def model_from_tree(runtime: TreeRuntime, loaded: nn.Module) -> nn.Module:
    """The loaded model rebuilt from the tree's classes, holding the loaded model's arrays."""
    model_type = model_type_of(loaded)
    if model_type == EMBEDDED_TYPE and runtime.package == "mlx_lm":
        built = _embedded_from_tree(runtime, loaded)
    elif type(loaded).__module__.startswith("mlatui.") and not _is_vlm_text_model(loaded):
        raise TreeError(
            f"{model_type} is mlatui's own model type, which no source tree has: use a runtime "
            "family (--random-weights with e.g. tests/fixtures/tiny.toml, or a checkpoint)"
        )
    else:
        built = _build(runtime, model_type, _config_of(loaded))
    _quantized_like(built, loaded)
    differs = parameter_difference(built, loaded)
    if differs is not None:
        raise TreeError(f"{runtime.label} cannot share the loaded weights: {differs}")
    share_weights(built, loaded)
    built.eval()
    evaluate_buffers(built)
    return built


EMBEDDED_TYPE = "mlatui_mla"


def _is_vlm_text_model(model: nn.Module) -> bool:
    """mlx-vlm's language model in mlatui's wrapper (its classes are mlx-vlm's own)."""
    from mlatui.models.vlm import TextModel

    return isinstance(model, TextModel)


def _embedded_from_tree(runtime: TreeRuntime, loaded: nn.Module) -> nn.Module:
    """mlatui's embedded model with its runtime parts from the tree: every dense layer is the
    tree's deepseek_v3 decoder layer, every sparse layer's MLP the tree's (the sparse attention
    is mlatui's own and stays), and the dense layers' caches are the tree's KVCache."""
    from mlatui.models import mlatui_mla

    if not runtime.tree.has("models.deepseek_v3"):
        raise TreeError(
            f"{runtime.label}: has no models/deepseek_v3.py (the embedded model's layers)"
        )
    dsv3 = runtime.tree.module("models.deepseek_v3")
    kv_cache = runtime.tree.module("models.cache").KVCache
    args = loaded.args
    dense = dsv3.ModelArgs.from_dict(dataclasses.asdict(args.dense_args()))
    built = mlatui_mla.Model(args)
    inner = built.model
    for i, layer in enumerate(inner.layers):
        if i in inner.sparse_layers:
            layer.mlp = dsv3.DeepseekV3MLP(dense)
        else:
            inner.layers[i] = dsv3.DeepseekV3DecoderLayer(dense, i)
    sparse = set(inner.sparse_layers)

    def make_tree_cache() -> list[Any]:
        return [
            layer.self_attn.make_cache() if i in sparse else kv_cache()
            for i, layer in enumerate(inner.layers)
        ]

    built.__dict__["make_cache"] = make_tree_cache
    return built


def make_cache(model: nn.Module) -> list[Any]:
    """A fresh prompt cache made by the code the model came from: a mounted tree's own
    `make_prompt_cache` (its own cache classes), else the installed mlx-lm's."""
    own = model.__dict__.get("make_cache")  # the embedded model built from a tree
    if own is not None:
        made_here: list[Any] = own()
        return made_here
    tree = source_tree.tree_of(type(model).__module__)
    if (
        tree is not None
        and tree.has("models.cache")
        and hasattr(tree.module("models.cache"), "make_prompt_cache")
    ):
        made: list[Any] = tree.module("models.cache").make_prompt_cache(model)
        return made
    from mlx_lm.models.cache import make_prompt_cache

    return make_prompt_cache(model)


# ---- provenance -----------------------------------------------------------------------------


def in_git_checkout(folder: Path) -> bool:
    """Whether `folder` lies in a git work tree (a `.git` folder, or the file a worktree or a
    submodule has, in it or above it), found without running git."""
    return any((f / ".git").exists() for f in (folder, *folder.resolve().parents))


def _git(folder: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(
            ["git", "-C", str(folder), *args], capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def code_files(model: nn.Module) -> dict[str, Path]:
    """Module name -> file of the runtime code the model runs: the modules its classes come from,
    the package's modules those import names from (base, mla, switch_layers, ...), and the
    package's cache module (the caches are made by it). One rule for a tree and the installed
    code, so that the two arms' lists compare file for file."""
    names = set()
    for _, m in model.named_modules():
        names.add(type(m).__module__)
        names.add(getattr(type(m), "_mlatui_stock_class", type(m)).__module__)
    names = {n for n in names if _package_top(n) is not None}
    for name in list(names):
        top = _package_top(name)
        for value in vars(sys.modules[name]).values():
            owner = (
                value.__name__
                if isinstance(value, ModuleType)
                else getattr(value, "__module__", None)
            )
            if isinstance(owner, str) and owner.split(".", 1)[0] == top:
                names.add(owner)
        try:  # the caches are made by this code too (a tree imports it on first use)
            importlib.import_module(f"{top}.models.cache")
            names.add(f"{top}.models.cache")
        except ImportError:
            pass
    out = {}
    for name in sorted(names):
        file = getattr(sys.modules.get(name), "__file__", None)
        if file and file.endswith(".py"):
            out[name] = Path(file)
    return out


def _package_top(module_name: str) -> str | None:
    """The top-level name of a runtime package or a mounted tree a module belongs to."""
    top = module_name.split(".", 1)[0]
    return top if top in PACKAGES or top.startswith(source_tree.ALIAS_PREFIX) else None


def provenance(model: nn.Module, runtime: TreeRuntime | None = None) -> dict[str, Any]:
    """What code an arm ran: path, package, version, git commit and dirtiness (a checkout), and
    a sha256 (16 hex) of each model source file, keyed by its path inside the package."""
    if runtime is None:  # the installed runtime the model was loaded with
        top = type(model).__module__.split(".", 1)[0]
        package = top if top in PACKAGES else "mlx_lm"
        module = sys.modules.get(package)
        package_dir = Path(getattr(module, "__file__", "") or ".").parent if module else None
        _, version, _ = source_tree.runtime_of(package)
        where = "installed"
    else:
        package, package_dir, version, where = (
            runtime.package,
            runtime.package_dir,
            runtime.version,
            runtime.given,
        )
    files: dict[str, str] = {}
    for file in code_files(model).values():
        if package_dir is not None and file.is_relative_to(package_dir):
            files[str(file.relative_to(package_dir))] = _sha256(file)
    out: dict[str, Any] = {
        "path": str(package_dir) if package_dir else "?",
        "given": where,
        "package": PACKAGES.get(package, package),
        "version": version,
        "files": files,
    }
    # git only for a source arm inside a checkout: the installed runtime needs none, and on a Mac
    # without the Command Line Tools `git` itself pops up an installation dialog
    checkout = runtime is not None and package_dir is not None and in_git_checkout(package_dir)
    tracked = _git(package_dir, "ls-files", "--", ".") if checkout and package_dir else None
    commit = _git(package_dir, "rev-parse", "HEAD") if tracked and package_dir else None
    if commit and package_dir is not None:  # a checkout's own files (not a venv inside one)
        status = _git(package_dir, "status", "--porcelain", "--", ".")
        out["commit"] = commit
        out["dirty"] = bool(status)
    return out
