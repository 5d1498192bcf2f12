"""The header's first two lines as pieces with short forms and priorities (widgets.fit)."""

from __future__ import annotations

from rich.text import Text

from mlatui.gate.policy import threshold_text
from mlatui.host.distributed import world_label
from mlatui.stream.events import DeviceInfo, RunHeader, Thresholds
from mlatui.views.bandwidth_text import limit_short, limit_text
from mlatui.views.dashboard_state import DashboardState
from mlatui.views.rounding import fmt_context

from . import fit
from .palette import Status, status_style


def _threshold_at(table: dict[int, int], context: int | None) -> str:
    """L* at the current context: the table's entry there; between two entries, both (L* only
    grows with T); outside the table, its nearest entry at that entry's own T."""
    items = sorted(table.items())
    if context is None:
        return f"{threshold_text(items[0][1])} at T={fmt_context(items[0][0])}"
    below = [(k, v) for k, v in items if k <= context]
    above = [(k, v) for k, v in items if k >= context]
    if not below or not above:
        k, v = (above or below)[0] if not below else below[-1]
        return f"{threshold_text(v)} at T={fmt_context(k)}"
    low, high = below[-1][1], above[0][1]
    said = threshold_text(low) if low == high else f"{threshold_text(low)}–{threshold_text(high)}"
    return f"{said} at T={fmt_context(context)}"


def thresholds_text(t: Thresholds, context: int | None) -> str:
    parts = []
    if t.formula_inf is not None:
        parts.append(f"L* formula {threshold_text(t.formula_inf)} (T→∞)")
    if t.formula_at:
        parts.append(_threshold_at(t.formula_at, context))
    cal = t.calibrated
    parts.append(f"calibrated {_threshold_at(cal, context)}" if cal else "not calibrated")
    if t.policy:
        parts.append(f"gate {t.policy}")
    return " · ".join(parts)


def thresholds_short(t: Thresholds, context: int | None) -> str:
    parts = [f"L* {threshold_text(t.formula_inf)}"] if t.formula_inf is not None else []
    if t.formula_at:
        parts.append(_threshold_at(t.formula_at, context).replace(" at T=", "@"))
    if t.calibrated:
        parts.append("cal " + _threshold_at(t.calibrated, context).replace(" at T=", "@"))
    if t.policy:
        parts.append(f"gate {t.policy}")
    return " ".join(parts)


def model_short(model: str) -> str:
    """A checkpoint path's last folder; hub ids and names as they are."""
    return model.rstrip("/").rsplit("/", 1)[-1] if model.startswith(("/", ".", "~")) else model


def blas_text(device: DeviceInfo, dark: bool = True) -> Text:
    blas = device.blas
    if blas.startswith("bundled"):
        return Text("BLAS reference (slow)", style=status_style(Status.WARN, dark))
    return Text(f"BLAS {blas.split(' ')[0]}")


def header_pieces(
    state: DashboardState, h: RunHeader, dark: bool = True
) -> tuple[list[fit.Piece], list[fit.Piece]]:
    """Header lines 1 and 2 (of run header `h`) as pieces with short forms and priorities;
    what warns in the palette's warning colour."""
    warn, loud = status_style(Status.WARN, dark), status_style(Status.WARN, dark, bold=True)
    g = h.geometry
    geo = f"r/n/v {g.get('kv_lora_rank')}/{g.get('qk_nope_head_dim')}/{g.get('v_head_dim')}"
    first = [
        fit.piece(f"{h.model} ({h.model_type})", model_short(h.model), style="bold"),
        fit.piece(f"MLA {geo}", geo),
    ]
    settings = h.settings
    if h.synthetic_acceptance:
        first.append(
            fit.piece("random weights: acceptance synthetic", "acceptance synthetic", style=warn)
        )
    if settings.fill == "random-latents":
        first.append(fit.piece("random latents: timing only", "timing only", style=warn))
    if settings.null:
        first.append(fit.piece("A/A null run: both arms identical", "A/A null run", style=loud))
    if settings.mtp_missing:
        first.append(fit.piece(settings.mtp_missing, "MTP head missing", style=loud))
    d = h.device
    device_long = Text(f"{d.name} {d.architecture} · " if d.architecture else f"{d.name} · ")
    device_long.append_text(blas_text(d, dark))
    device_short = Text(f"{d.name} · ")
    device_short.append_text(blas_text(d, dark))
    bandwidth = d.bandwidth
    second = [
        fit.piece(
            thresholds_text(h.thresholds, state.context),
            thresholds_short(h.thresholds, state.context),
        ),
        fit.piece(device_long, device_short),
        fit.piece(f"scenario {h.scenario.get('name', '?')}"),
    ]
    if bandwidth:
        second.append(
            fit.piece(f"memory {limit_text(bandwidth)}", limit_short(bandwidth), priority=2)
        )
    world = world_label(h.distributed)
    if world:
        second.append(fit.piece(world, priority=1, style="cyan"))
    budget = state.budget_text
    if budget:
        short = budget.replace(": scaled down, see log", " ↓")
        style = warn if state.budget and state.budget.changes else ""
        second.append(fit.piece(budget, short, priority=1, style=style))
    bias = state.harness_bias
    if bias:
        second.append(fit.piece(bias, bias.split(" (")[0], priority=2, style="cyan"))
    second.append(fit.piece(f"draft {h.draft}", priority=3))
    return first, second
