"""What every glyph and colour on the dashboard means: the `?` screen's Symbols page. Each
sample is drawn in the style the panes draw it with in the theme shown (the palette's status
and series colours, widgets.palette), and each colour is named where it means something."""

from __future__ import annotations

from dataclasses import dataclass

from mlatui.views.verdict_strip import Tone

from .figure import CLIPPED, CROSSOVER
from .help import Symbol, SymbolSection
from .palette import GREY as PLOT_GREY
from .palette import (
    GREY_TEXT,
    STATUS_WORDS,
    SeriesLook,
    Status,
    hex_colour,
    series_look,
    status_style,
    tone_style,
)
from .render import pressure_style


@dataclass(frozen=True)
class _Theme:
    """The theme a page is drawn in: its series looks and status styles."""

    dark: bool

    @property
    def stock(self) -> SeriesLook:
        return series_look(0, self.dark)

    @property
    def patched(self) -> SeriesLook:
        return series_look(1, self.dark)

    def status(self, s: Status, bold: bool = True) -> str:
        return status_style(s, self.dark, bold)


def symbols(dark: bool = True) -> tuple[SymbolSection, ...]:
    """The Symbols page in the theme's colours."""
    theme = _Theme(dark)
    return tuple(
        section(theme)
        for section in (
            _header,
            _verdict_and_speedups,
            _arm_panes,
            _key_figure,
            _l_1_checks,
            _memory,
        )
    )


def _header(t: _Theme) -> SymbolSection:
    return "header", (
        Symbol("REPLAY ×4096 12.0/239.8s", "bold",
               "a replay, its speed, and where it is on the run's own clock (LIVE, DONE, STOPPED or "
               "FAILED for a live run)"),
        Symbol("⏸ PAUSED", t.status(Status.WARN), "the display (a replay: its clock) is paused"),
        Symbol("r/n/v 512/128/128", "",
               "the MLA geometry: latent rank r, nope and value head dims n and v"),
        Symbol("L* 170", "",
               "the formula's absorbed-path limit as the context grows: a verify step of up to L* "
               "queries is cheaper absorbed"),
        Symbol("157@2K", "",
               "the formula's limit at the context now shown (here T = 2K); `cal 150@2K` is the "
               "calibrated one"),
        Symbol("budget 90 s ↓", t.status(Status.WARN, bold=False),
               "the run's time budget; ↓: the plan was scaled down to fit it (the log says what was "
               "cut)"),
        Symbol("BLAS reference (slow)", t.status(Status.WARN, bold=False),
               "the wheel's bundled BLAS: CPU matmuls several times slower than OpenBLAS"),
        Symbol("┃sweep──┃tune──", "bold cyan",
               "tall screens: the recording's phases, filled up to where the replay is"),
    )  # fmt: skip


def _verdict_and_speedups(t: _Theme) -> SymbolSection:
    return "verdict and speedups", (
        Symbol("1.124× [1.009, 1.157]", "",
               "a ratio with its 95% CI (seeded bootstrap over rounds); every ratio on screen comes "
               "with one"),
        Symbol("patched wins", tone_style(Tone.GOOD, t.dark),
               f"{STATUS_WORDS[Status.GOOD]}: the CI lies above 1, faster than plain decode (a check "
               "that passed, memory well under its limit)"),
        Symbol("stock rejected", tone_style(Tone.BAD, t.dark),
               f"{STATUS_WORDS[Status.BAD]}: the CI lies below 1, slower than plain decode (a check "
               "that failed, an error)"),
        Symbol("n.s.", tone_style(Tone.WARN, t.dark),
               f"{STATUS_WORDS[Status.WARN]}: undecided, the CI contains 1 (no significant gain or "
               "loss; a warning). Each colour comes with its word or glyph, so none is needed to "
               "read a status"),
        Symbol("★", t.status(Status.GOOD),
               "the setting the verdict names: the fastest whose CI lies above 1, at the context the"
               " tok/s are counted at"),
        Symbol("Δ2 @ 4K: 252 vs 14.0 ms", "",
               "the marginal cost of a 2nd query (L=2 − L=1) at that context, stock vs patched"),
        Symbol("s/p", "",
               "stock / patched, a paired ratio (each round's pair, then the median over rounds)"),
        Symbol("bound ≤ 0.70×", t.status(Status.BAD),
               "rejected by bound: its verify step costs too much for any acceptance to win, so its "
               "blocks were not run (no tok/s)"),
    )  # fmt: skip


def _arm_panes(t: _Theme) -> SymbolSection:
    return "arm panes", (
        Symbol("stock", f"bold {t.stock.style}",
               "the runtime as installed (the L == 1 gate): its step bars and its series in the key "
               "figure, in this colour"),
        Symbol("patched", f"bold {t.patched.style}",
               "the same code with the gate from the formula (or the policy named in the header), in"
               " this colour"),
        Symbol("mtp d2", "",
               "the MTP head drafting 2 tokens a step; draft-model d2: a separate draft model; d1 d2"
               " …: the draft depth"),
        Symbol("~37.1", "", "~: a live estimate, not yet measured over rounds"),
        Symbol("ā", "",
               "accepted drafts per verify step; P(i∣<i): acceptance at position i given the earlier"
               " ones"),
        Symbol("looping", t.status(Status.WARN),
               "the text repeats (few distinct 4-grams): its acceptance is a repeat's, left out of "
               "verdicts"),
    )  # fmt: skip


def _key_figure(t: _Theme) -> SymbolSection:
    return "key figure", (
        Symbol(f"{t.stock.filled} {t.patched.filled}", f"bold {t.stock.style}",
               "a measured median, stock's and patched's: a shape per series, so no colour is needed"
               " to tell them apart (an A/A run adds ■ ◆)"),
        Symbol("│", "", "its 95% CI"),
        Symbol(f"{t.stock.small} {t.patched.small}", t.stock.style,
               "measured, its L = 1 check still pending"),
        Symbol(f"{t.stock.hollow} {t.patched.hollow}", f"dim {t.stock.style}",
               "hollow: its L = 1 check inconclusive"),
        Symbol("✗", "dim", "its L = 1 check failed: grey, not comparable"),
        Symbol(CROSSOVER, hex_colour(PLOT_GREY), "where the formula's limit L* reaches 2"),
        Symbol(CLIPPED, "bold", "a CI that reaches ≤ 0 ms, off the log axis"),
    )  # fmt: skip


def _l_1_checks(t: _Theme) -> SymbolSection:
    return "L = 1 checks", (
        Symbol("✓", t.status(Status.GOOD, bold=False),
               "valid: at L = 1 both arms take the same branch, and the paired ratio's CI lies "
               "within ±2% of 1"),
        Symbol("✓p", t.status(Status.POOLED, bold=False),
               f"{STATUS_WORDS[Status.POOLED]}: valid by the pooled check: inconclusive alone, its "
               "own CI contains 1, and every context's L = 1 pairs pooled are valid"),
        Symbol("✗", t.status(Status.BAD), "invalid: the CI lies outside ±2%; left out of verdicts"),
        Symbol("?", t.status(Status.WARN),
               "inconclusive: more rounds could decide (`+` after a live run)"),
        Symbol("…", "dim", "not measured yet"),
        Symbol("grey", GREY_TEXT, "a context left out of every verdict"),
    )  # fmt: skip


def _memory(t: _Theme) -> SymbolSection:
    return "memory", (
        Symbol("ok", pressure_style("ok", t.dark), "MLX memory well under its limit"),
        Symbol("high", pressure_style("high", t.dark),
               "MLX memory near its limit (swap in this colour: swap in use)"),
        Symbol("critical", pressure_style("critical", t.dark),
               "at the limit: the next allocation may fail or swap"),
    )  # fmt: skip
