"""mlx-vlm as a second runtime: its MLA language models, built or loaded, run as mlx-lm runs a model.

Where mlx-vlm comes from, in order:
- `MLATUI_MLX_VLM_SOURCE`: a source tree (the `mlx_vlm` package folder, or a folder holding it,
  e.g. an unpacked wheel or a PR checkout). It is mounted under a private name
  (mlatui.models.source_tree): only the model files and what they import are loaded, so it needs
  mlx, numpy and Pillow, not mlx-vlm's own dependencies.
- the installed `mlx_vlm` (`pip install 'mlatui[vlm]'`), imported as itself.

Only the language model runs: checkpoints load through mlx-vlm's own loader and the vision tower
is never evaluated. `TextModel` makes mlx-vlm's language model callable as mlx-lm's
`generate_step` / `speculative_generate_step` call a model (tokens in, logits out) and builds
mlx-vlm's own caches for it.
"""

from __future__ import annotations

import ast
import copy
import importlib
import importlib.metadata
import importlib.util
import inspect
import json
import os
import sys
import textwrap
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

import mlx.core as mx
import mlx.nn as nn

from mlatui.config.model_inputs import (
    INSTALL_HINT,
    SOURCE_ENV,
    installed_folder,
    package_folder,
    split_name,
)
from mlatui.gate.forms import indexer_pool_gates
from mlatui.models.families import VLM_FAMILIES
from mlatui.models.mtp_weights import local_folder
from mlatui.models.source_tree import SourceTree, mount, runtime_of, tree_version


class VlmUnavailable(ImportError):
    """The model needs mlx-vlm and none is installed or named (one line, naming the extra)."""


@dataclass(frozen=True)
class VlmSource:
    """One mlx-vlm: the installed package, or a mounted source tree."""

    package: str  # "mlx_vlm", or the source tree's private alias
    root: Path  # the package folder
    version: str
    tree: SourceTree | None = None

    def module(self, dotted: str) -> ModuleType:
        if self.tree is not None:
            return self.tree.module(dotted)
        return importlib.import_module(f"{self.package}.{dotted}")

    def has_family(self, model_type: str) -> bool:
        return (self.root / "models" / model_type / "language.py").is_file()

    @property
    def label(self) -> str:
        where = "installed" if self.tree is None else str(self.root)
        return f"mlx-vlm {self.version} ({where})"


def _package_folder(path: Path) -> Path:
    """The `mlx_vlm` folder itself, given it or a folder holding it."""
    found = package_folder(path)
    if found is None:
        raise VlmUnavailable(
            f"{SOURCE_ENV}={path}: no mlx_vlm package there (expected mlx_vlm/models/base.py)"
        )
    return found


@cache
def source_from_tree(path: str) -> VlmSource:
    root = _package_folder(Path(path).expanduser().resolve())
    version = tree_version(root)
    tree = mount(root, version)
    return VlmSource(tree.alias, root, version, tree)


def installed_source() -> VlmSource | None:
    root = installed_folder()
    if root is None:
        return None
    try:
        version = importlib.metadata.version("mlx-vlm")
    except importlib.metadata.PackageNotFoundError:
        version = tree_version(root)
    return VlmSource("mlx_vlm", root, version)


def vlm_source(what: str = "this model") -> VlmSource:
    """The mlx-vlm to use (SOURCE_ENV first, then the installed one), or a one-line error."""
    named = os.environ.get(SOURCE_ENV)
    if named:
        return source_from_tree(named)
    found = installed_source()
    if found is None:
        raise VlmUnavailable(f"{what} runs on mlx-vlm, which is not installed: {INSTALL_HINT}")
    return found


# ---- which model types need mlx-vlm ----------------------------------------------------------


def mlx_lm_has(model_type: str) -> bool:
    """Whether the installed mlx-lm has a model module for `model_type` (after its remapping)."""
    from mlx_lm.utils import MODEL_REMAPPING

    name = MODEL_REMAPPING.get(model_type, model_type)
    return importlib.util.find_spec(f"mlx_lm.models.{name}") is not None


def needs_vlm(model_type: str | None) -> bool:
    """A config's model_type that only mlx-vlm runs: an mlx-vlm MLA family mlx-lm lacks."""
    if not model_type:
        return False
    wanted, bare = split_name(model_type)
    return wanted or (bare in VLM_FAMILIES and not mlx_lm_has(bare))


# ---- the language model as mlx-lm calls a model ----------------------------------------------


class TextModel(nn.Module):
    """mlx-vlm's language model, called as mlx-lm calls a model: `model(tokens, cache=...)`
    returns logits; `make_cache()` builds mlx-vlm's own caches (pooling caches, cache lists)."""

    def __init__(self, language_model: nn.Module, source: VlmSource, model_type: str):
        super().__init__()
        self.language_model = language_model
        self.args = getattr(language_model, "args", None) or language_model.config
        self.model_type = model_type
        self.runtime = source.label
        self._kv_cache = source.module("models.cache").KVCache

    def __call__(self, inputs: mx.array, cache: Any = None, **kwargs: Any) -> mx.array:
        out = self.language_model(inputs, cache=cache, **kwargs)
        return out.logits if hasattr(out, "logits") else out

    @property
    def layers(self) -> list[nn.Module]:
        return list(self.language_model.layers)

    def make_cache(self) -> list[Any]:
        own = getattr(self.language_model, "make_cache", None)
        if own is not None:
            return list(own())
        return [self._kv_cache() for _ in self.language_model.layers]

    def sanitize(self, weights: dict[str, mx.array]) -> dict[str, mx.array]:
        own = getattr(self.language_model, "sanitize", None)
        return own(weights) if own is not None else weights


def _text_config(config_module: ModuleType, config: dict[str, Any]) -> tuple[Any, Any]:
    """(the language model's config object, the whole model's), from mlx-vlm's config classes,
    filled the way mlx-vlm's loader fills them (its `from_dict` may rewrite the dict's
    text_config, so the table is read after it ran)."""
    params = copy.deepcopy(config)
    params.setdefault("text_config", params.pop("llm_config", {}))
    params.setdefault("vision_config", {})
    whole = config_module.ModelConfig.from_dict(params)
    text_cls = getattr(config_module, "TextConfig", None)
    if text_cls is None:
        return whole, whole
    text = getattr(whole, "text_config", None)
    if not isinstance(text, text_cls):
        text = text_cls.from_dict(dict(params.get("text_config") or {}))
    return text, whole


def language_model(config: dict[str, Any], source: VlmSource) -> TextModel:
    """mlx-vlm's language model of `config["model_type"]` with fresh (random) weights, lazy."""
    _, model_type = split_name(str(config.get("model_type", "")))
    if not source.has_family(model_type):
        raise ValueError(f"{source.label} has no model type {model_type!r}")
    config = {**config, "model_type": model_type}
    config_module = source.module(f"models.{model_type}.config")
    language = source.module(f"models.{model_type}.language")
    text, whole = _text_config(config_module, config)
    cls = language.LanguageModel
    takes_whole = len(inspect.signature(cls.__init__).parameters) > 2 and text is not whole
    lm = cls(text, whole) if takes_whole else cls(text)
    model = TextModel(lm, source, model_type)
    # inference mode, as mlx-vlm's loader leaves it: glm5_next's decode path tests `not self.training`
    model.eval()
    return model


# ---- checkpoints -----------------------------------------------------------------------------


def _config_of(ref: str) -> dict[str, Any] | None:
    """config.json of a local folder, or of a hub id already in the local hub cache (no network:
    an uncached hub id is fetched by the loader that fails on it, and is checked again then)."""
    path = local_folder(ref) / "config.json"
    if not path.is_file():
        return None
    try:
        config = json.loads(path.read_text())
    except (OSError, ValueError):
        return None  # the loader reports a bad config in its own words
    return config if isinstance(config, dict) else None


def checkpoint_model_type(ref: str) -> str | None:
    """The model_type of checkpoint `ref` when only mlx-vlm runs it, else None."""
    config = _config_of(ref)
    model_type = config.get("model_type") if config else None
    return model_type if isinstance(model_type, str) and needs_vlm(model_type) else None


def load_checkpoint(ref: str, model_type: str, prepare: Any = None) -> tuple[TextModel, Any]:
    """(language model, tokenizer) of a checkpoint through mlx-vlm's own loader, lazily: only
    the language model's weights are ever read; `prepare(model)` (sharding) runs before."""
    source = vlm_source(f"model type {model_type!r}")
    if source.tree is not None:
        raise VlmUnavailable(
            f"model type {model_type!r}: checkpoints load through the installed mlx-vlm's loader "
            f"({INSTALL_HINT}); {SOURCE_ENV} trees build random weights only"
        )
    from mlx_lm.utils import load_tokenizer
    from mlx_vlm.utils import get_model_path, load_model

    path = Path(get_model_path(ref))
    whole = load_model(path, lazy=True)
    model = TextModel(whole.language_model, source, model_type)
    model.eval()
    if prepare is not None:
        prepare(model)
    mx.eval(model.parameters())
    return model, load_tokenizer(path)


def _pool_gate_lines(cls: type) -> tuple[str, list[int]] | None:
    """(file, lines of `if S == 1 and ... _pool ...` gates) of the class's methods; None when its
    source cannot be read."""
    try:
        source = textwrap.dedent(inspect.getsource(cls))
        filename = inspect.getsourcefile(cls) or cls.__module__
        first = inspect.getsourcelines(cls)[1]
    except (OSError, TypeError):
        return None
    lines = [
        gate.lineno + first - 1
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.FunctionDef)
        for gate in indexer_pool_gates(node)
    ]
    return filename, sorted(set(lines))


def indexer_notices(model: Any) -> list[str]:
    """One line per pooled-indexer class of a runtime (not mlatui's own): pre-fix (its S == 1
    pool gate, file:line) or already incremental at any width (the comparison does not apply).
    The indexer comparison runs on mlatui's own sparse layers; mlx-vlm 0.6.17's glm5_next still
    has the `S == 1` pool gate, 0.7.10's pools incrementally at any width and attends absorbed up
    to its decode block, so the run says which rather than show a missing comparison as no gain."""
    said: set[type] = set()
    out = []
    for _, module in model.named_modules():
        cls = type(module)
        if (
            cls in said
            or cls.__module__.startswith("mlatui.")
            or not hasattr(module, "index_kpool")
        ):
            continue
        said.add(cls)
        runtime, version, _ = runtime_of(cls.__module__)
        where = f"{runtime} {version} {cls.__name__}"
        found = _pool_gate_lines(cls)
        if found is None:
            out.append(f"{where}: its source cannot be read; what its indexer pools is not known")
        elif found[1]:
            at = ", ".join(f"{found[0]}:{n}" for n in found[1])
            out.append(
                f"{where}: pools the indexer's windows incrementally only at S == 1 ({at}); every "
                "verify step re-pools the whole cache. The indexer phase measures mlatui's own "
                "sparse layers, not this runtime's"
            )
        else:
            block = getattr(sys.modules.get(cls.__module__), "DECODE_BLOCK_SIZE", None)
            absorbed = f", and attends absorbed for steps up to {block} tokens" if block else ""
            out.append(
                f"{where}: already pools incrementally at any step width (no S == 1 gate){absorbed}: "
                "the indexer fix is in this runtime, so there is no stock-vs-fixed indexer to compare"
            )
    return out
