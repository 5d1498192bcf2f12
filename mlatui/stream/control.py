"""A live run's stop flag, with the one request a user can make of a run that has ended: more
rounds of its undecided L = 1 checks (`+`). The engine takes it as its stop event; with
`offer_more` it keeps the last arms loaded after its RunEnd and waits for a request or a stop."""

from __future__ import annotations

import queue
import threading

WAIT_S = 0.25  # how often a waiting engine looks at its stop flag


class RunControl(threading.Event):
    def __init__(self, offer_more: bool = False) -> None:
        super().__init__()
        self.offer_more = offer_more
        self._asks: queue.Queue[int] = queue.Queue()

    def ask_more(self, rounds: int) -> None:
        """From the UI's thread: measure `rounds` more rounds of each undecided check."""
        self._asks.put(int(rounds))

    def next_ask(self, timeout_s: float = WAIT_S) -> int | None:
        """The next request's rounds, or None when none came within `timeout_s`."""
        try:
            return self._asks.get(timeout=timeout_s)
        except queue.Empty:
            return None


MORE_LINE = "more"  # `launch --isolate`: the parent writes "more N" to the child's stdin


def parse_ask(line: str) -> int | None:
    """The rounds of a "more N" line, or None for anything else."""
    word, _, rounds = line.strip().partition(" ")
    if word != MORE_LINE or not rounds.strip().isdigit():
        return None
    return int(rounds)
