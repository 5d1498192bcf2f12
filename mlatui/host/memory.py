"""Memory samples: MLX allocator counters, the device's limit, process RSS (and on macOS its
physical footprint), system memory, swap.

The MLX memory queries are process-global (not per stream), so the sampler may run on its own
thread. It never touches the UI: it hands each `MemorySample` to `emit`, which must be cheap and
thread-safe (a queue put or a recorder write).

Wired memory as mlx-lm's own generate holds it: `mlx_lm.stream_generate` runs under
`wired_limit(model, [generation_stream])`, which on Metal raises the wired limit to the device's
recommended working set, so the weights stay resident instead of paging. mlatui calls
`generate_step` directly, so the engine enters that same context manager once both arms are
loaded (`wired_memory`) and leaves it after every arm's thread synced its own streams
(`sync_streams`: mlx-lm's thread-local `generation_stream`, where it leaves the next step in
flight, and the thread's default stream, where mlatui's MTP loop runs; a wired limit must not
change under an async eval). Where the device reports no recommended working set (CPU, CUDA)
mlx-lm sets nothing, and neither does this.
"""

from __future__ import annotations

import contextlib
import ctypes
import io
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import mlx.core as mx
import psutil
from mlx_lm.generate import generation_stream

from mlatui.stream.events import MemorySample

_process = psutil.Process()


def device_limit_bytes() -> int | None:
    """The accelerator's memory limit from `mx.device_info()`: Metal's recommended working set,
    CUDA's total memory, None on CPU (no separate device memory)."""
    info = mx.device_info()
    for key in ("max_recommended_working_set_size", "total_memory"):
        value = info.get(key)
        if value:
            return int(value)
    return None


class TaskVMInfo(ctypes.Structure):
    """The head of macOS's task_vm_info_data_t (<mach/task_info.h>) up to rev1's
    `phys_footprint`: the memory Activity Monitor charges to the process, Metal buffers included
    (on unified memory RSS leaves out what the GPU holds)."""

    _fields_ = [
        ("virtual_size", ctypes.c_uint64),
        ("region_count", ctypes.c_int32),
        ("page_size", ctypes.c_int32),
        *((name, ctypes.c_uint64) for name in (
            "resident_size", "resident_size_peak", "device", "device_peak", "internal",
            "internal_peak", "external", "external_peak", "reusable", "reusable_peak",
            "purgeable_volatile_pmap", "purgeable_volatile_resident", "purgeable_volatile_virtual",
            "compressed", "compressed_peak", "compressed_lifetime", "phys_footprint",
        )),
    ]  # fmt: skip


TASK_VM_INFO = 22  # the task_info flavor
_task_info: Any = None


def footprint_bytes() -> int | None:
    """The process's physical footprint on macOS (task_info TASK_VM_INFO), None elsewhere or if
    the call fails."""
    global _task_info
    if sys.platform != "darwin":
        return None
    try:
        if _task_info is None:
            system = ctypes.CDLL("/usr/lib/libSystem.B.dylib")
            task = ctypes.c_uint32.in_dll(system, "mach_task_self_")
            call = system.task_info
            call.argtypes = [
                ctypes.c_uint32,
                ctypes.c_int,
                ctypes.POINTER(TaskVMInfo),
                ctypes.POINTER(ctypes.c_uint32),
            ]
            call.restype = ctypes.c_int
            _task_info = (call, task.value)
        call, task = _task_info
        info = TaskVMInfo()
        count = ctypes.c_uint32(ctypes.sizeof(TaskVMInfo) // 4)  # in natural_t (4-byte) units
        if call(task, TASK_VM_INFO, ctypes.byref(info), ctypes.byref(count)) != 0:
            return None
        return int(info.phys_footprint)
    except (OSError, AttributeError, ValueError):
        return None


def sample_memory(t: float, limit_bytes: int | None = -1) -> MemorySample:
    """One sample at run time `t` (seconds). `limit_bytes=-1` queries the device limit now; pass a
    cached value (or None) to skip that query."""
    vm = psutil.virtual_memory()
    return MemorySample(
        t=t,
        mlx_active_bytes=int(mx.get_active_memory()),
        mlx_cache_bytes=int(mx.get_cache_memory()),
        mlx_peak_bytes=int(mx.get_peak_memory()),
        device_limit_bytes=device_limit_bytes() if limit_bytes == -1 else limit_bytes,
        process_rss_bytes=int(_process.memory_info().rss),
        system_available_bytes=int(vm.available),
        system_total_bytes=int(vm.total),
        swap_used_bytes=int(psutil.swap_memory().used),
        process_footprint_bytes=footprint_bytes(),
    )


class MemorySampler:
    """Daemon thread: `emit(sample_memory(clock()))` every `interval_s` until `stop()`."""

    def __init__(
        self,
        emit: Callable[[MemorySample], None],
        interval_s: float = 1.0,
        clock: Callable[[], float] | None = None,
    ):
        if interval_s <= 0:
            raise ValueError(f"memory sample interval must be > 0 s, got {interval_s}")
        self.emit = emit
        self.interval_s = interval_s
        t0 = time.monotonic()
        self.clock: Callable[[], float] = clock or (lambda: time.monotonic() - t0)
        self.samples = 0
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._limit_bytes = device_limit_bytes()  # constant for the process: query once

    def start(self) -> MemorySampler:
        if self._thread is not None:
            raise RuntimeError("memory sampler already started")
        self._thread = threading.Thread(target=self._run, name="mlatui-memory", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        next_s = time.monotonic()
        try:
            while not self._stop.is_set():
                self.emit(sample_memory(self.clock(), self._limit_bytes))
                self.samples += 1
                next_s += self.interval_s
                # fixed schedule, no drift; after a stall, skip missed ticks rather than burst
                delay_s = next_s - time.monotonic()
                if delay_s < 0:
                    next_s = time.monotonic()
                    delay_s = 0.0
                self._stop.wait(delay_s)
        except BaseException as e:  # noqa: BLE001 - a sampler failure must not kill the run
            self.error = e

    def stop(self, timeout_s: float = 5.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
            if self._thread.is_alive():
                raise RuntimeError(f"memory sampler did not stop within {timeout_s} s")
            self._thread = None

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def __enter__(self) -> MemorySampler:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


GB = 1e9


def sync_streams() -> None:
    """Wait for every stream a decode block runs on, on the calling thread: its default stream
    and mlx-lm's `generation_stream`. `mx.synchronize()` alone waits on the default stream only,
    so a generator's pending step landed in whatever ran next (the other arm's block)."""
    mx.synchronize()
    mx.synchronize(generation_stream)


@dataclass(frozen=True)
class WiredLimit:
    """The wired limit held while the arms generate: `limit_bytes` None where none is set."""

    limit_bytes: int | None = None
    said: str = ""  # what mlx-lm printed on entering (a model near the working set)

    def describe(self) -> str:
        if self.limit_bytes is None:
            return "none (no Metal working set)"
        return (
            f"{self.limit_bytes / GB:.1f} GB (Metal's recommended working set, as "
            "mlx_lm.generate holds it)"
        )


@contextlib.contextmanager
def wired_memory(model: Any) -> Iterator[WiredLimit]:
    """mlx-lm's own `wired_limit` around what follows, with no stream of its own to sync on the
    way out: the caller syncs every arm's streams (on their threads) before leaving."""
    from mlx_lm.generate import wired_limit

    limit = mx.device_info().get("max_recommended_working_set_size")
    printed = io.StringIO()
    with contextlib.ExitStack() as stack:
        with contextlib.redirect_stdout(printed):  # its warning goes to the run's log instead
            stack.enter_context(wired_limit(model, streams=[]))
        yield WiredLimit(int(limit) if limit else None, printed.getvalue().strip())
