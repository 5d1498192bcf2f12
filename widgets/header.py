"""The header's first two lines as pieces with short forms and priorities, fitted into a width
without cutting any: shorter forms first, then the least important pieces leave (their detail
is in a pane); a piece is never cut."""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text

from mlatui.gate.policy import threshold_text
from mlatui.host.distributed import world_label
from mlatui.stream.events import DeviceInfo, RunHeader, Thresholds
from mlatui.views.dashboard_state import DashboardState
from mlatui.views.units import fmt_context, limit_short, limit_text

from .palette import Status, status_style

SEPARATOR = " │ "


@dataclass(frozen=True)
class Piece:
    long: Text
    short: Text | None = None  # None: no shorter form
    priority: int = 1  # 1 is never dropped; higher numbers leave first


def piece(long: str | Text, short: str | Text | None = None, priority: int = 1, style: str = ""):
    def as_text(x):
        return x if isinstance(x, Text) else Text(x, style=style)

    return Piece(as_text(long), None if short is None else as_text(short), priority)


def _width(texts: list[Text], sep: str) -> int:
    return sum(t.cell_len for t in texts) + len(sep) * max(0, len(texts) - 1)


def fit_pieces(pieces: list[Piece], width: int, sep: str = SEPARATOR) -> list[Text]:
    """The chosen form of each kept piece, in order: all long if they fit; else shorten the
    least important first; else drop the least important (never priority 1)."""
    forms = [p.long for p in pieces]
    keep = list(range(len(pieces)))
    order = sorted(range(len(pieces)), key=lambda i: (-pieces[i].priority, -i))

    def chosen() -> list[Text]:
        return [forms[i] for i in keep]

    if _width(chosen(), sep) <= width:
        return chosen()
    for i in order:
        short = pieces[i].short
        if short is not None:
            forms[i] = short
            if _width(chosen(), sep) <= width:
                return chosen()
    for i in order:
        if pieces[i].priority > 1:
            keep.remove(i)
            if _width(chosen(), sep) <= width:
                return chosen()
    return chosen()


def join_pieces(texts: list[Text], sep: str = SEPARATOR) -> Text:
    out = Text()
    for i, t in enumerate(texts):
        if i:
            out.append(sep, style="dim")
        out.append_text(t)
    return out


def wrap_parts(parts: list[Text], width: int, first_indent: int, sep: str = " · ") -> list[Text]:
    """Parts on as many lines as they need, broken between parts; lines after the first are
    indented by `first_indent` so they line up under the first part."""
    lines: list[Text] = [Text()]
    used, fresh = first_indent, True
    for p in parts:
        if not fresh and used + len(sep) + p.cell_len > width:
            lines.append(Text(" " * first_indent))
            used, fresh = first_indent, True
        if not fresh:
            lines[-1].append(sep)
            used += len(sep)
        lines[-1].append_text(p)
        used += p.cell_len
        fresh = False
    return lines


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
) -> tuple[list[Piece], list[Piece]]:
    """Header lines 1 and 2 (of run header `h`) as pieces with short forms and priorities;
    what warns in the palette's warning colour."""
    warn, loud = status_style(Status.WARN, dark), status_style(Status.WARN, dark, bold=True)
    g = h.geometry
    geo = f"r/n/v {g.get('kv_lora_rank')}/{g.get('qk_nope_head_dim')}/{g.get('v_head_dim')}"
    first = [
        piece(f"{h.model} ({h.model_type})", model_short(h.model), style="bold"),
        piece(f"MLA {geo}", geo),
    ]
    settings = h.settings
    if h.synthetic_acceptance:
        first.append(
            piece("random weights: acceptance synthetic", "acceptance synthetic", style=warn)
        )
    if settings.fill == "random-latents":
        first.append(piece("random latents: timing only", "timing only", style=warn))
    if settings.null:
        first.append(piece("A/A null run: both arms identical", "A/A null run", style=loud))
    if settings.mtp_missing:
        first.append(piece(settings.mtp_missing, "MTP head missing", style=loud))
    d = h.device
    device_long = Text(f"{d.name} {d.architecture} · " if d.architecture else f"{d.name} · ")
    device_long.append_text(blas_text(d, dark))
    device_short = Text(f"{d.name} · ")
    device_short.append_text(blas_text(d, dark))
    bandwidth = d.bandwidth
    second = [
        piece(
            thresholds_text(h.thresholds, state.context),
            thresholds_short(h.thresholds, state.context),
        ),
        piece(device_long, device_short),
        piece(f"scenario {h.scenario.name}"),
    ]
    if bandwidth:
        second.append(piece(f"memory {limit_text(bandwidth)}", limit_short(bandwidth), priority=2))
    world = world_label(h.distributed)
    if world:
        second.append(piece(world, priority=1, style="cyan"))
    budget = state.budget_text
    if budget:
        short = budget.replace(": scaled down, see log", " ↓")
        style = warn if state.budget and state.budget.changes else ""
        second.append(piece(budget, short, priority=1, style=style))
    bias = state.harness_bias
    if bias:
        second.append(piece(bias, bias.split(" (")[0], priority=2, style="cyan"))
    second.append(piece(f"draft {h.draft}", priority=3))
    return first, second
