"""Rejected by bound: a speculative setting that cannot beat plain decode, known from synced
steps alone, before any of its decode blocks run (pure Python).

A verify step of depth d runs L = d + 1 queries and emits at most d + 1 tokens (every draft
accepted, plus the bonus token), and the step costs at least its forward. So speculation at
depth d runs at most (d + 1) x plain_step_ms / verify_ms(L = d + 1) times plain decode, whatever
the draft and its acceptance. The tune and decode phases measure both steps per arm in their
verify rounds (the sampler's synced steps, paired within rounds) before their blocks.

The bound is judged by its upper end, taken conservatively:
- from the two medians' CIs: the largest plain step over the smallest verify step;
- from the paired ratio verify / plain of the same rounds (`vs_l1`): d + 1 over its CI's low end;
  the larger of the two is used;
- times RUNTIME_SLACK for what the runtime does that synced steps do not: the speedups measured
  through mlx-lm's runtime ran up to 1.24x the synced-step bound's upper end (and their medians
  up to 1.28x its point) over 23 tune recordings (2-core CPU and H200; 229 results; see
  docs/method.md): a pipelined plain decode pays some per-token
  overhead that a verify step pays once per d + 1 tokens, and hides graph building that a
  synced step times.
A setting whose upper end lies below 1.0 cannot win: its blocks are not run, and its result says
"rejected by bound: at most 0.05× (2 × plain ≤ 31.0 ms / verify ≥ 2.08 s, ×1.5 runtime
allowance)".
"""

from __future__ import annotations

from mlatui.stream.event_base import Interval
from mlatui.stream.events import SpeedupBound

RUNTIME_SLACK = 1.5
# The forecast predicts a rejection from mean costs (no CIs yet) only with this much room: a
# setting it wrongly expects to be rejected would make the forecast short by all its blocks.
FORECAST_CAUTION = 1.25


def speedup_bound(
    depth: int,
    plain: Interval,
    verify: Interval,
    paired: Interval | None = None,
    slack: float = RUNTIME_SLACK,
) -> SpeedupBound | None:
    """The bound of a setting of `depth` from one arm's plain step (L = 1) and verify step
    (L = depth + 1), medians with CIs over the same rounds, and `paired` their per-round ratio
    verify / plain; None when a figure is missing or not positive."""
    if depth < 1 or not all(x > 0 for x in (plain.median, plain.high, verify.median, verify.low)):
        return None
    tokens = depth + 1
    high = tokens * plain.high / verify.low
    verify_ms = verify.low
    if paired is not None and paired.low > 0 and tokens / paired.low > high:
        high = tokens / paired.low
        verify_ms = plain.high * paired.low  # the verify step the paired figure implies
    return SpeedupBound(
        tokens, plain.high, verify_ms, high * slack, tokens * plain.median / verify.median, slack
    )


def likely_rejected(depth: int, plain_ms: float, verify_ms: float) -> bool:
    """What a forecast expects from mean step costs: rejected only with FORECAST_CAUTION to spare."""
    if depth < 1 or plain_ms <= 0 or verify_ms <= 0:
        return False
    return (depth + 1) * plain_ms / verify_ms * RUNTIME_SLACK * FORECAST_CAUTION < 1.0


def _ms(ms: float) -> str:
    if ms >= 1000:
        return f"{ms / 1000:.2f} s"
    return f"{ms:.1f} ms" if ms < 100 else f"{ms:.0f} ms"


def rejection_text(b: SpeedupBound) -> str:
    """`rejected by bound: at most 0.05× (2 × plain ≤ 31.0 ms / verify ≥ 2.08 s, ×1.5 runtime
    allowance)`: the plain step's CI high end over the verify step's low end (not the medians a
    table shows)."""
    allowance = f", ×{b.slack:g} runtime allowance" if b.slack != 1 else ""
    steps = f"plain ≤ {_ms(b.plain_ms)} / verify ≥ {_ms(b.verify_ms)}"
    return f"rejected by bound: at most {b.value:.2f}× ({b.tokens} × {steps}{allowance})"
