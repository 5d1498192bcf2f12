"""`bench indexer`'s hooks: its progress on stderr and its time limit (imported when the bench
runs: the bench's module imports mlx)."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

from mlatui.bench.indexer import BenchHooks, PartRun, Timing


class TimedProgress(BenchHooks):
    """The bench's hooks: per-sample progress on stderr (unless quiet) and the time limit, which
    leaves out parts and new pairs of rounds that would end past it."""

    def __init__(
        self,
        quiet: bool,
        check_stop: Callable[[], None] = lambda: None,
        max_seconds: float | None = None,
    ) -> None:
        self.quiet, self._check_stop = quiet, check_stop
        started = time.monotonic()
        self.deadline = None if max_seconds is None else started + max_seconds
        self.skipped: list[tuple[str, int]] = []
        self.last: tuple[int, float] | None = None  # (context, seconds) of the last part run
        self.part_start = started
        self.rounds = 0  # rounds of the part being sampled
        self.pair_end = started  # when the part's last pair of rounds (or the part) began

    def check_stop(self) -> None:
        self._check_stop()

    def decide_more(self, wants_more: bool) -> bool:
        """Past the limit no new pair of rounds, even below --rounds (the second round of a pair
        always runs, so each arm goes first equally often); the S=1 check may then stay
        undecided, and the report says so."""
        self.rounds += 1
        if self.rounds % 2 or self.deadline is None:
            return wants_more
        now = time.monotonic()  # a new pair must end by the limit, as the last one took
        pair_s, self.pair_end = now - self.pair_end, now
        return wants_more and now + pair_s <= self.deadline

    def skip(self, part: str, context: int) -> bool:
        """Leave a part out when it would end past the limit: its cost estimated from the last
        part's, scaled by context (every step reads the whole cache)."""
        now = time.monotonic()
        if self.deadline is not None and self.last is not None:
            last_context, last_s = self.last
            if now + last_s * context / last_context > self.deadline:
                self.skipped.append((part, context))
                return True
        self.part_start, self.rounds, self.pair_end = now, 0, now
        return False

    def warmup(self, part: str, context: int, arm: str, width: int, ms: float) -> None:
        if not self.quiet:
            print(
                f"{part} T={context} S={width} {arm}: {ms:.2f} ms (warm-up)",
                file=sys.stderr,
                flush=True,
            )

    def timing(self, part: str, context: int, timing: Timing) -> None:
        if not self.quiet:
            print(
                f"{part} T={context} round {timing.round + 1} S={timing.width} "
                f"{timing.arm}: {timing.ms:.2f} ms",
                file=sys.stderr,
                flush=True,
            )

    def done(self, result: PartRun) -> None:
        from mlatui.measure.indexer_records import control_note

        self.last = (result.context, time.monotonic() - self.part_start)
        print(f"{result.part} T={result.context}: {control_note(result)}", file=sys.stderr)
