"""A run header as labelled fields (pure Python): the metadata block of every summary (`bench`,
the dashboard's export, `replay --dump`) and the header diff of `mlatui compare`."""

from __future__ import annotations

from dataclasses import dataclass

from mlatui.gate.threshold_text import threshold_text
from mlatui.host.distributed import world_label
from mlatui.stream.events import RunHeader


@dataclass(frozen=True)
class Field:
    key: str  # stable, for CSV rows
    label: str
    value: str


def _geometry(g: dict) -> str:
    if not g:
        return "unknown"
    text = f"r/n/v {g.get('kv_lora_rank')}/{g.get('qk_nope_head_dim')}/{g.get('v_head_dim')}"
    if g.get("num_heads"):
        text += f", {g['num_heads']} heads"
    if g.get("num_layers"):
        text += f", {g['num_layers']} layers"
    return text


def _threshold(h: RunHeader) -> str:
    th, st = h.thresholds or {}, h.settings or {}
    parts = [f"gate {st.get('threshold', th.get('policy', '?'))}"]
    if th.get("formula_inf") is not None:
        parts.append(f"L* formula {threshold_text(th['formula_inf'])} (T→∞)")
    parts.append("calibrated" if th.get("calibrated") else "not calibrated")
    if st.get("indexer"):
        parts.append(f"indexer {st['indexer']}")
    return ", ".join(parts)


def run_seed(h: RunHeader) -> int | None:
    """The seed the run used (Scenario.run_seed: the scenario's plus --seed); None if unrecorded."""
    parts = [
        x for x in ((h.scenario or {}).get("seed"), (h.settings or {}).get("seed")) if x is not None
    ]
    return sum(int(x) for x in parts) if parts else None


def _runtime_fields(st: dict) -> list[Field]:
    """The runtime's own gate (pre-fix or fixed, per class) and what each arm slot ran, in words;
    none in recordings made before arms followed the runtime."""
    out = []
    rt = st.get("runtime")
    if isinstance(rt, dict):
        forms = ", ".join(f"{c} {f}" for c, f in sorted((rt.get("gate_forms") or {}).items()))
        said = f"{rt.get('name', '?')} {rt.get('version', '?')}: {rt.get('state', '?')}"
        out.append(Field("runtime", "runtime", f"{said} ({forms})" if forms else said))
    arms = st.get("arms")
    if isinstance(arms, dict) and all(isinstance(arms.get(s), dict) for s in ("stock", "patched")):
        text = " · ".join(
            f"{slot} slot = {arms[slot].get('label', arms[slot].get('gate', '?'))}"
            for slot in ("stock", "patched")
        )
        out.append(Field("arms", "arms", text))
    return out


def header_fields(h: RunHeader) -> list[Field]:
    d, st, sc = h.device or {}, h.settings or {}, h.scenario or {}
    seed = run_seed(h)
    flags = []
    if h.synthetic_acceptance:
        flags.append("random weights (acceptance synthetic)")
    if st.get("fill") == "random-latents":
        flags.append("random latents (timing only)")
    if st.get("null"):
        flags.append("A/A null run")
    fields = [
        Field("model", "model", f"{h.model} ({h.model_type})"),
        Field("geometry", "MLA geometry", _geometry(h.geometry)),
        Field("draft", "draft", h.draft),
        *([Field("mtp_missing", "MTP head", st["mtp_missing"])] if st.get("mtp_missing") else []),
        Field(
            "device",
            "device",
            " ".join(str(x) for x in (d.get("name", "?"), d.get("architecture")) if x),
        ),
        Field("backend", "backend", str(d.get("backend", "?"))),
        Field("blas", "BLAS", str(d.get("blas", "?"))),
        *(
            [Field("blas_threading", "BLAS threading", str(d["blas_threading"]))]
            if d.get("blas_threading")
            else []
        ),
        Field("mlx", "mlx", h.mlx_version),
        Field("mlx_lm", "mlx-lm", h.mlx_lm_version),
        *_runtime_fields(st),
        Field("mlatui", "mlatui", h.mlatui_version),
        Field("python", "python", h.python_version),
        Field("scenario", "scenario", str(sc.get("name", "?"))),
        Field("seed", "seed", "–" if seed is None else str(seed)),
        Field("threshold", "threshold", _threshold(h)),
        Field("flags", "run flags", "; ".join(flags) or "none"),
        Field("started", "started", h.started_at),
        *(
            [Field("world", "distributed", f"{world} (heads and memory: rank 0's)")]
            if (world := world_label(getattr(h, "distributed", None)))
            else []
        ),
        Field("schema", "schema", str(h.schema_version)),
    ]
    if st.get("overrides"):
        ov = ", ".join(f"{k}={v}" for k, v in sorted(st["overrides"].items()))
        at = next(i for i, f in enumerate(fields) if f.key == "threshold") + 1
        fields.insert(at, Field("overrides", "overrides", ov))
    return fields


def header_lines(h: RunHeader) -> list[str]:
    """The metadata block as markdown bullets, with the stored harness bias where there is one."""
    from mlatui.store.harness_bias import describe

    bias = describe((h.settings or {}).get("harness_bias"))
    return [f"- {f.label}: {f.value}" for f in header_fields(h)] + ([f"- {bias}"] if bias else [])
