"""Loading as a phase: LoadStart before any weight is read, then LoadProgress as bytes come in.

mlx-lm's `load` reads every safetensors file in one call, so a watcher thread samples how much
the process has read (psutil's `read_chars`, Linux and Windows) or, where the OS does not say
(macOS), how much MLX has allocated; both are estimates and say so (`measure`). The last event,
after the load returned, is exact: every file was read.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from mlatui.stream.events import Event, LoadKind, LoadProgress, LoadStart

Counter = tuple[Callable[[], int], str]  # (bytes so far, what it measures)


def safetensors_files(*folders: str | Path) -> list[Path]:
    return sorted(p for f in folders for p in Path(f).expanduser().glob("*.safetensors"))


def read_counter() -> Counter:
    import psutil

    io_counters = getattr(psutil.Process(), "io_counters", None)  # psutil has none on macOS
    if io_counters is None:
        return memory_counter()
    try:
        io_counters().read_chars  # noqa: B018 - probes the field
    except (AttributeError, NotImplementedError, psutil.Error):
        return memory_counter()
    return (lambda: int(io_counters().read_chars)), "process read bytes"


def memory_counter() -> Counter:
    import mlx.core as mx

    return (lambda: int(mx.get_active_memory())), "mlx active memory"


def files_read(sizes: Sequence[int], done_bytes: int) -> int:
    """Files wholly covered by `done_bytes`, counting in load order (an estimate mid-load)."""
    n, total = 0, 0
    for s in sizes:
        total += s
        if total > done_bytes:
            break
        n += 1
    return n


@dataclass(frozen=True)
class Watched:
    """What a load reads: `what` ("model" | "draft model") from `source`, a checkpoint's
    safetensors `files`, or a random build's `params` and `total_bytes` (None: the files' sizes)."""

    what: str
    source: str
    kind: str = LoadKind.CHECKPOINT
    files: Sequence[Path] = ()
    params: int = 0
    total_bytes: int | None = None


class LoadWatch:
    """Emits LoadStart on entry, LoadProgress every `interval_s` while bytes move (as `counter`
    reads them; default: the process's reads), and a final exact LoadProgress(done=True) on exit."""

    def __init__(
        self,
        emit: Callable[[Event], None],
        clock: Callable[[], float],
        load: Watched,
        counter: Counter | None = None,
        interval_s: float = 0.25,
    ):
        self.emit, self.clock, self.what, self.source = emit, clock, load.what, load.source
        self.kind = load.kind
        self.sizes = [Path(f).stat().st_size for f in load.files]
        self.total = sum(self.sizes) if load.total_bytes is None else load.total_bytes
        self.params, self.interval_s = load.params, interval_s
        self.counter = counter
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.bytes_read = 0

    def __enter__(self) -> LoadWatch:
        self.emit(
            LoadStart(
                self.clock(),
                self.what,
                self.source,
                self.kind,
                len(self.sizes),
                self.total,
                self.params,
                tuple(self.sizes),
            )
        )
        read, measure = self.counter or read_counter()
        base = read()

        def sample() -> None:
            last = -1
            while not self._stop.wait(self.interval_s):
                now = max(0, read() - base)
                done = min(now, self.total) if self.total else now
                if done != last:
                    last = done
                    self.bytes_read = done
                    self.emit(
                        LoadProgress(
                            self.clock(), self.what, done, files_read(self.sizes, done), measure
                        )
                    )

        self._thread = threading.Thread(target=sample, name="mlatui-load-watch", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        ok = exc_type is None
        done = self.total if ok and self.total else self.bytes_read
        files = len(self.sizes) if ok else files_read(self.sizes, done)
        self.emit(LoadProgress(self.clock(), self.what, done, files, "exact" if ok else "", True))


WatchFactory = Callable[..., LoadWatch]


class GatedEmit:
    """`emit` until `close()`; after it, nothing. A stop during loading leaves the load thread
    running (it sits in C reads); what it reports after the engine gave up on it must not land
    after the run's end in the recording. The lock makes close() a hard line: no emit that
    started before it finishes after it."""

    def __init__(self, emit: Callable[[Event], None]) -> None:
        self._emit = emit
        self._lock = threading.Lock()
        self._open = True

    def __call__(self, event: Event) -> None:
        with self._lock:
            if self._open:
                self._emit(event)

    def close(self) -> None:
        with self._lock:
            self._open = False


def watcher(emit: Callable[[Event], None], clock: Callable[[], float]) -> WatchFactory:
    """`watch(what, source, kind=..., files=..., params=..., ...)` bound to a stream and clock."""

    def watch(what: str, source: str, counter: Counter | None = None, **load) -> LoadWatch:
        return LoadWatch(emit, clock, Watched(what, source, **load), counter)

    return watch


@contextmanager
def no_watch(*_args, **_kw) -> Iterator[None]:
    yield None
