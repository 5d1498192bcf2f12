"""SIGINT, SIGTERM and SIGHUP for every command: the first asks the run to stop after the step in
progress (what was measured is kept and the run ends normally: `run_end`, summary, exit status);
a second SIGINT (or any second stop signal) exits at once, after `on_second` (launch: restore the
terminal). Handlers run on the main thread, between bytecodes; they only set flags."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable
from enum import IntEnum
from types import FrameType
from typing import Any, TypeVar

from mlatui.errors import say

# what signal.signal takes and returns
Handler = Callable[[int, FrameType | None], Any] | int | signal.Handlers | None

T = TypeVar("T")


class Interrupted(Exception):
    """Raised between steps by a benchmark loop once a stop was asked for."""


def raise_if_set(stop: threading.Event) -> Callable[[], None]:
    """A `check_stop` for benchmark loops: raises Interrupted once `stop` is set."""

    def check() -> None:
        if stop.is_set():
            raise Interrupted("stopped")

    return check


def run_interruptibly(work: Callable[[], T], stop: threading.Event, poll_s: float = 0.05) -> T:
    """`work()` on a daemon thread; its result (or its exception) once it is done, or
    Interrupted as soon as `stop` is set. A minutes-long checkpoint read sits in C (mx.eval,
    safetensors reads) where no signal handler runs; this lets the caller stop at once and
    write what it must while the read is left to die with the process (it only reads). What
    `work` returns must be evaluated on its thread (MLX streams are per thread)."""
    box: dict[str, object] = {}

    def target() -> None:
        try:
            box["value"] = work()
        except BaseException as e:  # noqa: BLE001 - handed to the caller
            box["error"] = e

    thread = threading.Thread(target=target, name="mlatui-load", daemon=True)
    thread.start()
    while thread.is_alive():
        if stop.wait(poll_s):
            raise Interrupted("stopped while loading")
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box["value"]  # type: ignore[return-value]


class StopSignal(IntEnum):
    SIGINT = signal.SIGINT
    SIGTERM = signal.SIGTERM
    SIGHUP = signal.SIGHUP

    @property
    def exit_status(self) -> int:
        return 128 + int(self)


class StopOnSignals:
    """Context manager. `on_first(sig)` runs for the first stop signal (it must only set flags or
    hand work to another thread); `stop` (a threading.Event) is set too when given. A second
    signal runs `on_second(sig)` and exits with 128 + the signal number."""

    def __init__(
        self,
        stop: threading.Event | None = None,
        on_first: Callable[[StopSignal], None] | None = None,
        on_second: Callable[[StopSignal], None] | None = None,
        announce: bool = True,
    ):
        self.stop = stop
        self.on_first = on_first
        self.on_second = on_second
        self.announce = announce
        self.received: StopSignal | None = None
        self._previous: dict[int, Handler] = {}

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        sig = StopSignal(signum)
        if self.received is not None:
            if self.on_second is not None:
                try:
                    self.on_second(sig)
                except Exception:  # noqa: BLE001 - exiting at once whatever happens
                    pass
            say(f"mlatui: {sig.name} again: exiting now")
            os._exit(sig.exit_status)
        self.received = sig
        if self.stop is not None:
            self.stop.set()
        if self.announce:
            say(
                f"mlatui: {sig.name}: stopping after the current step, keeping what was measured "
                "(Ctrl-C again to quit at once)"
            )
        if self.on_first is not None:
            self.on_first(sig)

    def __enter__(self) -> StopOnSignals:
        if threading.current_thread() is threading.main_thread():
            for sig in StopSignal:
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()

    @property
    def exit_status(self) -> int | None:
        return self.received.exit_status if self.received is not None else None

    @property
    def stopped_by(self) -> StopSignal:
        """The signal that stopped the run (asked only once one has)."""
        if self.received is None:
            raise RuntimeError("no stop signal was received")
        return self.received
