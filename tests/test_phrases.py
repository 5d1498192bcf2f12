"""The one place interval texts and L = 1 check words are made (mlatui.stream.phrases)."""

from __future__ import annotations

import math
import re
from pathlib import Path

from mlatui.stream.event_base import Interval
from mlatui.stream.phrases import (
    check_mark,
    check_not_passed,
    check_word,
    ci_text,
    interval_text,
    pct_ends,
)

ROOT = Path(__file__).resolve().parent.parent


def test_one_interval_format_everywhere():
    assert ci_text(1.0031, 0.9942, 1.0113, 3) == "1.003 [0.994, 1.011]"
    assert ci_text(1.224, 1.161, 1.452, 2, "×") == "1.22× [1.16, 1.45]"
    assert ci_text(0.6123, 0.598, 0.64, 3) == "0.612 [0.598, 0.640]"


def test_a_missing_end_leaves_the_median_and_no_median_a_dash():
    assert ci_text(1.5, None, 2.0, 1, "x") == "1.5x"
    assert ci_text(None, 1.0, 2.0) == ci_text(math.nan, 1.0, 2.0) == "-"
    assert interval_text(None) == "-"
    assert interval_text(Interval(150.0, 150.0, 150.0, 0), 1, " tok/s") == "150.0 tok/s"
    assert (
        interval_text(Interval(150.0, 140.0, 160.0, 4), 1, " tok/s") == "150.0 tok/s [140.0, 160.0]"
    )
    assert pct_ends(Interval(1.012, 0.977, 1.026, 4)) == "[-2.3, +2.6]"


def test_check_marks_and_words():
    assert [check_mark(v) for v in ("valid", "invalid", "inconclusive", "pending")] == [
        "✓",
        "✗",
        "?",
        "…",
    ]
    assert check_mark("valid", pooled=True) == "✓p" and check_mark("unknown") == "✗"
    assert check_word("valid") == "valid" and check_word("inconclusive") == "INCONCLUSIVE"
    line = check_not_passed(["sweep @ 64 inconclusive (+1.2%)"])
    assert line == (
        "L=1 check not passed (the paired L=1 ratio's 95% CI is not inside ±2%): "
        "sweep @ 64 inconclusive (+1.2%); those contexts are left out of every verdict"
    )


def test_no_printer_or_log_line_writes_a_median_and_its_interval_by_hand():
    """`{x.median:.3f} [{x.low:.3f}, {x.high:.3f}]` belongs to the phrase module alone."""
    by_hand = re.compile(r"\{[\w.\[\]'\"]*median[^}]*\}\s*[\[(][^\n]*\{[\w.]*low")
    found = []
    for path in sorted([*(ROOT / "mlatui").rglob("*.py"), *(ROOT / "widgets").rglob("*.py")]):
        if path.name == "phrases.py":
            continue
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if by_hand.search(line):
                found.append(f"{path.relative_to(ROOT)}:{n}")
    assert not found, found
