"""The streams a decode block runs on, and wired memory on Metal as mlx-lm's own generate holds it.

mlx-lm's `generate_step` and `speculative_generate_step` run on `generation_stream`, a
thread-local stream of mlx-lm's, and leave the next step in flight there; mlatui's MTP loop runs
on the thread's default stream. `sync_streams` waits for both on the calling thread.

`mlx_lm.stream_generate` runs under `wired_limit(model, [generation_stream])`: on Metal the
wired limit is raised to the device's recommended working set, so the weights stay resident
instead of paging under pressure. mlatui calls `generate_step` directly, so the engine enters
that same context manager once both arms are loaded (`wired_memory`) and leaves it after every
arm's thread synced its own streams (a wired limit must not change under an async eval; the
streams are per thread, so each arm's worker syncs its own before it ends). Where the device
reports no recommended working set (CPU, CUDA) mlx-lm sets nothing, and neither does this.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import mlx.core as mx
from mlx_lm.generate import generation_stream

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
