"""What every glyph and colour on the dashboard means: the `?` screen's Symbols page. Each
sample is drawn in the style the panes draw it with (the constants are theirs)."""

from __future__ import annotations

from widgets.arm import ARM_COLOURS
from widgets.figure import CLIPPED, MARK_STYLE
from widgets.help import Symbol, SymbolSection
from widgets.render import GREY, POOLED_STYLE, PRESSURE_STYLE, TONE_STYLES

STOCK, PATCHED = ARM_COLOURS["stock"], ARM_COLOURS["patched"]

SYMBOLS: tuple[SymbolSection, ...] = (
    (
        "header",
        (
            Symbol(
                "REPLAY ×4096 12.0/239.8s",
                "bold",
                "a replay, its speed, and where it is on "
                "the run's own clock (LIVE, DONE, STOPPED or FAILED for a live run)",
            ),
            Symbol("⏸ PAUSED", "bold yellow", "the display (a replay: its clock) is paused"),
            Symbol(
                "r/n/v 512/128/128",
                "",
                "the MLA geometry: latent rank r, nope and value head dims n and v",
            ),
            Symbol(
                "L* 170",
                "",
                "the formula's absorbed-path limit as the context grows: a "
                "verify step of up to L* queries is cheaper absorbed",
            ),
            Symbol(
                "157@2K",
                "",
                "the formula's limit at the context now shown (here T = 2K); "
                "`cal 150@2K` is the calibrated one",
            ),
            Symbol(
                "budget 90 s ↓",
                "yellow",
                "the run's time budget; ↓: the plan was scaled "
                "down to fit it (the log says what was cut)",
            ),
            Symbol(
                "BLAS reference (slow)",
                "yellow",
                "the wheel's bundled BLAS: CPU matmuls several times slower than OpenBLAS",
            ),
            Symbol(
                "┃sweep──┃tune──",
                "bold cyan",
                "tall screens: the recording's phases; filled up to where the replay is",
            ),
        ),
    ),
    (
        "verdict and speedups",
        (
            Symbol(
                "1.124× [1.009, 1.157]",
                "",
                "a ratio with its 95% CI (seeded bootstrap "
                "over rounds); every ratio on screen comes with one",
            ),
            Symbol(
                "patched wins",
                TONE_STYLES["good"],
                "green: the CI lies above 1, faster than plain decode (or a check that passed)",
            ),
            Symbol(
                "stock rejected",
                TONE_STYLES["bad"],
                "red: the CI lies below 1, slower than plain decode (or a check that failed)",
            ),
            Symbol(
                "n.s. / ?",
                TONE_STYLES["warn"],
                "yellow: undecided, the CI contains 1 (no significant gain or loss)",
            ),
            Symbol(
                "★",
                "bold green",
                "the setting the verdict names: the fastest whose CI "
                "lies above 1, at the context the tok/s are counted at",
            ),
            Symbol(
                "Δ2 @ 4K: 252 vs 14.0 ms",
                "",
                "the marginal cost of a 2nd query (L=2 − L=1) at that context, stock vs patched",
            ),
            Symbol(
                "s/p",
                "",
                "stock / patched, a paired ratio (each round's pair, then the median over rounds)",
            ),
            Symbol(
                "bound ≤ 0.70×",
                "bold red",
                "rejected by bound: its verify step costs too "
                "much for any acceptance to win, so its blocks were not run (no tok/s)",
            ),
        ),
    ),
    (
        "arm panes",
        (
            Symbol(
                "stock",
                f"bold {STOCK}",
                "the runtime as installed (the L == 1 gate), its "
                "pane border and series in this colour",
            ),
            Symbol(
                "patched",
                f"bold {PATCHED}",
                "the same code with the gate from the formula (or the policy named in the header)",
            ),
            Symbol(
                "mtp d2",
                "",
                "the MTP head drafting 2 tokens a step; draft-model d2: a "
                "separate draft model; d1 d2 …: the draft depth",
            ),
            Symbol("~37.1", "", "~: a live estimate, not yet measured over rounds"),
            Symbol(
                "ā",
                "",
                "accepted drafts per verify step; P(i∣<i): acceptance at position "
                "i given the earlier ones",
            ),
            Symbol(
                "looping",
                "bold yellow",
                "the text repeats (few distinct 4-grams): its "
                "acceptance is a repeat's, left out of verdicts",
            ),
        ),
    ),
    (
        "key figure",
        (
            Symbol("●", f"bold {STOCK}", "a measured median (colour: the arm)"),
            Symbol("│", "", "its 95% CI"),
            Symbol("•", STOCK, "measured, its L = 1 check still pending"),
            Symbol("○", f"dim {STOCK}", "its L = 1 check inconclusive"),
            Symbol("✗", f"dim {STOCK}", "its L = 1 check failed: not comparable"),
            Symbol("┊", MARK_STYLE, "where the formula's limit L* reaches 2"),
            Symbol(CLIPPED, "bold", "a CI that reaches ≤ 0 ms, off the log axis"),
        ),
    ),
    (
        "L = 1 checks",
        (
            Symbol(
                "✓",
                "green",
                "valid: at L = 1 both arms take the same branch, and the "
                "paired ratio's CI lies within ±2% of 1",
            ),
            Symbol(
                "✓p",
                POOLED_STYLE,
                "valid by the pooled check: inconclusive alone, its "
                "own CI contains 1, and every context's L = 1 pairs pooled are valid",
            ),
            Symbol("✗", "bold red", "invalid: the CI lies outside ±2%; left out of verdicts"),
            Symbol(
                "?", "bold yellow", "inconclusive: more rounds could decide (`+` after a live run)"
            ),
            Symbol("…", "dim", "not measured yet"),
            Symbol("grey", GREY, "a context left out of every verdict"),
        ),
    ),
    (
        "memory",
        (
            Symbol("ok", PRESSURE_STYLE["ok"], "memory pressure low"),
            Symbol(
                "high", PRESSURE_STYLE["high"], "memory pressure high (yellow swap: swap in use)"
            ),
            Symbol(
                "critical",
                PRESSURE_STYLE["critical"],
                "the system is close to running out of memory",
            ),
        ),
    ),
)
