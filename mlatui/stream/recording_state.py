"""What a read of a recording found wrong with it, said in one phrase each: the replay's header,
`replay --dump` and the warnings print these, so a damaged recording never looks like a whole
run (or a live one)."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from mlatui.stream.events import Event, MemorySample, RunEnd, Step

# how far an event's `t` may fall behind an earlier event's before the clock counts as going
# backwards: events are written in order but stamped on the threads that made them (the shipped
# recordings' worst is 22 ms, a memory sample; memory samples are left out of the check)
BACKWARDS_TOLERANCE_S = 0.5


class Damage(enum.Enum):
    TRUNCATED = "truncated"  # the last line stops mid-line
    NO_RUN_END = "no run_end"  # cut at a line boundary (or the end never written)
    SKIPPED = "skipped"  # damaged lines left out (--skip-bad)
    NEGATIVE_MS = "negative ms"
    REVERSED_TIME = "reversed time"
    RUN_END_TWICE = "run_end twice"


@dataclass(frozen=True)
class RecordingNotice:
    damage: Damage
    line: int  # the first line it concerns
    count: int = 1  # how many lines it concerns

    @property
    def text(self) -> str:
        more = f" (and {self.count - 1} more)" if self.count > 1 else ""
        return {
            Damage.TRUNCATED: f"recording ends here (truncated at line {self.line})",
            Damage.NO_RUN_END: f"no run_end: the run was cut off (after line {self.line})",
            Damage.SKIPPED: f"{self.count} damaged line{'s' if self.count > 1 else ''} skipped "
            f"(first at line {self.line})",
            Damage.NEGATIVE_MS: f"negative step time at line {self.line}{more}",
            Damage.REVERSED_TIME: f"timestamps go backwards at line {self.line}{more}",
            Damage.RUN_END_TWICE: f"run_end twice (again at line {self.line})",
        }[self.damage]


class RecordingCheck:
    """Fed every event of a recording in order with its line number; `notices` says what is
    wrong with the whole (nothing, for a whole run)."""

    def __init__(self) -> None:
        self.last_line = 0
        self._last_t: float | None = None
        self._firsts: dict[Damage, int] = {}
        self._counts: dict[Damage, int] = {}
        self._run_ends = 0

    def _found(self, damage: Damage, line: int) -> None:
        self._firsts.setdefault(damage, line)
        self._counts[damage] = self._counts.get(damage, 0) + 1

    def see(self, line: int, event: Event) -> None:
        self.last_line = line
        t = getattr(event, "t", None)
        if t is not None and not isinstance(event, MemorySample):
            if self._last_t is not None and t < self._last_t - BACKWARDS_TOLERANCE_S:
                self._found(Damage.REVERSED_TIME, line)
            self._last_t = t if self._last_t is None else max(t, self._last_t)
        if isinstance(event, Step) and event.ms < 0:
            self._found(Damage.NEGATIVE_MS, line)
        if isinstance(event, RunEnd):
            self._run_ends += 1
            if self._run_ends == 2:
                self._found(Damage.RUN_END_TWICE, line)

    def notices(
        self, truncated_line: int | None = None, skipped: int = 0, first_skipped: int = 0
    ) -> tuple[RecordingNotice, ...]:
        found = [RecordingNotice(d, line, self._counts[d]) for d, line in self._firsts.items()]
        head = []
        if truncated_line is not None:
            head.append(RecordingNotice(Damage.TRUNCATED, truncated_line))
        if not self._run_ends:
            head.append(RecordingNotice(Damage.NO_RUN_END, self.last_line))
        if skipped:
            head.append(RecordingNotice(Damage.SKIPPED, first_skipped, skipped))
        return (*head, *found)
