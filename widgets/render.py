"""Pure renderers: DashboardState (+ view info) -> rich Text, sized to the space given.

Every pane's `render()` hands off to one of these, so they are tested without a running app.
Invalid contexts (failed L = 1 check) are drawn grey everywhere.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text

from mlatui.views.dashboard_state import DashboardState
from mlatui.views.dashboard_views import pressure
from mlatui.views.key_figure import FigureView, key_figure, mbu_figure
from mlatui.views.progress_view import MoreOffer, duration
from mlatui.views.units import bytes_text
from mlatui.views.verdict_strip import Part, fit_forms, verdict_parts, wrap_forms

from .figure import key_figure_text
from .header import SEPARATOR, fit_pieces, header_pieces, join_pieces, wrap_parts
from .palette import GREY_TEXT, Status, status_style, tone_style
from .stepchart import BLOCKS

PRESSURE = {"ok": Status.GOOD, "high": Status.WARN, "critical": Status.BAD}

DEMO_TEXT = (
    "A recorded run of the real engine. Left: stock mlx-lm, whose MLA attention takes the cheap "
    "absorbed path only when L == 1, so every speculative verify step (L ≥ 2) re-expands the whole "
    "cache. Right: the patched gate, which keeps the absorbed path up to the model's threshold L*. "
    "The key figure is the marginal cost of a 2nd query (L=2 − L=1): it grows steeply with context "
    "in stock and far less in patched. The L=1 check proves both "
    "arms were measured fairly. "
    "? keys · space step · +/- speed · x hide this"
)


DEMO_MEDIUM = (
    "A recorded run of the real engine. Left: stock mlx-lm re-expands the whole MLA cache on every "
    "verify step (L ≥ 2). Right: the patched gate keeps the cheap absorbed path up to L*. Below: "
    "the cost of a 2nd query vs context (steep in stock, far lower in patched) and the L=1 fairness "
    "check. ? keys · space step · +/- speed · x hide this"
)

DEMO_SHORT = (
    "A recorded run. Stock mlx-lm re-expands the whole MLA cache on every verify step (L ≥ 2); "
    "the patched gate keeps the cheap absorbed path. Page 1: the cost of a 2nd query vs context "
    "and the L=1 fairness check; page 2: the arms. ? keys · x hide"
)

DEMO_TINY = (
    "A recorded run: stock mlx-lm vs the patched MLA gate, each arm on page 2. ? keys · x hide"
)
DEMO_LINES = 4  # the explanation's rows (app.tcss: max-height 6 with its border)


def demo_text(width: int, compact: bool = False, lines: int = DEMO_LINES) -> str:
    """The longest explanation that wraps into `lines` rows at `width`, so its own `x hide`
    hint is never cut off."""
    import textwrap

    variants = (DEMO_SHORT,) if compact else (DEMO_TEXT, DEMO_MEDIUM)
    for text in (*variants, DEMO_TINY):
        if len(textwrap.wrap(text, max(10, width))) <= lines:
            return text
    return DEMO_TINY


@dataclass
class ViewInfo:
    """What the header says about the source rather than the run."""

    mode: str = "replay"  # live | isolated | replay | demo
    speed: float = 1.0
    paused: bool = False
    position_s: float | None = None
    duration_s: float | None = None
    record_path: str | None = None
    finished: bool = False
    now_s: float | None = None  # the run's clock (replay: recorded time) for elapsed and stalls
    # replay: (fraction of the replay, phase name) of each phase start, and where the replay is
    timeline: tuple[tuple[float, str], ...] = ()
    fraction: float | None = None
    offer: MoreOffer | None = None  # live, ended with undecided checks: what `+` would measure
    # replay: what is wrong with the recording (mlatui.stream.recorder), said on screen
    notices: tuple[str, ...] = ()


def bar(fraction: float, width: int, style: str = "") -> Text:
    fraction = max(0.0, min(1.0, fraction))
    full = int(fraction * width)
    part = int((fraction * width - full) * 8)
    s = "█" * full + (BLOCKS[part] if full < width and part else "")
    return Text(s.ljust(width, "░"), style=style)


def sparkline(
    values: list[float], greyed: list[bool], width: int, height: int = 1, style: str = ""
) -> Text:
    """Multi-row block sparkline of the last `width` values; greyed columns are drawn grey."""
    width, height = max(1, width), max(1, height)
    vals, grey = list(values)[-width:], list(greyed)[-width:]
    text = Text()
    if not vals:
        return Text("\n".join(" " * width for _ in range(height)))
    lo, hi = min(vals), max(vals)
    span = hi - lo or 1.0
    levels = [1 + round((v - lo) / span * (height * 8 - 1)) for v in vals]  # 1..8h
    for row in range(height - 1, -1, -1):
        for lvl, g in zip(levels, grey, strict=True):
            eighths = max(0, min(8, lvl - row * 8))
            text.append(BLOCKS[eighths], style=GREY_TEXT if g else style)
        if row:
            text.append("\n")
    return text


def header_text(state: DashboardState, view: ViewInfo, width: int, dark: bool = True) -> Text:
    """Line 1 model, line 2 gate/device/scenario, then the verdict strip (one or two lines)
    and the phase; pieces shorten or leave to fit `width` (the system pane has them all)."""
    h = state.header
    t = Text(no_wrap=True, overflow="ellipsis")
    mode = view.mode.upper()
    if view.mode in ("replay", "demo"):
        mode += f" ×{view.speed:g}"
        if view.position_s is not None and view.duration_s:  # the run's clock, as the log's
            mode += f" {view.position_s:.1f}/{view.duration_s:.1f}s"
    elif state.status in ("completed", "interrupted", "error"):
        # no longer live: the engine has stopped (the phase line says how the run ended)
        mode = {"completed": "DONE", "interrupted": "STOPPED"}.get(state.status, "FAILED")
    t.append(" mlatui ", style="bold reverse")
    t.append(f" {mode}", style="bold")
    if view.paused:
        t.append(" ⏸ PAUSED", style=status_style(Status.WARN, dark, bold=True))
    if h is None:
        load = state.progress.load
        if load is None:
            t.append("  waiting for the run header…")
        else:
            from mlatui.views.progress_view import loading_text

            t.append("  ")
            t.append(loading_text(load, view.now_s), style="cyan")
            quiet = state.progress.stalled_s(view.now_s)
            if quiet is not None and not load.done:
                t.append(
                    f"  no bytes read for {duration(quiet)}",
                    style=status_style(Status.WARN, dark, bold=True),
                )
        return t
    first, second = header_pieces(state, h, dark)
    t.append(SEPARATOR, style="dim")
    t.append_text(join_pieces(fit_pieces(first, width - t.cell_len)))
    t.append("\n")
    t.append_text(join_pieces(fit_pieces(second, width)))
    for line in verdict_lines(state, width, dark):
        t.append("\n")
        t.append_text(line)
    t.append("\n")
    cut = view.finished and view.mode in ("replay", "demo") and state.status == "running"
    t.append_text(phase_text(state, max(20, width), view.now_s, cut, dark))
    if view.notices:  # every line of it: a damaged recording must not pass for a whole run
        parts = [
            Text(n, style=status_style(Status.WARN, dark, bold=True))
            for n in ("⚠ " + view.notices[0], *view.notices[1:])
        ]
        for line in wrap_parts(parts, width, 2):
            t.append("\n")
            t.append_text(line)
    if view.offer is not None:  # its own line: the verdict above it has every column it needs
        offer = view.offer.text if len(view.offer.text) < width else view.offer.short
        t.append("\n")
        t.append(offer, style=status_style(Status.WARN, dark, bold=True))
    if view.timeline:
        t.append("\n")
        t.append_text(timeline_text(view, width))
    return t


def timeline_text(view: ViewInfo, width: int) -> Text:
    """The whole recording as one bar: each phase's span named, what has been replayed filled,
    and the keys that move along it."""
    keys = " Home/End ←/→ space"
    bar_w = max(10, width - len(keys) - 2)
    cells = ["─"] * bar_w
    names = [" "] * bar_w
    starts = [min(bar_w - 1, int(frac * bar_w)) for frac, _ in view.timeline]
    for col in starts:  # every phase's start first: a name stops short of the next one
        cells[col] = "┃"
    for col, (_, name) in zip(starts, view.timeline, strict=True):
        label = name.split("/")[-1]
        room = next((c for c in range(col + 1, bar_w) if cells[c] == "┃"), bar_w) - col - 1
        if len(label) > room:  # a short phase: its name cut with an ellipsis, or left out
            label = label[: room - 1] + "…" if room >= 3 else ""
        for i, ch in enumerate(label):
            names[col + 1 + i] = ch
    done = min(bar_w, round((view.fraction or 0.0) * bar_w))
    t = Text()
    for i in range(bar_w):
        ch = names[i] if names[i] != " " else cells[i]
        t.append(ch, style="bold cyan" if i < done else "dim")
    t.append(keys, style="dim")
    return t


def verdict_lines(state: DashboardState, width: int, dark: bool = True) -> list[Text]:
    """The verdict strip (mlatui.views.verdict_strip: the same line `--dump` and exports print):
    each part in its longest form that lets the strip fit one line, else two, else three,
    wrapped between parts; the shortest forms keep each speedup's CI and both Δ2 figures."""
    return strip_lines(verdict_parts(state), "verdict ", width, dark)


def strip_lines(
    parts: list[Part],
    label: str,
    width: int,
    dark: bool = True,
    tries: tuple[int, ...] = (1, 2, 3),
    empty: str = "no result yet",
) -> list[Text]:
    """Verdict parts after `label`, each in the longest form that fits the fewest lines `tries`
    allows, wrapped between parts under the first (`empty` when there are none)."""
    head = Text(label, style="bold reverse")
    if not parts:
        return [Text.assemble(head, (f" {empty}", "dim"))]
    indent = len(label) + 1
    for max_lines in tries:
        forms = fit_forms(parts, width, indent, max_lines)
        if len(wrap_forms(forms, width, indent)) <= max_lines:
            break
    styled = iter(
        Text(f, style=tone_style(p.tone, dark)) for f, p in zip(forms, parts, strict=True)
    )
    lines = []
    for i, row in enumerate(wrap_forms(forms, width, indent)):
        line = Text.assemble(head, " ") if i == 0 else Text(" " * indent)  # label alone reversed
        for j, _ in enumerate(row):
            line.append(" · " if j else "")
            line.append_text(next(styled))
        lines.append(line)
    return lines


def phase_text(
    state: DashboardState,
    width: int,
    now_s: float | None = None,
    cut: bool = False,
    dark: bool = True,
) -> Text:
    """Phase, bar, steps, elapsed, ETA (mlatui.views.progress_view) and the stall flag; `cut`:
    a replay at the end of a recording whose run never ended (no ETA: nothing more comes)."""
    from mlatui.views.progress_view import progress_text
    from mlatui.views.summary import progress_of

    p = state.phase
    t = Text()
    if state.error:  # wrapped, never cut: its remedy is usually at the end
        import textwrap

        lines = textwrap.wrap(f"ERROR: {state.error}", max(20, width - 1)) or ["ERROR"]
        t.append("\n".join(lines), style=status_style(Status.BAD, dark, bold=True))
        return t
    if not p.name:
        t.append(f"status {state.status}")
        return t
    running = state.status == "running" and not cut
    clock = now_s if now_s is not None and running else state.t  # a finished run: its length
    info = progress_text(state.progress, clock, running)
    figures = progress_of(state)
    label = f"phase {p.index + 1}/{p.total_phases} {p.name} ({p.kind}) "
    tail = f" {figures.steps_text}"
    tail += f" · {info.elapsed}" if info.elapsed else ""
    if running:
        eta = info.eta if len(label) + len(tail) + len(info.eta) + 10 <= width else info.eta_short
        tail += f" · {eta}"
    elif cut:
        tail += " · recording ends here"
    else:
        tail += f" · run {state.status}"
    bar_w = max(5, min(40, width - len(label) - len(tail) - 2))
    t.append(label)
    ended = {"completed": Status.GOOD, "error": Status.BAD, "interrupted": Status.WARN}
    style = status_style(ended[state.status], dark) if state.status in ended else "cyan"
    t.append_text(bar(figures.fraction, bar_w, style))
    t.append(tail)
    if running and info.stalled:
        t.append(" · ")
        t.append(info.stalled, style=status_style(Status.WARN, dark, bold=True))
    return t


def marginal_plot(
    state: DashboardState,
    width: int,
    height: int,
    dark: bool = True,
    view: FigureView = FigureView.MARGINAL,
) -> Text:
    """The key figure in its view (widgets.figure draws mlatui.views.key_figure's data, or
    mlatui.views.key_figure's)."""
    fig = mbu_figure(state) if view is FigureView.MBU else key_figure(state)
    return key_figure_text(fig, width, height, dark)


def run_lines(state: DashboardState) -> list[Text]:
    """Everything the header may shorten or leave out, in full."""
    h = state.header
    if h is None:
        return []
    d = h.device
    lines = [
        Text.assemble(("run ", "bold"), f"{h.model} ({h.model_type}) · draft {h.draft}"),
        Text(f"    {d.name} {d.architecture} · BLAS {d.blas}"),
        Text(
            f"    mlx {h.mlx_version} · mlx-lm {h.mlx_lm_version} · mlatui {h.mlatui_version}"
            f" · scenario {h.scenario.name}"
        ),
    ]
    if state.harness_bias:
        lines.append(Text(f"    {state.harness_bias}", style="cyan"))
    return lines


def memory_text(state: DashboardState, width: int, dark: bool = True) -> Text:
    mem = _memory_lines(state, width, dark)
    return Text("\n", no_wrap=True, overflow="ellipsis").join([*mem, *run_lines(state)])


def _memory_lines(state: DashboardState, width: int, dark: bool = True) -> list[Text]:
    m = state.memory
    t = Text(no_wrap=True, overflow="ellipsis")
    if m is None:
        return [Text("no memory sample yet", style="dim")]
    limit = m.device_limit_bytes or m.system_total_bytes
    limit_name = _limit_name(state) if m.device_limit_bytes else "RAM"
    mlx = m.mlx_active_bytes + m.mlx_cache_bytes
    level = pressure(mlx, limit)
    bar_w = max(6, min(30, width - 56))
    world = state.header.distributed if state.header is not None else None
    if world is not None and world.world_size > 1:
        t.append(f"rank 0 of {world.world_size} ", style="cyan")
    t.append("MLX active+cache ", style="bold")
    t.append_text(bar(mlx / limit if limit else 0, bar_w, pressure_style(level, dark)))
    t.append(f" {bytes_text(mlx)} / {bytes_text(limit)} {limit_name}\n")
    t.append(  # MLX's peak counts active memory only: said so beside the active+cache figure
        f"  active {bytes_text(m.mlx_active_bytes)} · cache {bytes_text(m.mlx_cache_bytes)}"
        f" · peak active {bytes_text(m.mlx_peak_bytes)}\n"
    )
    used = m.system_total_bytes - m.system_available_bytes
    sys_level = pressure(used, m.system_total_bytes)
    t.append("system used      ", style="bold")
    t.append_text(
        bar(
            used / m.system_total_bytes if m.system_total_bytes else 0,
            bar_w,
            pressure_style(sys_level, dark),
        )
    )
    t.append(  # the bar is the used share: say the used figure first, then what is free
        f" {bytes_text(used)} of {bytes_text(m.system_total_bytes)}"
        f" · {bytes_text(m.system_available_bytes)} free\n"
    )
    footprint = m.process_footprint_bytes  # macOS: GPU memory included, which RSS leaves out
    t.append("process RSS " if footprint is None else "process footprint ", style="bold")
    t.append(f"{bytes_text(m.process_rss_bytes if footprint is None else footprint)} ")
    rss = list(state.rss_history)
    t.append_text(sparkline(rss, [False] * len(rss), max(4, min(24, width - 40)), 1, "cyan"))
    t.append("  swap ", style="bold")
    t.append_text(_swap_text(m.swap_used_bytes, state.swap_start_bytes or 0, dark))
    return list(t.split("\n"))


def pressure_style(level: str, dark: bool = True) -> str:
    """Memory pressure in its status colour (ok, high, critical: the bar's length says it too)."""
    return status_style(PRESSURE[level], dark, bold=level == "critical")


def _limit_name(state: DashboardState) -> str:
    """Metal's limit is a recommendation (unified memory: other apps share it), not a limit."""
    metal = state.header is not None and state.header.device.backend == "metal"
    return "Metal working set (recommended)" if metal else "device limit"


def _swap_text(used: int, at_start: int, dark: bool = True) -> Text:
    """Swap as its change since the run started (a Mac swaps a little all the time): yellow only
    when it grew; with no swap at the start the change is all of it."""
    grown = used - at_start
    style = status_style(Status.WARN, dark) if grown > 0 else ""
    if not at_start:
        return Text(bytes_text(used), style=style)
    sign = "+" if grown >= 0 else "−"
    return Text(f"{sign}{bytes_text(abs(grown))} since start", style=style)


LEVEL_STATUS = {"warning": Status.WARN, "error": Status.BAD}


def log_text(state: DashboardState, dark: bool = True) -> Text:
    """Every kept log line (the pane scrolls and wraps; it follows the end)."""
    t = Text()
    for i, (ts, level, msg) in enumerate(state.log):
        if i:
            t.append("\n")
        t.append(f"{ts:7.1f}s " if ts is not None else " " * 9, style="dim")
        status = LEVEL_STATUS.get(level)
        t.append(msg, style=status_style(status, dark, level == "error") if status else "")
    return t
