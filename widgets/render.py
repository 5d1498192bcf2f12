"""Pure renderers: DashboardState (+ view info) -> rich Text, sized to the space given.

Every pane's `render()` hands off to one of these, so they are tested without a running app.
Invalid contexts (failed L = 1 check) are drawn grey everywhere.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text

from mlatui.dashboard_state import DashboardState
from mlatui.dashboard_views import pressure
from mlatui.threshold_text import threshold_text

GREY = "grey42"
ARM_COLOURS = {"stock": "red", "patched": "green"}
PRESSURE_STYLE = {"ok": "green", "high": "yellow", "critical": "bold red"}
BLOCKS = " ▁▂▃▄▅▆▇█"

DEMO_TEXT = (
    "A recorded run of the real engine. Left: stock mlx-lm, whose MLA attention takes the cheap "
    "absorbed path only when L == 1, so every speculative verify step (L ≥ 2) re-expands the whole "
    "cache. Right: the patched gate, which keeps the absorbed path up to the model's threshold L*. "
    "The key figure is the marginal cost of a 2nd query (L=2 − L=1): it grows with context in stock "
    "and stays flat in patched. The L=1 check proves both arms were measured fairly. "
    "? keys · space step · +/- speed · x hide this"
)


DEMO_SHORT = (
    "A recorded run. Left: stock mlx-lm re-expands the whole MLA cache on every verify step (L ≥ 2). "
    "Right: the patched gate keeps the cheap absorbed path. Page 2: the cost of a 2nd query vs "
    "context, and the L=1 fairness check. ? keys · x hide"
)


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


def fmt_ms(ms: float | None) -> str:
    if ms is None:
        return "–"
    a = abs(ms)
    return (
        f"{ms:.0f}"
        if a >= 100
        else f"{ms:.1f}"
        if a >= 10
        else f"{ms:.2f}"
        if a >= 1
        else f"{ms:.3f}"
    )


def fmt_bytes(n: float | None) -> str:
    if n is None:
        return "–"
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(n) >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n:.0f} B"


def fmt_duration(s: float | None) -> str:
    if s is None or s != s or s < 0:
        return "–"
    s = int(round(s))
    if s >= 3600:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s"


def fmt_context(c: int) -> str:
    return f"{c // 1024}K" if c >= 1024 and c % 1024 == 0 else str(c)


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
            text.append(BLOCKS[eighths], style=GREY if g else style)
        if row:
            text.append("\n")
    return text


def _threshold_at(table: dict, context: int | None) -> str:
    """The entry for the largest T <= context (the smallest T when none is)."""
    items = sorted((int(k), v) for k, v in table.items())
    pick = items[0]
    for k, v in items:
        if context is not None and k <= context:
            pick = (k, v)
    return f"{threshold_text(pick[1])} at T={fmt_context(pick[0])}"


def thresholds_text(t: dict, context: int | None) -> str:
    parts = []
    if t.get("formula_inf") is not None:
        parts.append(f"L* formula {threshold_text(t['formula_inf'])} (T→∞)")
    if t.get("formula_at"):
        parts.append(_threshold_at(t["formula_at"], context))
    cal = t.get("calibrated")
    parts.append(f"calibrated {_threshold_at(cal, context)}" if cal else "not calibrated")
    if t.get("policy"):
        parts.append(f"gate {t['policy']}")
    return " · ".join(parts)


def header_text(state: DashboardState, view: ViewInfo, width: int) -> Text:
    h = state.header
    t = Text(overflow="fold")
    mode = view.mode.upper()
    if view.mode in ("replay", "demo"):
        mode += f" ×{view.speed:g}"
        if view.position_s is not None and view.duration_s:
            mode += f" {view.position_s:.1f}/{view.duration_s:.1f}s"
    t.append(" mlatui ", style="bold reverse")
    t.append(f" {mode}", style="bold")
    if view.paused:
        t.append(" ⏸ PAUSED", style="bold yellow")
    if h is None:
        t.append("  waiting for the run header…")
        return t
    g = h.geometry
    t.append(f" │ {h.model}", style="bold")
    if width >= 100:
        t.append(f" ({h.model_type})")
    t.append(
        f" │ MLA r/n/v {g.get('kv_lora_rank')}/{g.get('qk_nope_head_dim')}/{g.get('v_head_dim')}"
    )
    if h.synthetic_acceptance:
        t.append(" │ ")
        t.append("random weights: acceptance synthetic", style="yellow")
    settings = h.settings or {}
    if settings.get("fill") == "random-latents":
        t.append(" │ ")
        t.append("random latents: timing only", style="yellow")
    if settings.get("null"):
        t.append(" │ ")
        t.append("A/A null run: both arms identical", style="bold yellow")
    t.append("\n")
    t.append(thresholds_text(h.thresholds, state.context))
    d = h.device
    t.append(f" │ {d.get('name', '?')}")
    if width >= 100 and d.get("architecture"):
        t.append(f" {d['architecture']}")
    blas = str(d.get("blas", "?"))
    t.append(" · BLAS ")
    if blas.startswith("bundled"):
        t.append("reference (slow)", style="yellow")
    else:
        t.append(blas.split(" ")[0])
    t.append(f" │ scenario {h.scenario.get('name', '?')}")
    bias = state.harness_bias
    if bias:
        t.append(" │ ")
        t.append(bias if width >= 140 else bias.split(" (")[0], style="cyan")
    if width >= 100:
        t.append(f" │ draft {h.draft}")
    t.append("\n")
    t.append_text(verdict_text(state, width))
    t.append("\n")
    t.append_text(phase_text(state, max(20, width)))
    return t


TONE_STYLES = {"good": "bold green", "bad": "bold red", "warn": "yellow", "info": ""}


def verdict_text(state: DashboardState, width: int) -> Text:
    """The verdict strip (mlatui.verdict_strip: the same line `--dump` and exports print)."""
    from mlatui.verdict_strip import verdict_parts

    parts = verdict_parts(state)
    t = Text()
    t.append("verdict ", style="bold reverse")
    if not parts:
        t.append(" no result yet", style="dim")
        return t
    long = sum(len(p.text) + 3 for p in parts) + 9 <= width
    for i, p in enumerate(parts):
        t.append(" · " if i else " ")
        t.append(p.text if long else p.short, style=TONE_STYLES[p.tone.value])
    return t


def phase_text(state: DashboardState, width: int) -> Text:
    p = state.phase
    t = Text()
    if state.error:
        t.append(f"ERROR: {state.error}", style="bold red")
        return t
    if not p.name:
        t.append(f"status {state.status}")
        return t
    label = f"phase {p.index + 1}/{p.total_phases} {p.name} ({p.kind}) "
    tail = f" {p.done}/{p.total}"
    if state.status == "running":
        tail += f" ETA {fmt_duration(p.eta_s)}"
    else:
        tail += f" · run {state.status}"
    bar_w = max(5, min(40, width - len(label) - len(tail) - 2))
    t.append(label)
    style = {"completed": "green", "error": "red", "interrupted": "yellow"}.get(
        state.status, "cyan"
    )
    t.append_text(bar(p.fraction, bar_w, style))
    t.append(tail)
    return t


def arm_text(state: DashboardState, arm: str, width: int, height: int) -> Text:
    """One arm's column: verify ms sparkline + now/median, acceptance, tok/s, gate calls.
    Narrow columns (< 56) get shorter labels and more lines; the sparkline takes what is left."""
    a = state.arms[arm]
    narrow = width < 56
    colour = ARM_COLOURS.get(arm, "cyan")
    top = Text()
    top.append("verify ms ", style="bold")
    top.append(f"now {fmt_ms(a.current_ms)}  median {fmt_ms(a.median_ms)}")
    if a.verify_ms and not narrow:
        top.append(f"  [{fmt_ms(min(a.verify_ms))}–{fmt_ms(max(a.verify_ms))}]", style="dim")
    lines: list[Text] = []
    acc = a.acceptance
    line = Text()
    line.append("acceptance" if not narrow else "accept", style="bold")
    if a.depth is not None:
        line.append(f" d{a.depth}")
    if state.synthetic:
        line.append(" (synthetic)", style="yellow")
    line.append(" P(i∣<i): " if not narrow else ": ")
    cells = ("–" if x is None else f"{x:.0%}" for x in acc)
    line.append("  ".join(f"{i + 1}:{c}" for i, c in enumerate(cells)) if acc else "–")
    if a.mean_accepted is not None:
        line.append(
            f"  ā {a.mean_accepted:.2f}/{a.depth}" if not narrow else f" ā{a.mean_accepted:.2f}"
        )
    if a.acceptance_rule and not narrow:
        rule = "exact match" if a.acceptance_rule == "exact-match" else "rejection sampling"
        line.append(
            f"  ({rule}" + (f", T={a.temperature:g})" if a.temperature else ", greedy)"),
            style="dim",
        )
    lines.append(line)
    line = Text()
    line.append("tok/s ", style="bold")
    plain = a.plain_tok_s or a.plain_live
    live = a.plain_tok_s is None and plain is not None
    line.append(f"plain {'~' if live else ''}{plain:.1f}" if plain else "plain –")
    for i, (depth, (tok_s, live)) in enumerate(a.tok_s_by_depth().items()):
        if narrow and i % 2 == 0:
            lines.append(line)
            line = Text("  ")
        else:
            line.append(" │ ")
        line.append(f"d{depth} " + ("~" if live else "") + f"{tok_s:.1f}")
        r = a.ratio(depth)
        if r:
            line.append(f" ×{r:.2f}", style="bold green" if r >= 1 else "bold red")
    lines.append(line)
    line = Text()
    line.append("gate calls " if not narrow else "", style="bold")
    line.append(f"absorbed {a.absorbed_calls:,} · materialised {a.materialised_calls:,}")
    lines.append(line)
    spark_h = max(1, height - 1 - len(lines))
    grey = [state.is_invalid(c, ph) for ph, c in a.verify_key]
    t = Text(no_wrap=True, overflow="ellipsis")
    t.append_text(top)
    t.append("\n")
    t.append_text(sparkline(list(a.verify_ms), grey, width, spark_h, colour))
    for line in lines:
        t.append("\n")
        t.append_text(line)
    return t


def marginal_series(state: DashboardState) -> tuple[dict[str, tuple[list, list, list, list]], int]:
    """Per arm: valid xs, ys and invalid xs, ys of the marginal cost (ms); and how many points
    were <= 0 (noise at small contexts), which a log axis cannot show."""
    out, dropped = {}, 0
    for arm in state.arms:
        vx, vy, ix, iy = [], [], [], []
        for c, d in state.marginal(arm):
            if d <= 0:
                dropped += 1
                continue
            bad = state.sweep_invalid(c)
            (ix if bad else vx).append(c)
            (iy if bad else vy).append(d)
        out[arm] = (vx, vy, ix, iy)
    return out, dropped


def marginal_plot(state: DashboardState, width: int, height: int) -> Text:
    """The key figure: median(L=2) − median(L=1) against context, log y, both arms."""
    if width < 20 or height < 5:
        return Text("(too small)")
    series, dropped = marginal_series(state)
    if not any(s[0] or s[2] for s in series.values()):
        return Text(
            "marginal cost of the 2nd query (L=2 − L=1) vs context\nwaiting for sweep steps…",
            style="dim",
        )
    import plotext as plt  # plotext keeps global state: build on the UI thread only

    plt.clf()
    plt.plotsize(width, height - (1 if dropped else 0))
    plt.theme("clear")
    plt.yscale("log")
    plt.xscale("log")
    contexts = sorted({x for s in series.values() for x in s[0] + s[2]})
    colours = {"stock": "red", "patched": "green"}
    for arm, (vx, vy, ix, iy) in series.items():
        if vx:
            plt.plot(vx, vy, label=arm, color=colours.get(arm, "cyan"), marker="braille")
        if ix:  # invalid contexts: grey, marked with the arm's initial
            plt.scatter(ix, iy, color="gray", marker=arm[0], label=f"{arm} (invalid)")
    if len(contexts) > 1:
        plt.xticks(contexts, [fmt_context(c) for c in contexts])
    plt.xlabel("context (tokens)")
    plt.ylabel("Δ ms")
    text = Text.from_ansi(plt.build(), no_wrap=True)
    if dropped:
        text.append(
            f"\n{dropped} point(s) ≤ 0 ms not on the log axis (see the L=1 table)", style="dim"
        )
    return text


def validity_text(state: DashboardState, width: int) -> Text:
    """Per (phase, context): both arms' L = 1 medians and the verdict; the sweep's marginal costs."""
    t = Text(no_wrap=True, overflow="ellipsis")
    t.append(
        f"{'phase':<7}{'ctx':>5} {'L1 stock':>8} {'L1 patch':>8}  {'check':<9}{'Δ2 stock':>8} {'Δ2 patch':>8}\n",
        style="bold",
    )
    marg = {arm: dict(state.marginal(arm)) for arm in state.arms}
    checked = {c for (_, c) in state.validity}
    rows = sorted(state.validity.items(), key=lambda kv: (kv[1].t, kv[0][1]))
    rows += [((state.phase.name, c), None) for c in state.contexts() if c not in checked]
    for (phase, c), v in rows:
        s1 = v.stock_l1_ms if v else state.l_median("stock", c, 1)
        p1 = v.patched_l1_ms if v else state.l_median("patched", c, 1)
        row_style = GREY if v is not None and not v.valid else ""
        t.append(
            f"{phase[:6]:<7}{fmt_context(c):>5} {fmt_ms(s1):>8} {fmt_ms(p1):>8}  ", style=row_style
        )
        if v is None:
            t.append(f"{'…':<9}", style="dim")
        elif v.valid:
            t.append(f"{'✓ ' + format(v.diff_pct, '+.1f') + '%':<9}", style="green")
        elif v.verdict == "inconclusive":
            t.append(f"{'? ' + format(v.diff_pct, '+.1f') + '%':<9}", style="bold yellow")
        else:
            t.append(f"{'✗ ' + format(v.diff_pct, '+.1f') + '%':<9}", style="bold red")
        ms, mp = marg.get("stock", {}).get(c), marg.get("patched", {}).get(c)
        if state.phase_kinds.get(phase, "sweep") != "sweep":
            ms = mp = None
        t.append(f"{fmt_ms(ms):>8} {fmt_ms(mp):>8}\n", style=row_style)
    invalid = sorted({c for (_, c), v in state.validity.items() if v.verdict == "invalid"})
    unsure = sorted({c for (_, c), v in state.validity.items() if v.verdict == "inconclusive"})
    tol = next(iter(state.validity.values())).tolerance_pct if state.validity else 2.0
    if invalid:
        t.append(
            f"✗ invalid (L=1 check, ±{tol:g}%): {', '.join(map(fmt_context, invalid))}; greyed in charts"
            + ("\n" if unsure else ""),
            style="red",
        )
    if unsure:
        t.append(
            f"? inconclusive (CI straddles ±{tol:g}%): {', '.join(map(fmt_context, unsure))}; greyed in charts",
            style="yellow",
        )
    if state.validity and not invalid and not unsure:
        t.append("✓ every checked context valid", style="green")
    return t


def memory_text(state: DashboardState, width: int) -> Text:
    m = state.memory
    t = Text(no_wrap=True, overflow="ellipsis")
    if m is None:
        return Text("no memory sample yet", style="dim")
    limit = m.device_limit_bytes or m.system_total_bytes
    limit_name = "device limit" if m.device_limit_bytes else "RAM"
    mlx = m.mlx_active_bytes + m.mlx_cache_bytes
    level = pressure(mlx, limit)
    bar_w = max(6, min(30, width - 56))
    t.append("MLX active+cache ", style="bold")
    t.append_text(bar(mlx / limit if limit else 0, bar_w, PRESSURE_STYLE[level]))
    t.append(f" {fmt_bytes(mlx)} / {fmt_bytes(limit)} {limit_name}\n")
    t.append(
        f"  active {fmt_bytes(m.mlx_active_bytes)} · cache {fmt_bytes(m.mlx_cache_bytes)} · peak {fmt_bytes(m.mlx_peak_bytes)}\n"
    )
    used = m.system_total_bytes - m.system_available_bytes
    sys_level = pressure(used, m.system_total_bytes)
    t.append("system used      ", style="bold")
    t.append_text(
        bar(
            used / m.system_total_bytes if m.system_total_bytes else 0,
            bar_w,
            PRESSURE_STYLE[sys_level],
        )
    )
    t.append(f" {fmt_bytes(m.system_available_bytes)} free of {fmt_bytes(m.system_total_bytes)}\n")
    t.append("process RSS ", style="bold")
    t.append(f"{fmt_bytes(m.process_rss_bytes)} ")
    rss = list(state.rss_history)
    t.append_text(sparkline(rss, [False] * len(rss), max(4, min(24, width - 40)), 1, "cyan"))
    t.append("  swap ", style="bold")
    t.append(fmt_bytes(m.swap_used_bytes), style="yellow" if m.swap_used_bytes else "")
    return t


LEVEL_STYLE = {"info": "", "warning": "yellow", "error": "bold red"}


def log_text(state: DashboardState, height: int) -> Text:
    t = Text(overflow="fold")
    lines = list(state.log)[-max(1, height) :]
    for i, (ts, level, msg) in enumerate(lines):
        t.append(f"{ts:7.1f}s " if ts is not None else " " * 9, style="dim")
        t.append(msg, style=LEVEL_STYLE.get(level, ""))
        if i < len(lines) - 1:
            t.append("\n")
    return t
