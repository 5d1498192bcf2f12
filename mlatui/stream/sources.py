"""Event sources for the dashboard: a recording, the engine in a worker thread, or the engine in a
child process. None of them touches the UI: producers append to a deque, and the UI calls
`drain()` on its own fixed tick. All expose start(), drain(), stop() and `finished`.
A source says what it can do besides handing out events: `playback` (a recording's own clock,
with pause, single step, speed and seek: the ReplaySource itself) or nothing, and `live` (events
come from a run as it goes); the app asks these, never which class a source is.
Nothing here imports mlx or textual (the live source imports the engine only when started).
"""

from __future__ import annotations

import importlib
import os
import queue
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any, Protocol

from mlatui.config.outputs import new_record_path
from mlatui.config.run_plan import RunConfig, RunPlan
from mlatui.stream.events import ErrorEvent, Event, LogMessage, RunEnd
from mlatui.stream.recorder import Recorder, parse_line
from mlatui.stream.replay_source import ReplaySource

WAIT_S = 0.25  # how often a waiting engine looks at its stop flag


class DrawTurns:
    """The turns an in-process dashboard takes between the arms' calls: while it draws, no arm
    call starts (and it starts drawing only once the call in progress has ended), so no timed
    step shares the interpreter and the host with a redraw. On the 2-core CPU an L = 1 step that
    overlapped a redraw (36 ms median, up to 230 ms) took 1.8x its median, which doubled the
    spread of the L = 1 quads against headless and left the launch's L = 1 checks undecided.

    Either side waits a bounded time, so neither can stall the other: a draw that finds a long
    call (a decode block) draws beside it after `wait_s`, and arms held longer than `hold_s` by
    a draw that never ended (a stuck or closed UI) go on and end its turn."""

    def __init__(self, wait_s: float = 1.0, hold_s: float = 1.0) -> None:
        self.wait_s = wait_s
        self.hold_s = hold_s
        self._cond = threading.Condition()
        self._wanted = False
        self._drawing = False
        self._calls = 0  # arm calls in progress

    @property
    def busy(self) -> bool:
        """An arm call is in progress."""
        with self._cond:
            return self._calls > 0

    @property
    def drawing(self) -> bool:
        """A draw has its turn: no arm call starts."""
        with self._cond:
            return self._drawing

    def arm_call(self) -> _ArmCall:
        """An arm's call, entered before it takes the baton: waits while a draw has its turn."""
        return _ArmCall(self)

    def _enter_call(self) -> None:
        with self._cond:
            if not self._cond.wait_for(lambda: not (self._wanted or self._drawing), self.hold_s):
                self._wanted = self._drawing = False  # a draw that never ended loses its turn
            self._calls += 1

    def _leave_call(self) -> None:
        with self._cond:
            self._calls -= 1
            self._cond.notify_all()

    def begin_draw(self) -> bool:
        """From a thread that may block (never the UI's event loop): wait until no arm call is in
        progress and hold the next ones; False when `wait_s` passed first (draw anyway)."""
        with self._cond:
            self._wanted = True
            held = self._cond.wait_for(lambda: self._calls == 0, self.wait_s)
            self._wanted = False
            self._drawing = held
            self._cond.notify_all()
            return held

    def end_draw(self) -> None:
        """The drawing is on the screen: the arms go on."""
        with self._cond:
            self._drawing = False
            self._cond.notify_all()


DASHBOARD_IN_TURNS = "in process, drawing only between arm calls"  # the header's settings.dashboard


class _ArmCall:
    def __init__(self, turns: DrawTurns) -> None:
        self.turns = turns

    def __enter__(self) -> None:
        self.turns._enter_call()

    def __exit__(self, *exc: object) -> None:
        self.turns._leave_call()


class RunControl(threading.Event):
    """A live run's stop flag, with the one request a user can make of a run that has ended:
    more rounds of its undecided L = 1 checks (`+`). The engine takes it as its stop event; with
    `offer_more` it keeps the last arms loaded after its RunEnd and waits for a request or a
    stop. `turns`: those of a dashboard drawing in the engine's process (its arms keep them)."""

    def __init__(self, offer_more: bool = False, turns: DrawTurns | None = None) -> None:
        super().__init__()
        self.offer_more = offer_more
        self._asks: queue.Queue[int] = queue.Queue()
        self.turns = turns

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


Request = RunConfig | RunPlan  # a plan resolved once by the caller, or a request to resolve
Engine = Callable[[Request, Callable[[Event], None], threading.Event], str]
ENGINE = "mlatui.run.engine:run"


def load_engine(spec: str = ENGINE) -> Engine:
    module, _, name = spec.partition(":")
    engine: Engine = getattr(importlib.import_module(module), name or "run")
    return engine


class Source(Protocol):
    """What the app reads events from: the live engine, a child process, a recording, a
    followed file (the app cannot tell them apart)."""

    @property
    def kind(self) -> str: ...

    @property
    def record_path(self) -> Path | None: ...

    def start(self) -> None: ...

    def drain(self) -> list[Event]: ...

    def stop(self) -> None: ...

    @property
    def finished(self) -> bool: ...

    @property
    def playback(self) -> ReplaySource | None:
        """A recording's controls (pause, step, speed, seek); None for a run as it goes."""

    @property
    def live(self) -> bool:
        """Events come from a run as it goes (in this process, a child, a growing file)."""

    @property
    def turns(self) -> DrawTurns | None:
        """The turns the dashboard draws in, between the arms' calls; None where no engine runs
        in this process."""


class _Buffered:
    """Shared by the live sources: a deque the producer appends to, teed into a Recorder.
    `offer_more`: the engine keeps its arms after the run ends, for `+` (request_more)."""

    record_path: Path
    live = True
    playback = None
    turns: DrawTurns | None = None

    def __init__(self, record: str | os.PathLike[str] | None, offer_more: bool):
        self.record_path = Path(record) if record else new_record_path()
        self.offer_more = offer_more
        self._buffer: deque[Event] = deque()
        self._recorder: Recorder | None = None
        self._saw_end = False
        self.status: str | None = None
        self._t0 = time.monotonic()

    def _open_recorder(self) -> Recorder:
        self._t0 = time.monotonic()
        self._recorder = Recorder(self.record_path, on_error=self._recording_failed)
        return self._recorder

    def _recording_failed(self, message: str) -> None:
        # Shown in the dashboard (log + notification); the run goes on, the exit status says it.
        self._buffer.append(LogMessage(time.monotonic() - self._t0, "error", message))

    @property
    def recording_error(self) -> str | None:
        return self._recorder.error if self._recorder is not None else None

    def _emit(self, event: Event) -> None:
        # Called on the producer's thread: append and record, nothing else.
        if self._recorder is not None:
            self._recorder(event)
        self._buffer.append(event)
        if isinstance(event, RunEnd):
            self._saw_end = True

    def drain(self) -> list[Event]:
        out = []
        while True:
            try:
                out.append(self._buffer.popleft())
            except IndexError:
                return out

    def _close_recorder(self) -> None:
        if self._recorder is not None:
            self._recorder.close()

    @property
    def alive(self) -> bool:
        raise NotImplementedError

    def _ask_more(self, rounds: int) -> bool:
        raise NotImplementedError

    def request_more(self, rounds: int) -> bool:
        """Ask the ended run for `rounds` more rounds of its undecided checks; False when the
        engine is not waiting for one."""
        return self.offer_more and self.alive and self._saw_end and self._ask_more(rounds)


class LiveSource(_Buffered):
    """The engine on an in-process worker thread. `engine` defaults to mlatui.run.engine.run."""

    kind = "live"

    def __init__(
        self,
        config: Request,
        engine: Engine | None = None,
        record: str | os.PathLike[str] | None = None,
        offer_more: bool = False,
    ):
        super().__init__(record if record is not None else config.record, offer_more)
        self.config = config  # a plan when the caller resolved it (launch): the engine runs it
        self._engine = engine
        self.turns = DrawTurns()
        self._stop = RunControl(offer_more, self.turns)
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        engine = self._engine or load_engine()
        self._open_recorder()
        self._thread = threading.Thread(
            target=self._run, args=(engine,), name="mlatui-engine", daemon=True
        )
        self._thread.start()

    def _run(self, engine: Engine) -> None:
        t0 = time.monotonic()
        try:
            self.status = engine(self.config, self._emit, self._stop)
        except BaseException as e:  # the UI shows it; the recording keeps it
            self.status = "error"
            t = time.monotonic() - t0
            self._emit(ErrorEvent(t, f"{type(e).__name__}: {e}", "engine"))
            if not self._saw_end:
                self._emit(RunEnd(t, "error"))
        finally:
            if not self._saw_end:
                status = self.status or ("interrupted" if self._stop.is_set() else "error")
                self._emit(RunEnd(time.monotonic() - t0, status))

    def stop(self, timeout_s: float = 120.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)  # one MLX step cannot be interrupted
        self._close_recorder()

    def _ask_more(self, rounds: int) -> bool:
        self._stop.ask_more(rounds)
        return True

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    @property
    def finished(self) -> bool:
        # with offer_more the engine outlives its RunEnd, waiting for `+`: the run has ended
        ended = self._saw_end if self.offer_more else not self.alive
        return self._thread is not None and ended and not self._buffer


class ProcessSource(_Buffered):
    """The engine in a child process (`python -m mlatui.run.child`), events as JSONL over a pipe.
    Closing the child's stdin asks it to stop; it is terminated if it does not."""

    kind = "isolated"

    def __init__(
        self,
        config: Request,
        engine: str = ENGINE,
        record: str | os.PathLike[str] | None = None,
        env: dict[str, Any] | None = None,
        offer_more: bool = False,
    ):
        super().__init__(record if record is not None else config.record, offer_more)
        self.config = config
        self.engine = engine
        self.env = env
        self.proc: subprocess.Popen[str] | None = None
        self.stderr_tail: deque[str] = deque(maxlen=50)
        self._threads: list[threading.Thread] = []
        self._t0 = 0.0

    def start(self) -> None:
        self._open_recorder()
        cmd = [
            sys.executable,
            "-m",
            "mlatui.run.child",
            "--engine",
            self.engine,
            *(
                ["--plan", self.config.to_wire()]
                if isinstance(self.config, RunPlan)
                else ["--config", self.config.to_json()]
            ),
            *(["--offer-more"] if self.offer_more else []),
        ]
        self.proc = proc = subprocess.Popen(
            cmd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=self.env,
            text=True,
            bufsize=1,
        )
        if proc.stdout is None or proc.stderr is None:
            raise RuntimeError("the engine process was started without its output pipes")
        readers = (
            ("events", self._read_events, (proc, proc.stdout)),
            ("stderr", self._read_stderr, (proc.stderr,)),
        )
        for name, target, args in readers:
            th = threading.Thread(
                target=target, args=args, name=f"mlatui-child-{name}", daemon=True
            )
            th.start()
            self._threads.append(th)

    def _read_events(self, proc: subprocess.Popen[str], stdout: IO[str]) -> None:
        path = Path("<child stdout>")
        for lineno, line in enumerate(stdout, start=1):
            if not line.strip():
                continue
            try:
                event = parse_line(path, lineno, line)
            except ValueError as e:
                self.stderr_tail.append(str(e))
                continue
            if isinstance(event, RunEnd):
                self.status = event.status
            self._emit(event)
        code = proc.wait()
        if not self._saw_end:
            t = time.monotonic() - self._t0
            tail = next((s for s in reversed(self.stderr_tail) if s.strip()), "")
            self._emit(
                ErrorEvent(
                    t,
                    f"engine process exited with status {code}" + (f": {tail}" if tail else ""),
                    "child",
                )
            )
            self._emit(RunEnd(t, "error"))
            self.status = "error"

    def _read_stderr(self, stderr: IO[str]) -> None:
        for line in stderr:
            self.stderr_tail.append(line.rstrip("\n"))

    def stop(self, timeout_s: float = 60.0) -> None:
        proc = self.proc
        if proc is not None and proc.poll() is None:
            try:
                if proc.stdin is not None:
                    proc.stdin.close()
            except OSError:
                pass
            try:
                proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                proc.terminate()
                try:
                    proc.wait(5)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        for th in self._threads:
            th.join(5)
        if proc is not None:
            for f in (proc.stdin, proc.stdout, proc.stderr):
                try:
                    if f is not None:
                        f.close()
                except (OSError, ValueError):
                    pass
        self._close_recorder()

    def _ask_more(self, rounds: int) -> bool:
        """As a line on the child's stdin."""
        stdin = self.proc.stdin if self.proc is not None else None
        try:
            if stdin is None:
                return False
            stdin.write(f"{MORE_LINE} {int(rounds)}\n")
            stdin.flush()
        except (OSError, ValueError):
            return False
        return True

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def finished(self) -> bool:
        if self.proc is None or self._buffer:
            return False
        if self.offer_more and self._saw_end:  # the child waits for `+` after its RunEnd
            return True
        return self.proc.poll() is not None and all(not th.is_alive() for th in self._threads)


__all__ = [
    "ENGINE",
    "LiveSource",
    "ProcessSource",
    "ReplaySource",
    "Source",
    "load_engine",
]
