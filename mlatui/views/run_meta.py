"""A run header as labelled fields (pure Python): the metadata block of every summary (`bench`,
the dashboard's export, `replay --dump`) and the header diff of `mlatui compare`; and `--plan`,
the resolved plan the header keeps, printed without loading a model (`plan_lines`).

What each arm slot ran, as every surface names it: the slots are "stock" and "patched" in every
event; what runs in them follows the runtime (on pre-fix code the installed gate against
mlatui's formula, on fixed code the pre-fix gate, a counterfactual, against the installed one,
or any pair the user chose). The header's `settings.arms` records each slot's gate and its
words."""

from __future__ import annotations

import json
from dataclasses import dataclass

import msgspec

from mlatui.config.run_plan import RunPlan
from mlatui.gate.policy import threshold_text
from mlatui.host.distributed import world_label
from mlatui.stream.events import RunHeader
from mlatui.stream.run_settings import ArmSlot, ArmSource, RunSettings
from mlatui.views.units import limit_text


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
    th, st = h.thresholds, h.settings
    parts = [f"gate {st.threshold or th.policy or '?'}"]
    if th.formula_inf is not None:
        parts.append(f"L* formula {threshold_text(th.formula_inf)} (T→∞)")
    parts.append("calibrated" if th.calibrated else "not calibrated")
    if st.indexer:
        parts.append(f"indexer {st.indexer}")
    return ", ".join(parts)


def run_seed(h: RunHeader) -> int | None:
    """The seed the run used (Scenario.run_seed: the scenario's plus --seed); None if unrecorded."""
    parts = [x for x in (h.scenario.seed, h.settings.seed) if x is not None]
    return sum(parts) if parts else None


def _runtime_fields(st: RunSettings) -> list[Field]:
    """The runtime's own gate (pre-fix or fixed, per class) and what each arm slot ran, in words;
    none in recordings made before arms followed the runtime."""
    out = []
    rt = st.runtime
    if rt is not None:
        forms = ", ".join(f"{c} {f}" for c, f in sorted(rt.gate_forms.items()))
        said = f"{rt.name} {rt.version}: {rt.state}"
        out.append(Field("runtime", "runtime", f"{said} ({forms})" if forms else said))
    arms = st.arms
    if all(s in arms for s in SLOTS):
        text = " · ".join(f"{slot} slot = {arms[slot].label or arms[slot].gate}" for slot in SLOTS)
        out.append(Field("arms", "arms", text))
        out += _source_fields(arms)
    if st.prefill:
        out.append(Field("prefill", "prefill", st.prefill))
    return out


SLOTS = ("stock", "patched")
# what the L = 1 check asks when an arm runs another source tree's code
PATCH_QUESTION = "does this patch change plain decode?"


def arm_sources(settings: RunSettings | None) -> dict[str, ArmSource]:
    """Slot -> the code it ran (the header's settings.arms[slot].source); {} before arms
    recorded their code."""
    if settings is None:
        return {}
    return {s: src for s in SLOTS if (src := settings.arm_source(s)) is not None}


def is_patch_review(settings: RunSettings | None) -> bool:
    """Some arm ran another source tree's code (--arm-source): the L = 1 check then asks
    whether the patch changes plain decode, not whether the harness is fair. An A/A run's
    arms run one code in each pass: its check is the harness's, as always."""
    if settings is None or settings.null:
        return False
    return any(not src.installed for src in arm_sources(settings).values())


def l1_words(settings: RunSettings | None, verdict: str) -> str:
    """The L = 1 check's outcome in words for a patch review ("" otherwise): its arms run the
    same branch at L = 1 only if the patch leaves plain decode alone, so an invalid check is the
    patch's effect on plain decode, not a harness fault."""
    if not is_patch_review(settings):
        return ""
    said = {"valid": "no measurable change", "invalid": "it does"}.get(verdict, "undecided")
    return f"{PATCH_QUESTION} {said}"


def _code_text(src: ArmSource) -> str:
    text = f"{src.package} {src.version}, {src.given} ({src.path})"
    if src.commit:
        text += f", git {src.commit[:12]}{' dirty' if src.dirty else ''}"
    files = src.files
    listed = ", ".join(f"{name} {digest[:8]}" for name, digest in sorted(files.items()))
    return f"{text}; sha256 of {len(files)} model files: {listed}" if files else text


def differing_files(a: ArmSource, b: ArmSource) -> list[str]:
    """Model files whose hashes differ between two arms' code (or that only one ran)."""
    fa, fb = a.files, b.files
    return sorted(n for n in set(fa) | set(fb) if fa.get(n) != fb.get(n))


def _source_fields(arms: dict[str, ArmSlot]) -> list[Field]:
    """What code each slot ran, shown when a slot ran another source tree's code."""
    sources = {s: src for s in SLOTS if (src := arms[s].source) is not None}
    if all(src.installed for src in sources.values()):
        return []
    out = [Field(f"code_{s}", f"{s} slot code", _code_text(src)) for s, src in sources.items()]
    counted = [f"{s} slot: {arms[s].counters}" for s in SLOTS if arms[s].counters]
    if counted:
        out.append(Field("counters", "branch counters", "; ".join(counted)))
    if len(sources) == 2:
        diff = differing_files(sources["stock"], sources["patched"])
        out.append(
            Field(
                "code_diff",
                "code difference",
                f"the arms ran different code in {', '.join(diff)}"
                if diff
                else "none: both arms ran the same files",
            )
        )
    return out


def code_difference(a: RunHeader, b: RunHeader) -> str | None:
    """Whether two recordings ran different code, per slot, in words; None when either does
    not record its code."""
    sa, sb = arm_sources(a.settings), arm_sources(b.settings)
    if not sa or not sb:
        return None
    said = []
    for slot in SLOTS:
        if slot in sa and slot in sb:
            diff = differing_files(sa[slot], sb[slot])
            if diff:
                said.append(f"{slot} slot: {', '.join(diff)}")
    if not said:
        return "Code: both recordings ran the same model files in each slot."
    return "Code: the two recordings ran different code (" + "; ".join(said) + ")."


def header_fields(h: RunHeader) -> list[Field]:
    d, st = h.device, h.settings
    seed = run_seed(h)
    flags = []
    if h.synthetic_acceptance:
        flags.append("random weights (acceptance synthetic)")
    if st.fill == "random-latents":
        flags.append("random latents (timing only)")
    if st.null:
        flags.append("A/A null run")
    fields = [
        Field("model", "model", f"{h.model} ({h.model_type})"),
        Field("geometry", "MLA geometry", _geometry(h.geometry)),
        Field("draft", "draft", h.draft),
        *([Field("mtp_missing", "MTP head", st.mtp_missing)] if st.mtp_missing else []),
        Field(
            "device",
            "device",
            " ".join(x for x in (d.name, d.architecture) if x),
        ),
        Field("backend", "backend", d.backend),
        *([Field("bandwidth", "memory bandwidth", limit_text(d.bandwidth))] if d.bandwidth else []),
        Field("blas", "BLAS", d.blas),
        *(
            [Field("blas_threading", "BLAS threading", d.blas_threading)]
            if d.blas_threading
            else []
        ),
        *([Field("wired_limit", "wired memory", st.wired_limit)] if st.wired_limit else []),
        Field("mlx", "mlx", h.mlx_version),
        Field("mlx_lm", "mlx-lm", h.mlx_lm_version),
        *_runtime_fields(st),
        Field("mlatui", "mlatui", h.mlatui_version),
        Field("python", "python", h.python_version),
        Field("scenario", "scenario", h.scenario.name),
        Field("seed", "seed", "–" if seed is None else str(seed)),
        Field("threshold", "threshold", _threshold(h)),
        Field("flags", "run flags", "; ".join(flags) or "none"),
        Field("started", "started", h.started_at),
        *(
            [Field("world", "distributed", f"{world} (heads and memory: rank 0's)")]
            if (world := world_label(h.distributed))
            else []
        ),
        Field("schema", "schema", str(h.schema_version)),
    ]
    if st.overrides:
        ov = ", ".join(f"{k}={v}" for k, v in sorted(st.overrides.items()))
        at = next(i for i, f in enumerate(fields) if f.key == "threshold") + 1
        fields.insert(at, Field("overrides", "overrides", ov))
    return fields


def header_lines(h: RunHeader) -> list[str]:
    """The metadata block as markdown bullets, with the stored harness bias where there is one."""
    from mlatui.store import describe_bias as describe

    bias = describe(h.settings.harness_bias)
    return [f"- {f.label}: {f.value}" for f in header_fields(h)] + ([f"- {bias}"] if bias else [])


GATE_NAMES = {
    "stock": "pre-fix",
    "installed": "installed",
    "formula": "formula",
    "calibrated": "calibrated",
}
DEFAULT_PAIR = ("stock", "formula")  # pre-fix code's default: the slot names say it all


def slot_name(settings: RunSettings | None, slot: str) -> str:
    """A short name: the slot's own where the run is the classic stock vs patched (and in every
    recording made before arms were chosen), else the gate it ran ("pre-fix", "installed",
    "calibrated", "L≤8")."""
    arms = settings.arms if settings is not None else {}
    gates = tuple(arms[s].gate if s in arms else None for s in SLOTS)
    if not arms or gates == DEFAULT_PAIR or slot not in arms:
        return slot
    gate = arms[slot].gate
    return GATE_NAMES.get(gate, f"L≤{gate}" if gate.isdigit() else gate)


def slot_words(settings: RunSettings | None, slot: str) -> str | None:
    """The slot's gate in words ("pre-fix (L == 1, counterfactual)"); None where the recording
    names no arms."""
    arm = settings.arms.get(slot) if settings is not None else None
    return arm.label if arm is not None and arm.label else None


DEFAULT_ARMS = (
    "by the installed code's state (pre-fix: installed,formula; fixed: pre-fix,installed)"
)


def plan_lines(plan: RunPlan) -> list[str]:
    """The plan in words: one setting a line, then one line per phase."""
    s = plan.scenario
    arms = plan.arms
    if arms.arms is not None:
        arms_said = arms.arms
    elif arms.threshold is not None:
        arms_said = f"{DEFAULT_ARMS}, the patched slot's gate {arms.threshold}"
    else:
        arms_said = DEFAULT_ARMS
    lines = [
        f"scenario  {s.name} ({s.path})",
        f"model     {plan.model or s.model.path or s.model.source}"
        + (" (random weights)" if plan.random_weights else ""),
        f"draft     {plan.draft_model or s.draft.source.value}",
        f"arms      {arms_said}"
        + (" (A/A: both arms the same, each in turn)" if plan.null else ""),
        f"indexer   {arms.indexer or 'patched'}",
    ]
    lines += [f"source    {slot}: {path}" for slot, path in arms.sources.items()]
    budget = f"{plan.budget_s:.0f} s" if plan.budget_s > 0 else "none (the phases as written)"
    if plan.budget_s > 0 and plan.null:
        budget += ", not applied to an A/A"
    lines += [
        f"budget    {budget}",
        f"seed      {plan.seed} (scenario {s.seed} + --seed {plan.seed_offset})",
        f"fill      {plan.fill}",
        f"settle    {'on' if plan.settle else 'off'}; arm threads: {plan.arm_threads}",
        f"phases    {len(plan.phases)}",
    ]
    for p in plan.phases:
        contexts = ",".join(str(c) for c in p.contexts)
        shape = (
            f"widths {','.join(str(w) for w in p.widths)}"
            if p.kind.rules.timed_widths
            else f"tokens {p.tokens}"
        )
        rounds = f"reps {p.reps}" + (f" (max {p.max_rounds})" if p.max_rounds else "")
        lines.append(f"  {p.name:<12} {p.kind:<7} contexts {contexts}  {shape}  {rounds}")
    return lines


def print_plan(plan: RunPlan, fmt: str = "md") -> int:
    """Print the plan (JSON for `--format json`); nothing loads. Returns the exit status 0."""
    if fmt == "json":
        print(json.dumps(msgspec.to_builtins(plan.recorded()), indent=2))
    else:
        print("\n".join(plan_lines(plan)))
    return 0
