"""Load the target and the draft: real checkpoints (local folder or hub id, through `mlx_lm.load`),
the embedded default model (same loader), or random weights built from a scenario's config
(`model_from_config`: mlx-lm's model of a config's type, or mlx-vlm's language model; quantized
on request).

Loading as a phase: LoadStart before any weight is read, then LoadProgress as bytes come in.

mlx-lm's `load` reads every safetensors file in one call, so a watcher thread samples how much
the process has read (psutil's `read_chars`, Linux and Windows) or, where the OS does not say
(macOS), how much MLX has allocated; both are estimates and say so (`measure`). The last event,
after the load returned, is exact: every file was read.
"""

from __future__ import annotations

import functools
import json
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from enum import StrEnum
from pathlib import Path
from typing import Any, ParamSpec

import mlx.core as mx
import mlx.nn as nn
from msgspec import structs

from mlatui.config.draft_spec import DraftSource, DraftSpec
from mlatui.config.model_inputs import text_config
from mlatui.config.scenario import DTYPE_NAMES, ModelSpec, Scenario
from mlatui.errors import UserError
from mlatui.models import register
from mlatui.models.mtp_weights import SafetensorsError, is_hub_id, read_header
from mlatui.models.mx_typed import evaluate_buffers
from mlatui.stream.events import Event, LoadKind, LoadProgress, LoadStart

DTYPES = {name: getattr(mx, name) for name in DTYPE_NAMES}


def default_dtype() -> str:
    """float32 on the CPU (fastest there; MoE experts are float32-only on CPU), bfloat16 on a GPU
    (what real checkpoints run)."""
    return "bfloat16" if mx.default_device() == mx.gpu else "float32"


class LoadError(UserError, ValueError):
    """One line saying what could not be loaded and what to do: the command line's bad-input
    error, so every command reports it the same way."""


class DraftKind(StrEnum):
    """What proposes the drafts a verify step checks."""

    NONE = "none"
    DRAFT_MODEL = "draft-model"  # a separate small model (mlx-lm's --draft-model)
    SYNTHETIC = "synthetic"  # random weights: tokens accepted at a set rate
    MTP = "mtp"  # the checkpoint's MTP head, required
    MTP_IF_PRESENT = "mtp?"  # the checkpoint's MTP head if it has one, else none


@dataclass(frozen=True)
class Draft:
    """The run's draft choice. `label` is the recorded form (the header's `draft` field):
    "draft-model:<source>", "synthetic(acceptance=0.7)", "mtp", "none"."""

    kind: DraftKind = DraftKind.NONE
    source: str = ""  # draft-model: "embedded", a folder or hub id, or "random:<family>"
    acceptance: float = 0.0  # synthetic only

    @property
    def label(self) -> str:
        if self.kind is DraftKind.DRAFT_MODEL:
            return f"{self.kind.value}:{self.source}"
        if self.kind is DraftKind.SYNTHETIC:
            return f"synthetic(acceptance={self.acceptance:g})"
        return self.kind.value

    @property
    def is_mtp(self) -> bool:
        return self.kind in (DraftKind.MTP, DraftKind.MTP_IF_PRESENT)


NO_DRAFT = Draft()


def drafts_label(drafts: tuple[Draft, ...]) -> str:
    return " + ".join(d.label for d in drafts) or NO_DRAFT.label


EMBEDDED_DRAFT = Draft(DraftKind.DRAFT_MODEL, "embedded")


@dataclass
class Loaded:
    model: nn.Module
    tokenizer: Any | None
    name: str
    model_type: str
    path: str | None
    random_weights: bool
    draft_model: nn.Module | None = None
    draft: Draft = NO_DRAFT  # the first (or only) draft kind
    drafts: tuple[Draft, ...] = ()  # every kind, when the scenario asked for several
    # an MTP head the config announces and the folder lacks: the line the run shows, else ""
    mtp_missing: str = ""
    draft_notes: tuple[str, ...] = ()  # how a draft was matched to the target (logged)

    @property
    def draft_kinds(self) -> tuple[Draft, ...]:
        """The drafts this run measures, in the scenario's order; () without one."""
        if self.drafts:
            return self.drafts
        return () if self.draft.kind is DraftKind.NONE else (self.draft,)

    @property
    def draft_label(self) -> str:
        """The header's `draft`: one kind's label, or several joined ("mtp + draft-model:embedded")."""
        return drafts_label(self.draft_kinds)

    @property
    def checkpoint_dir(self) -> str | None:
        """The folder an MTP head is read from: the checkpoint's, or the embedded model's."""
        if self.path is not None:
            return self.path
        if self.name == "embedded":
            from mlatui.models.embedded import MODEL_PATH

            return str(MODEL_PATH)
        return None


# ---- loading as a phase: LoadStart, then LoadProgress as bytes come in ---------------------------

Counter = tuple[Callable[[], int], str]  # (bytes so far, what it measures)


def safetensors_files(*folders: str | Path) -> list[Path]:
    return sorted(p for f in folders for p in Path(f).expanduser().glob("*.safetensors"))


def read_counter() -> Counter:
    import psutil

    io_counters = getattr(psutil.Process(), "io_counters", None)  # psutil has none on macOS
    if io_counters is None:
        return memory_counter()
    try:
        io_counters().read_chars  # noqa: B018 - probes the field
    except (AttributeError, NotImplementedError, psutil.Error):
        return memory_counter()
    return (lambda: int(io_counters().read_chars)), "process read bytes"


def memory_counter() -> Counter:
    import mlx.core as mx

    return (lambda: int(mx.get_active_memory())), "mlx active memory"


def files_read(sizes: Sequence[int], done_bytes: int) -> int:
    """Files wholly covered by `done_bytes`, counting in load order (an estimate mid-load)."""
    n, total = 0, 0
    for s in sizes:
        total += s
        if total > done_bytes:
            break
        n += 1
    return n


@dataclass(frozen=True)
class Watched:
    """What a load reads: `what` ("model" | "draft model") from `source`, a checkpoint's
    safetensors `files`, or a random build's `params` and `total_bytes` (None: the files' sizes)."""

    what: str
    source: str
    kind: str = LoadKind.CHECKPOINT
    files: Sequence[Path] = ()
    params: int = 0
    total_bytes: int | None = None


class LoadWatch:
    """Emits LoadStart on entry, LoadProgress every `interval_s` while bytes move (as `counter`
    reads them; default: the process's reads), and a final exact LoadProgress(done=True) on exit."""

    def __init__(
        self,
        emit: Callable[[Event], None],
        clock: Callable[[], float],
        load: Watched,
        counter: Counter | None = None,
        interval_s: float = 0.25,
    ):
        self.emit, self.clock, self.what, self.source = emit, clock, load.what, load.source
        self.kind = load.kind
        self.sizes = [Path(f).stat().st_size for f in load.files]
        self.total = sum(self.sizes) if load.total_bytes is None else load.total_bytes
        self.params, self.interval_s = load.params, interval_s
        self.counter = counter
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.bytes_read = 0

    def __enter__(self) -> LoadWatch:
        self.emit(
            LoadStart(
                self.clock(),
                self.what,
                self.source,
                self.kind,
                len(self.sizes),
                self.total,
                self.params,
                tuple(self.sizes),
            )
        )
        read, measure = self.counter or read_counter()
        base = read()

        def sample() -> None:
            last = -1
            while not self._stop.wait(self.interval_s):
                now = max(0, read() - base)
                done = min(now, self.total) if self.total else now
                if done != last:
                    last = done
                    self.bytes_read = done
                    self.emit(
                        LoadProgress(
                            self.clock(), self.what, done, files_read(self.sizes, done), measure
                        )
                    )

        self._thread = threading.Thread(target=sample, name="mlatui-load-watch", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        ok = exc_type is None
        done = self.total if ok and self.total else self.bytes_read
        files = len(self.sizes) if ok else files_read(self.sizes, done)
        self.emit(LoadProgress(self.clock(), self.what, done, files, "exact" if ok else "", True))


WatchFactory = Callable[..., LoadWatch]


class GatedEmit:
    """`emit` until `close()`; after it, nothing. A stop during loading leaves the load thread
    running (it sits in C reads); what it reports after the engine gave up on it must not land
    after the run's end in the recording. The lock makes close() a hard line: no emit that
    started before it finishes after it."""

    def __init__(self, emit: Callable[[Event], None]) -> None:
        self._emit = emit
        self._lock = threading.Lock()
        self._open = True

    def __call__(self, event: Event) -> None:
        with self._lock:
            if self._open:
                self._emit(event)

    def close(self) -> None:
        with self._lock:
            self._open = False


def watcher(emit: Callable[[Event], None], clock: Callable[[], float]) -> WatchFactory:
    """`watch(what, source, kind=..., files=..., params=..., ...)` bound to a stream and clock."""

    def watch(what: str, source: str, counter: Counter | None = None, **load) -> LoadWatch:
        return LoadWatch(emit, clock, Watched(what, source, **load), counter)

    return watch


@contextmanager
def no_watch(*_args, **_kw) -> Iterator[None]:
    yield None


# ---- loading the target and the draft ------------------------------------------------------------

Prepare = Callable[[nn.Module], None]  # runs on the lazy model before its weights are read
FitCheck = Callable[[dict, str, int], None]  # (config, dtype, weights_bytes)


@dataclass(frozen=True)
class LoadHooks:
    """What runs along a load: `watch(what, source, files=...)` reports it as it reads
    (mlatui.models.loading); `prepare(model)` (sharding) runs while the weights are still lazy
    where the loader allows; `fit_check(config, dtype, weights_bytes)` before any weight is read
    or built."""

    watch: Any = no_watch  # a WatchFactory
    prepare: Prepare | None = None
    fit_check: FitCheck | None = None


def load_checkpoint(
    ref: str, what: str = "model", watch=no_watch, prepare: Prepare | None = None
) -> tuple[nn.Module, Any, str]:
    """`mlx_lm.load` of a local folder or a hub id; returns (model, tokenizer, model_type).
    `watch(what, source, files=...)` reports the load as it reads (mlatui.models.loading);
    `prepare(model)` (sharding) runs while the weights are still lazy, as mlx-lm's
    `sharded_load` does: each rank then reads only its own part."""
    from mlx_lm import load

    register()  # mlatui's own model types (the embedded model)
    local = Path(ref).expanduser()
    if local.exists() and not (local / "config.json").exists():
        raise LoadError(
            f"{what} {ref!r}: folder has no config.json (expected an mlx-lm model folder)"
        )
    if not local.exists() and not is_hub_id(ref):
        raise LoadError(
            f"{what} {ref!r}: no such folder (give a local mlx-lm folder or a hub id like org/name)"
        )
    if local.exists():
        refusal = refuse_half_moe_on_cpu(local, what, ref)
        if refusal is not None:
            raise LoadError(refusal)
    from mlatui.models import vlm

    vlm_type = vlm.checkpoint_model_type(ref)  # only mlx-vlm runs it: its loader, language model
    try:
        files = safetensors_files(local) if local.exists() else []
        with watch(what, ref, files=files):
            if vlm_type is not None:
                return (*vlm.load_checkpoint(ref, vlm_type, prepare), vlm_type)
            loaded = load(str(local) if local.exists() else ref, lazy=prepare is not None)
            model, tokenizer = loaded[0], loaded[1]
    except vlm.VlmUnavailable as e:
        raise LoadError(f"{what} {ref!r}: {e}") from None
    except Exception as e:  # noqa: BLE001 - mlx-lm raises many kinds; rephrase in one line
        if vlm_type is None and vlm.checkpoint_model_type(ref) is not None:
            return load_checkpoint(ref, what, watch, prepare)  # a hub id's config came with it
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise LoadError(
            f"{what} {ref!r} could not be loaded: {first} (offline? download it first or pass a local folder)"
        ) from e
    if prepare is not None:
        prepare(model)
        mx.eval(model.parameters())
    model_type = _model_type(local if local.exists() else None, model)
    return model, tokenizer, model_type


def _model_type(folder: Path | None, model: nn.Module) -> str:
    if folder is not None and (folder / "config.json").exists():
        return json.loads((folder / "config.json").read_text()).get("model_type", "?")
    return getattr(
        getattr(model, "args", None), "model_type", type(model).__module__.rsplit(".", 1)[-1]
    )


def _check_folder(ref: str, check: Callable[[dict, str, int], None]) -> None:
    """A local checkpoint folder: its config and safetensors sizes (a hub id is checked by
    nothing before mlx_lm.load fetches it)."""
    from mlatui.models.fit import folder_weights_bytes

    folder = Path(ref).expanduser()
    if not (folder / "config.json").is_file():
        return
    try:
        config = json.loads((folder / "config.json").read_text())
    except (OSError, ValueError):
        return  # mlx_lm.load reports a bad config in its own words
    dtype = str(config.get("torch_dtype") or "bfloat16")
    check(
        text_config(config),
        dtype if dtype in DTYPE_NAMES else "bfloat16",
        folder_weights_bytes(folder),
    )


def build_random(
    spec: ModelSpec, seed: int, hooks: LoadHooks = LoadHooks(), what: str = "model"
) -> tuple[nn.Module, str]:
    """An mlx-lm model of `spec.family` from the scenario's config values, random weights.
    `hooks.fit_check` sees the weights' size while they are still lazy; `hooks.prepare`
    (sharding) runs then too, so a rank only ever evaluates its own part."""

    register()  # mlatui's own model types (the embedded model)
    config = dict(spec.config)
    config.setdefault("model_type", spec.family)
    mx.random.seed(seed)
    from mlatui.models import vlm

    try:
        model = model_from_config(config)
    except vlm.VlmUnavailable as e:
        raise LoadError(str(e)) from None
    except ValueError as e:  # mlx-lm: "Model type X not supported."
        raise LoadError(f"model family {spec.family!r} is not an mlx-lm model type") from e
    except TypeError as e:
        raise LoadError(f"model config for {spec.family}: {e}") from e
    model.set_dtype(DTYPES[spec.dtype])
    if spec.bits:
        quantize(model, spec.bits)
    from mlatui.models.mx_typed import flat_arrays

    leaves = [v for _, v in flat_arrays(model.parameters())]
    nbytes = sum(v.nbytes for v in leaves)
    if hooks.fit_check is not None:
        hooks.fit_check(config, spec.dtype, nbytes)
    if hooks.prepare is not None:
        hooks.prepare(model)
    params = sum(v.size for v in leaves)
    source = f"random:{config['model_type']}"
    with hooks.watch(
        what,
        source,
        kind=LoadKind.RANDOM,
        params=params,
        total_bytes=nbytes,
        counter=memory_counter(),
    ):
        mx.eval(model.parameters())
    return model, model.model_type if isinstance(model, vlm.TextModel) else config["model_type"]


P = ParamSpec("P")


def _buffers_evaluated(load: Callable[P, Loaded]) -> Callable[P, Loaded]:
    """The loader, then the loaded modules' lazily built arrays evaluated on this thread
    (mlatui.models.mx_typed)."""

    @functools.wraps(load)
    def loaded(*args: P.args, **kwargs: P.kwargs) -> Loaded:
        out = load(*args, **kwargs)
        evaluate_buffers(out.model, out.draft_model)
        return out

    return loaded


@_buffers_evaluated
def load_target(
    model_ref: str | None,
    scenario: Scenario,
    random_weights: bool,
    seed: int,
    hooks: LoadHooks = LoadHooks(),
) -> Loaded:
    """`hooks.fit_check` runs before any weight is read or built; `hooks.prepare` (sharding)
    before the weights are evaluated where the loader allows."""
    spec = scenario.model
    check = hooks.fit_check or (lambda config, dtype, weights: None)
    watch, prepare = hooks.watch, hooks.prepare
    if model_ref is not None and not random_weights:
        _check_folder(model_ref, check)
        model, tok, mtype = load_checkpoint(model_ref, watch=watch, prepare=prepare)
        return Loaded(model, tok, model_ref, mtype, model_ref, False)
    if random_weights or spec.source == "random":
        if not spec.family:
            raise LoadError(
                f"{scenario.path}: --random-weights needs [model] family and [model.config] in the scenario"
            )
        model, mtype = build_random(spec, seed, hooks)
        return Loaded(model, None, f"random:{spec.family}", mtype, None, True)
    if spec.source == "path":
        if not spec.path:
            raise LoadError(f"{scenario.path} [model]: source = \"path\" needs 'path'")
        _check_folder(os.path.expanduser(spec.path), check)
        model, tok, mtype = load_checkpoint(
            os.path.expanduser(spec.path), watch=watch, prepare=prepare
        )
        return Loaded(model, tok, spec.path, mtype, spec.path, False)
    from mlatui.models.embedded import DRAFT_PATH, MODEL_PATH, load_embedded

    with watch("model", "embedded", files=safetensors_files(MODEL_PATH, DRAFT_PATH)):
        model, tok, draft = load_embedded()
    if prepare is not None:  # 23 MB, loaded whole: sharded after
        prepare(model)
    loaded = Loaded(model, tok, "embedded", _model_type(None, model), None, False)
    loaded.draft_model, loaded.draft = draft, EMBEDDED_DRAFT
    return loaded


def load_draft(
    draft_ref: str | None,
    spec: DraftSpec,
    target: Loaded,
    seed: int,
    hooks: LoadHooks = LoadHooks(),
) -> None:
    """Fill target.draft_model / draft per --draft-model, else the scenario's [draft]; a draft
    model is checked against the target before any step. `hooks.prepare` shards it."""
    _load_draft(draft_ref, spec, target, seed, hooks)
    evaluate_buffers(target.draft_model)
    if target.draft_model is not None and target.draft.kind is DraftKind.DRAFT_MODEL:
        check_draft_vocabulary(target)


def check_draft_vocabulary(target: Loaded) -> None:
    """A draft model proposes token ids the target verifies: both must use one vocabulary. A
    larger draft vocabulary made mlx-lm index past the target's logits (a segfault late in tune);
    a smaller one silently never proposes the rest."""
    if target.draft_model is None:
        return
    mine, theirs = vocab_size(target.model), vocab_size(target.draft_model)
    if mine != theirs:
        raise LoadError(
            f"draft model {target.draft.source}: vocabulary of {theirs} tokens, the target's has {mine} — "
            "use a draft trained with the target's tokenizer"
        )


def _load_draft(
    draft_ref: str | None, spec: DraftSpec, target: Loaded, seed: int, hooks: LoadHooks
) -> None:
    if draft_ref is not None:
        target.draft_model, _, _ = load_checkpoint(
            draft_ref, "draft model", hooks.watch, hooks.prepare
        )
        target.draft = Draft(DraftKind.DRAFT_MODEL, draft_ref)
        if DraftSource.MTP in spec.sources:  # --draft-model replaces the draft-model kind only
            target.drafts = (Draft(DraftKind.MTP), target.draft)
        return
    if spec.sources:
        rest = _several(spec, target, seed, hooks)
        if rest is None:
            return
        spec = rest
    if target.random_weights and spec.source in (DraftSource.AUTO, DraftSource.MTP):
        spec = DraftSpec(
            DraftSource.SYNTHETIC, None, spec.config, spec.acceptance
        )  # no checkpoint, no MTP head
    if spec.source is DraftSource.DRAFT_MODEL:
        _draft_model(spec, target, seed, hooks)
    elif spec.source is DraftSource.SYNTHETIC:
        if spec.config:
            target.draft_model = _random_draft(spec.config, seed, hooks)
        target.draft = Draft(DraftKind.SYNTHETIC, acceptance=spec.acceptance)
    elif spec.source is DraftSource.MTP:
        target.draft = Draft(DraftKind.MTP)
    elif spec.source is DraftSource.NONE:
        target.draft_model, target.draft = None, NO_DRAFT
    elif spec.source is DraftSource.AUTO and target.draft_model is None and target.path is not None:
        target.draft = Draft(DraftKind.MTP_IF_PRESENT)


def _draft_model(spec: DraftSpec, target: Loaded, seed: int, hooks: LoadHooks) -> None:
    """`[draft] source = "draft-model"`: a checkpoint, a random model from [draft.config], or
    the embedded model's own draft."""
    if not spec.path and not spec.config and target.draft == EMBEDDED_DRAFT:
        return  # the embedded model's own draft model
    if spec.path:
        target.draft_model, _, _ = load_checkpoint(
            spec.path, "draft model", hooks.watch, hooks.prepare
        )
        target.draft = Draft(DraftKind.DRAFT_MODEL, spec.path)
    elif spec.config:
        family = spec.config.get("model_type")
        if not family:
            raise LoadError("[draft.config] needs model_type (an mlx-lm model type)")
        target.draft_model = _random_draft(spec.config, seed, hooks)
        target.draft = Draft(DraftKind.DRAFT_MODEL, f"random:{family}")
    else:
        raise LoadError("[draft] source = \"draft-model\" needs 'path' or a [draft.config] table")


def _random_draft(config: dict[str, Any], seed: int, hooks: LoadHooks) -> nn.Module:
    """A random-weight draft model of [draft.config] (its own seed; no fit check of its own)."""
    spec = ModelSpec("random", None, config.get("model_type"), config)
    model, _ = build_random(spec, seed + 1, replace(hooks, fit_check=None), "draft model")
    return model


def _several(spec: DraftSpec, target: Loaded, seed: int, hooks: LoadHooks) -> DraftSpec | None:
    """`sources = ["mtp", "draft-model"]`: load the draft model, record both kinds. Random weights
    have no MTP head, so they keep one kind (the draft model if one is given, else synthetic);
    the returned spec is that one kind, None when both were set here."""
    if target.random_weights:
        model_given = spec.path or spec.config
        one = DraftSource.DRAFT_MODEL if model_given else DraftSource.SYNTHETIC
        return structs.replace(spec, source=one, sources=())
    single = structs.replace(spec, sources=())
    for kind in spec.sources:
        if kind is DraftSource.DRAFT_MODEL:
            _load_draft(None, structs.replace(single, source=kind), target, seed, hooks)
    model_draft = target.draft if target.draft.kind is DraftKind.DRAFT_MODEL else None
    target.drafts = tuple(
        Draft(DraftKind.MTP) if k is DraftSource.MTP else model_draft  # type: ignore[misc]
        for k in spec.sources
    )
    target.draft = target.drafts[0]
    return None


def vocab_size(model: nn.Module) -> int:
    args = getattr(model, "args", None)
    for obj in (args, getattr(args, "text_config", None)):
        v = getattr(obj, "vocab_size", None) if obj is not None else None
        if isinstance(v, int):
            return v
    raise LoadError("cannot tell the model's vocabulary size")


_HALF = {"BF16": "bfloat16", "F16": "float16"}
_EXPERT_MARKS = (".experts.", ".switch_mlp.", ".block_sparse_moe.")


def half_precision_experts(folder: Path) -> str | None:
    """'bfloat16' / 'float16' when the folder's MoE experts are stored unquantized in that
    dtype, else None (no experts, float32 experts, or quantized ones). MLX's CPU `gather_mm`
    (unquantized experts) runs float32 only: such a folder loads, then dies at its first step
    (`[GatherMM::eval] Currently only supports float32.`); quantized experts (`gather_qmm`) run
    in any float dtype. The safetensors headers say which case a folder is (a few kB read)."""
    for path in sorted(folder.glob("*.safetensors")):
        try:
            header = read_header(path)
        except (OSError, SafetensorsError):
            return None  # mlx_lm.load reports a broken file in its own words
        for name, info in header.items():
            if not name.endswith(".weight") or not any(m in name for m in _EXPERT_MARKS):
                continue
            if name.removesuffix(".weight") + ".scales" in header:
                continue
            dtype = _HALF.get(str(info.get("dtype")))
            if dtype is not None:
                return dtype
    return None


def refuse_half_moe_on_cpu(folder: Path, what: str, ref: str) -> str | None:
    """The one-line refusal, before any weight is read, for a half-precision MoE folder on the
    CPU, else None."""
    if mx.default_device() != mx.cpu:
        return None
    dtype = half_precision_experts(folder)
    if dtype is None:
        return None
    return (
        f"{what} {ref!r}: its MoE experts are unquantized {dtype}, which MLX runs only in float32 "
        f"on the CPU — convert it with `mlx_lm convert --hf-path {ref} --mlx-path {ref}-f32 "
        "--dtype float32` (or `-q` for 4-bit), or run on a GPU"
    )


GROUP_SIZE = 64


def model_from_config(config: dict[str, Any]) -> nn.Module:
    """mlx-lm's model of `config["model_type"]`; mlx-vlm's language model for a type only mlx-vlm
    has, or one spelled "mlx-vlm:<type>" (mlatui.models.vlm)."""
    from mlatui.models import vlm

    if vlm.needs_vlm(config.get("model_type")):
        return vlm.language_model(config, vlm.vlm_source(f"model type {config['model_type']!r}"))
    from mlx_lm.utils import _get_classes

    model_cls, args_cls = _get_classes(config)
    return model_cls(args_cls.from_dict(config))


def quantize(model: nn.Module, bits: int, group_size: int = GROUP_SIZE) -> None:
    nn.quantize(
        model,
        group_size=group_size,
        bits=bits,
        class_predicate=lambda _, m: (
            hasattr(m, "to_quantized") and m.weight.shape[-1] % group_size == 0
        ),
    )
