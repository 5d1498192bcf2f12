"""Refuse, before any weight is read, a checkpoint whose MoE experts MLX cannot run on the CPU.

MLX's CPU `gather_mm` (unquantized MoE experts) supports float32 only: a bf16 or fp16 MoE folder
loads, then dies at its first step with `[GatherMM::eval] Currently only supports float32.`.
Quantized experts (`gather_qmm`) run in any float dtype. The safetensors headers say which
case a folder is, so the answer costs a few kB of reads.
"""

from __future__ import annotations

from pathlib import Path

from mlatui.models.safetensors_read import SafetensorsError, read_header

_HALF = {"BF16": "bfloat16", "F16": "float16"}
_EXPERT_MARKS = (".experts.", ".switch_mlp.", ".block_sparse_moe.")


def half_precision_experts(folder: Path) -> str | None:
    """'bfloat16' / 'float16' when the folder's MoE experts are stored unquantized in that
    dtype, else None (no experts, float32 experts, or quantized ones)."""
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
    """The one-line refusal for a half-precision MoE folder on the CPU, else None."""
    import mlx.core as mx

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
