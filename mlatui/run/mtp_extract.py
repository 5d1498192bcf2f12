"""`mlatui mtp extract`: put back the MTP head that mlx-lm's converter dropped from an mlx folder.

From the original checkpoint (a folder or a hub id) only the index and the shards holding
`model.layers.{N}.*` are read (N = num_hidden_layers), and of those only that layer's bytes. The
layer goes through the folder's own mlx-lm `sanitize`, is cast to the folder's dtype and quantized
the way its config says (mlx-lm's convert predicate), then written as FOLDER/mtp.safetensors with
FOLDER/mtp.provenance.json (source, revision, tensor names and hashes). A self-check loads the
head the way a run does and drafts a few tokens with the folder's model.

An mlx-vlm split drafter folder (`mlx_vlm.speculative.drafters.glm4_moe_lite_mtp`) is accepted as
a source too: its flat names map back to the checkpoint's.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import mlx.core as mx
import mlx.nn as nn

from mlatui.config.model_inputs import text_config
from mlatui.models.embedded import sha256
from mlatui.models.mtp_weights import (
    PROVENANCE,
    CheckpointSource,
    SafetensorsError,
    SourceError,
    from_vlm_drafter,
    is_hub_id,
    local_folder,
    read_header,
    read_tensors,
    vlm_drafter_family,
)
from mlatui.models.mx_typed import as_float, as_int, flat_arrays
from mlatui.run.drafts import (
    SUPPORTED,
    MTPDraft,
    MTPError,
    build_layer,
    load_mtp_draft,
    mtp_layer,
    sanitize_layer,
)

SIDECAR = "mtp.safetensors"
GEOMETRY = (
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "vocab_size",
    "kv_lora_rank",
    "q_lora_rank",
    "qk_nope_head_dim",
    "qk_rope_head_dim",
    "v_head_dim",
    "n_routed_experts",
    "n_shared_experts",
    "num_experts_per_tok",
    "moe_intermediate_size",
)
CHECK_PROMPT = (
    "Speculative decoding drafts a few tokens cheaply and lets the large model verify them "
    "in one step. The draft here is the model's own multi-token prediction head, which"
)

PROMPT_TOKENS = 32  # enough context for the head; short enough for a big model on a laptop
Say = Callable[[str], None]


class ExtractError(ValueError):
    """One line: why nothing was extracted, and what to do."""


# A batched verify and a one-token step round differently in low precision; two tokens whose
# logits lie within a few bf16 ulps (0.125 at magnitude 16-32) may swap between the two runs.
NEAR_TIE_LOGITS = 0.25
# A trained MTP head is accepted well above this (the embedded model's: ~0.6); a head read from
# the wrong layer, or nothing learnt, stays near 0.
MIN_ACCEPTANCE = 0.2


@dataclass(frozen=True)
class SelfCheck:
    prompt_tokens: int
    proposed: int
    accepted: int
    matches_greedy: bool  # the drafted run emitted exactly the target's greedy tokens
    diverged_at: int | None = None  # the first new token where the two runs differ
    margin: float | None = None  # the target's top-2 logit margin there (plain greedy run)

    @property
    def acceptance(self) -> float:
        return self.accepted / self.proposed if self.proposed else 0.0

    @property
    def near_tie(self) -> bool:
        return self.margin is not None and self.margin <= NEAR_TIE_LOGITS

    @property
    def plausible(self) -> bool:
        return self.acceptance >= MIN_ACCEPTANCE

    @property
    def passed(self) -> bool:
        """The head is right: accepted as a trained head is, and the drafted run emits the
        target's greedy tokens except where rounding can swap a near-tie."""
        return self.plausible and (self.matches_greedy or self.near_tie)

    def line(self) -> str:
        said = [
            f"self-check: {self.accepted}/{self.proposed} drafts accepted "
            f"({self.acceptance:.0%}) on a {self.prompt_tokens}-token prompt"
        ]
        if self.matches_greedy:
            said.append("same tokens as plain greedy")
        elif self.margin is not None:
            tie = (
                "a near-tie: rounding, not the head"
                if self.near_tie
                else f"not a near-tie (<= {NEAR_TIE_LOGITS}): the drafted run is wrong"
            )
            said.append(
                f"differs from plain greedy from new token {self.diverged_at}, where the "
                f"target's top-2 logits are {self.margin:.3g} apart ({tie})"
            )
        if not self.plausible:
            said.append(
                f"FAILED: acceptance below {MIN_ACCEPTANCE:.0%} is implausibly low for a trained "
                "head (the wrong layer, or a checkpoint that learnt nothing: --no-check skips this)"
            )
        elif not self.passed:
            said.append("FAILED")
        return ", ".join(said)


def judge(
    prompt_tokens: int,
    want: list[int],
    margins: list[float],
    got: list[int],
    drafts: tuple[int, int],
) -> SelfCheck:
    """The self-check's verdict from the plain greedy tokens (and the target's top-2 margin at
    each) and the drafted run's tokens and (proposed, accepted) drafts."""
    proposed, accepted = drafts
    at = next((i for i, (a, b) in enumerate(zip(want, got, strict=True)) if a != b), None)
    margin = None if at is None else margins[at]
    return SelfCheck(prompt_tokens, proposed, accepted, at is None, at, margin)


@dataclass(frozen=True)
class Extracted:
    sidecar: Path
    provenance: Path
    source: str
    revision: str | None
    layer: int
    tensors: int
    quantization: str
    files_read: tuple[str, ...]
    notes: tuple[str, ...] = ()
    check: SelfCheck | None = field(default=None)


def target_folder(into: str | Path) -> tuple[Path, dict[str, Any]]:
    """FOLDER and its config, or a one-line refusal when it is not an mlx model folder."""
    folder = local_folder(into)  # a hub id: its snapshot in the hub cache
    hint = "give the folder `mlx_lm convert` wrote (config.json + *.safetensors)"
    if not folder.is_dir():
        raise ExtractError(f"{into}: no such folder — {hint}")
    try:
        config = json.loads((folder / "config.json").read_text())
    except (OSError, ValueError):
        raise ExtractError(
            f"{into}: not an mlx model folder (no readable config.json) — {hint}"
        ) from None
    shards = sorted(p for p in folder.glob("*.safetensors") if p.name != SIDECAR)
    if not shards:
        raise ExtractError(f"{into}: not an mlx model folder (no *.safetensors weights) — {hint}")
    family = str(text_config(config).get("model_type", config.get("model_type", "?")))
    if family not in SUPPORTED:
        raise ExtractError(
            f"{into}: a {family} model; MTP heads are extracted for {', '.join(SUPPORTED)} models"
        )
    layer = int(text_config(config)["num_hidden_layers"])
    prefix = f"model.layers.{layer}."
    for path in shards:
        try:
            if any(k.startswith(prefix) for k in read_header(path)):
                raise ExtractError(
                    f"{into}: already holds its MTP layer {prefix}* in {path.name} — nothing to extract"
                )
        except SafetensorsError as e:
            raise ExtractError(str(e)) from None
    return folder, config


def check_geometry(source: str, source_cfg: dict[str, Any], folder: Path, cfg: dict) -> None:
    mine, theirs = text_config(cfg), text_config(source_cfg)
    for key in GEOMETRY:
        if key in mine and key in theirs and mine[key] != theirs[key]:
            raise ExtractError(
                f"{source} does not match {folder}: {key} {theirs[key]} vs {mine[key]} — "
                "extract from the checkpoint this folder was converted from"
            )


def read_source_layer(
    src: CheckpointSource, layer: int, digests: dict[str, str]
) -> dict[str, mx.array]:
    """The source's `model.layers.{layer}.*` tensors, layer-local names; only the shards
    holding them are opened, and only those tensors' bytes read."""
    prefix = f"model.layers.{layer}."
    local: dict[str, mx.array] = {}
    for shard in src.shards_for(prefix):
        path = src.file(shard)
        # the layer's own embed_tokens (DeepSeek-V3: 1.9 GB) copies the target's, which the
        # head uses: it is never read
        names = [
            k
            for k in read_header(path)
            if k.startswith(prefix) and not k.startswith(prefix + "embed_tokens.")
        ]
        read = read_tensors(path, names, digests)
        local.update({k[len(prefix) :]: v for k, v in read.items()})
    return local


def read_vlm_drafter(folder: Path, digests: dict[str, str]) -> dict[str, mx.array]:
    flat: dict[str, mx.array] = {}
    for path in sorted(folder.glob("*.safetensors")):
        flat.update(read_tensors(path, list(read_header(path)), digests))
    return from_vlm_drafter(flat)


def load_folder_model(folder: Path) -> nn.Module:
    """FOLDER's model, lazily (nothing is read until the self-check runs it)."""
    from mlx_lm.utils import load_model

    import mlatui.models

    mlatui.models.register()
    model, _ = load_model(folder, lazy=True)
    return model


@dataclass(frozen=True)
class _Target:
    """The mlx folder a head goes into, its config, and the layer index the head takes there."""

    folder: Path
    config: dict[str, Any]
    layer: int

    @property
    def prefix(self) -> str:
        return f"model.layers.{self.layer}."


def extract(
    source: str, into: str | Path, check: bool = True, say: Say = lambda _: None
) -> Extracted:
    folder, cfg = target_folder(into)
    target = _Target(folder, cfg, int(text_config(cfg)["num_hidden_layers"]))
    digests: dict[str, str] = {}
    src = CheckpointSource(source)
    local, vlm = _read_head(src, target, digests, say)
    model = load_folder_model(folder)
    layer, notes = _built_head(source, model, local, target)
    tensors = {target.prefix + k: v for k, v in flat_arrays(layer.parameters())}
    sidecar = folder / SIDECAR
    tmp = folder / (SIDECAR + ".partial.safetensors")
    mx.save_safetensors(str(tmp), tensors, metadata={"format": "mlx"})
    os.replace(tmp, sidecar)
    quant = _quant_label(layer)
    provenance = folder / PROVENANCE
    record = {
        **_source_record(src, target.layer, digests),
        "written_tensors": sorted(tensors),
        "quantization": quant,
        "sidecar_sha256": sha256(sidecar),
        "extracted_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "vlm_drafter": vlm,
    }
    provenance.write_text(json.dumps(record, indent=2) + "\n")
    say(f"wrote {sidecar} ({len(tensors)} tensors, {quant}) and {provenance.name}")
    result = Extracted(
        sidecar,
        provenance,
        source,
        src.revision,
        target.layer,
        len(tensors),
        quant,
        files_read=tuple(p.name for p in src.fetched),
        notes=tuple(notes),
    )
    if not check:
        return result
    verdict = self_check(folder, model)
    record["self_check"] = asdict(verdict)
    provenance.write_text(json.dumps(record, indent=2) + "\n")
    return replace(result, check=verdict)


def _read_head(
    src: CheckpointSource, target: _Target, digests: dict[str, str], say: Say
) -> tuple[dict[str, mx.array], bool]:
    """The source's MTP layer, layer-local names, and whether it came from an mlx-vlm drafter
    folder; refused in one line when the source has none or does not match the target."""
    source = src.ref
    try:
        vlm = None if is_hub_id(source) else vlm_drafter_family(Path(source).expanduser())
        source_cfg = src.config()
        if vlm is None and int(text_config(source_cfg).get("num_nextn_predict_layers") or 0) < 1:
            raise ExtractError(
                f"{source}: no MTP layer (its config.json has no num_nextn_predict_layers) — "
                "give the original checkpoint the folder was converted from"
            )
        check_geometry(source, source_cfg, target.folder, target.config)
        say(f"reading {target.prefix}* from {source}")
        if vlm is not None:
            local = read_vlm_drafter(Path(source).expanduser(), digests)
        else:
            local = read_source_layer(src, target.layer, digests)
    except (SourceError, SafetensorsError) as e:
        raise ExtractError(str(e)) from None
    if not any(k.startswith(("enorm.", "eh_proj.")) for k in local):
        raise ExtractError(
            f"{source}: no MTP layer (no {target.prefix}* tensors in its weights) — "
            "give the original checkpoint, not an mlx conversion of it"
        )
    return local, vlm is not None


def _built_head(
    source: str, model: nn.Module, local: dict[str, mx.array], target: _Target
) -> tuple[nn.Module, list[str]]:
    """The layer as the folder's model holds it (its sanitize, dtype and quantisation), and the
    notes on what was cast or quantised."""
    weights = sanitize_layer(model, local)
    layer = mtp_layer(
        type(model.model.layers[0]), model.args, target.layer, "shared_head.head.weight" in weights
    )
    try:
        notes = build_layer(model, layer, weights, target.config, target.layer)
    except ValueError as e:
        first = str(e).strip().splitlines()[0]
        raise ExtractError(
            f"{source}: MTP layer does not fit {target.folder}'s model: {first}"
        ) from None
    return layer, notes


def _source_record(src: CheckpointSource, layer: int, digests: dict[str, str]) -> dict[str, Any]:
    """Where the head came from, for the provenance file."""
    return {
        "source": src.ref,
        "revision": src.revision,
        "layer": layer,
        "source_files": [p.name for p in src.fetched],
        "source_tensors": dict(sorted(digests.items())),  # name -> sha256 of the stored bytes
    }


def self_check(folder: Path, model: nn.Module, new_tokens: int = 16) -> SelfCheck:
    """Load the head the way a run does (from the sidecar) and draft one token per step with
    the folder's model: its acceptance, and where the drafted run first leaves the target's own
    greedy tokens, the target's top-2 margin there (`judge`)."""
    try:
        draft = load_mtp_draft(folder, model)
    except MTPError as e:
        raise ExtractError(f"self-check: {e}") from None
    if draft is None:  # required=True raises instead; said for the type checker
        raise ExtractError(f"self-check: {folder}: no MTP head loaded")
    prompt = _prompt_ids(folder, model)
    want, margins = _greedy(model, prompt, new_tokens)
    got, proposed, accepted = draft_steps(model, draft, prompt, new_tokens)
    return judge(len(prompt), want, margins, got, (proposed, accepted))


def draft_steps(
    model: nn.Module, draft: MTPDraft, prompt: list[int], new_tokens: int
) -> tuple[list[int], int, int]:
    """Greedy speculative decoding with one MTP draft per step: (tokens, proposed, accepted)."""
    from mlx_lm.models.cache import make_prompt_cache, trim_prompt_cache

    cache = make_prompt_cache(model)
    ctx = mx.array([prompt[:-1]])
    _, hidden = draft.target_forward(model, ctx, cache)
    draft.prefill(ctx, hidden)
    last, h_before = prompt[-1], hidden[:, -1:]
    out: list[int] = []
    proposed = accepted = 0
    while len(out) < new_tokens:
        (d,) = draft.propose(last, 1, h_before)
        logits, hidden = draft.target_forward(model, mx.array([[last, d]]), cache)
        target = mx.argmax(logits[0], axis=-1)  # (2,)
        ok = d == as_int(target[0])
        proposed, accepted = proposed + 1, accepted + ok
        if not ok:
            trim_prompt_cache(cache, 1)
        draft.commit(int(ok), hidden[:, : int(ok) + 1])
        nxt = as_int(target[int(ok)])
        out += [d, nxt] if ok else [nxt]
        last, h_before = nxt, hidden[:, int(ok) : int(ok) + 1]
    return out[:new_tokens], proposed, accepted


def _greedy(model: nn.Module, prompt: list[int], n: int) -> tuple[list[int], list[float]]:
    """Plain greedy tokens and, at each, the gap between the target's two largest logits."""
    from mlx_lm.models.cache import make_prompt_cache

    cache = make_prompt_cache(model)
    logits = model(mx.array([prompt]), cache=cache)
    out: list[int] = []
    margins: list[float] = []
    for _ in range(n):
        row = logits[0, -1].astype(mx.float32)
        top2 = mx.sort(row)[-2:]  # (2,) ascending
        out.append(as_int(mx.argmax(row)))
        margins.append(as_float(top2[1] - top2[0]))
        logits = model(mx.array([[out[-1]]]), cache=cache)
    return out, margins


def _prompt_ids(folder: Path, model: nn.Module) -> list[int]:
    try:
        from mlx_lm.utils import load_tokenizer

        ids = list(load_tokenizer(folder).encode(CHECK_PROMPT))
    except Exception:  # noqa: BLE001 - a folder without a tokenizer still gets a check
        ids = []
    if len(ids) < 4:  # no (usable) tokenizer: a fixed id sequence inside the vocabulary
        vocab = int(model.args.vocab_size)
        ids = [(7 * i + 3) % vocab for i in range(PROMPT_TOKENS)]
    return ids[:PROMPT_TOKENS]


def _quant_label(layer: nn.Module) -> str:
    kinds = sorted(
        {
            f"{m.bits}-bit g{m.group_size}"
            for _, m in layer.named_modules()
            if hasattr(m, "scales") and hasattr(m, "bits")
        }
    )
    dtype = next(
        (v.dtype for k, v in flat_arrays(layer.parameters()) if k.endswith("norm.weight")), None
    )
    base = str(dtype).removeprefix("mlx.core.") if dtype is not None else "?"
    return f"{' + '.join(kinds)}, {base}" if kinds else f"unquantized {base}"
