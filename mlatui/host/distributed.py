"""Running one scenario on several processes (several Macs) with `mx.distributed`, started by
`mlx.launch`: who this process is (`World`), and how every rank stays in lockstep (`Lockstep`).

Every rank runs the identical schedule. Whatever could differ between ranks (the sampler's
"more rounds?", a stop request) is decided once and shared through a tiny `all_sum`, so every
rank issues the same collectives in the same order. Only `mx.distributed` collectives are used:
no transport and no listener of mlatui's own.

A collective whose peer died fails at once on the ring backend ("connection to a peer was lost");
one whose peer hangs (or a backend that does not notice) blocks forever and cannot be
interrupted. So a watchdog thread watches for progress: when none comes for `timeout_s`, it hands
the caller its message (rank 0 writes the error and `run_end` to its recording) and exits the
process.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, cast

from mlatui.stream.run_settings import WorldRecord

if TYPE_CHECKING:
    from mlx.core.distributed import Group

TIMEOUT_ENV = "MLATUI_DIST_TIMEOUT_S"
# the longest a step, a collective or a prefill chunk of a large model may take
DEFAULT_TIMEOUT_S = 300.0
LOAD_ALLOWANCE = 10  # the barrier after loading waits this many timeouts (ranks load at their pace)
# After a stop signal, the step in progress gets this long to end. mlx.launch sends SIGTERM to
# every rank when one exits: rank 0's collective with the dead rank may then never return.
STOP_GRACE_S = 20.0
HOSTNAME_BYTES = 64


class ShardMode(StrEnum):
    TENSOR = "tensor"  # model.shard(group): heads and MLP columns split, an all_sum per layer
    PIPELINE = "pipeline"  # model.model.pipeline(group): layers split, activations passed on


class RankLost(RuntimeError):
    """A collective failed or never completed: another rank died, hung or lost its link."""


@dataclass(frozen=True)
class World:
    rank: int
    size: int
    backend: str
    hosts: tuple[str, ...]  # one per rank, in rank order

    @property
    def leader(self) -> bool:
        return self.rank == 0

    def others(self) -> str:
        peers = [str(r) for r in range(self.size) if r != self.rank]
        return f"rank {peers[0]}" if len(peers) == 1 else f"one of ranks {', '.join(peers)}"

    def record(self, shard: ShardMode | str) -> WorldRecord:
        """The world as the run header records it."""
        return WorldRecord(
            world_size=self.size, backend=self.backend, shard=str(shard), hosts=tuple(self.hosts)
        )


def launched() -> bool:
    """Started by mlx.launch (or mpirun) with more than one process?"""
    size = os.environ.get("MLX_WORLD_SIZE") or os.environ.get("OMPI_COMM_WORLD_SIZE")
    if size is not None:
        return size.strip() not in ("", "1")
    hostfile = os.environ.get("MLX_HOSTFILE")
    if hostfile:
        return True
    return any(os.environ.get(k) for k in ("MLX_JACCL_COORDINATOR", "PMI_SIZE"))


def launch_rank() -> int:
    """This process's rank as the launcher told it (before mlx is imported); 0 if not launched."""
    for key in ("MLX_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK"):
        value = os.environ.get(key, "").strip()
        if value.isdigit():
            return int(value)
    return 0


def _backend_from_env() -> str:
    if os.environ.get("MLX_JACCL_COORDINATOR") or os.environ.get("MLX_IBV_DEVICES"):
        return "jaccl"
    if os.environ.get("NCCL_HOST_IP"):
        return "nccl"
    if os.environ.get("OMPI_COMM_WORLD_SIZE") or os.environ.get("PMI_SIZE"):
        return "mpi"
    return "ring"


_world: World | None = None
_group: Group | None = None


def world() -> World | None:
    """This process's World (initialised once), or None for an ordinary single process."""
    global _world, _group
    if _world is not None or not launched():
        return _world
    import mlx.core as mx

    backend = _backend_from_env()
    try:
        group = mx.distributed.init(strict=True, backend=backend)
    except (RuntimeError, ValueError) as e:
        raise RankLost(
            f"rank {launch_rank()}: mx.distributed ({backend}) did not start: {one_line(e)}"
        ) from e
    _group = group
    name = socket.gethostname().encode()[:HOSTNAME_BYTES].ljust(HOSTNAME_BYTES, b"\0")
    mine = mx.array(list(name), dtype=mx.uint8)[None]  # (1, HOSTNAME_BYTES)
    every = mx.distributed.all_gather(mine, group=group, stream=mx.cpu)  # (size, HOSTNAME_BYTES)
    mx.eval(every)
    rows = cast(list[list[int]], every.tolist())  # a 2-D uint8 array: rows of ints
    hosts = tuple(bytes(row).rstrip(b"\0").decode(errors="replace") for row in rows)
    _world = World(group.rank(), group.size(), backend, hosts)
    return _world


def local_rank() -> int:
    """This rank's index among the ranks on its own host (0 for a single process)."""
    w = _world
    if w is None:
        return 0
    return sum(1 for r in range(w.rank) if w.hosts[r] == w.hosts[w.rank])


def host_ranks() -> int:
    """How many ranks share this host and its memory (1 for a single process)."""
    w = _world
    if w is None:
        return 1
    return sum(1 for host in w.hosts if host == w.hosts[w.rank])


def group() -> Group | None:
    world()
    return _group


def one_line(e: object) -> str:
    return " ".join(str(e).split()) or type(e).__name__


def timeout_s() -> float:
    raw = os.environ.get(TIMEOUT_ENV, "").strip()
    try:
        value = float(raw) if raw else DEFAULT_TIMEOUT_S
    except ValueError:
        value = DEFAULT_TIMEOUT_S
    return value if value > 0 else DEFAULT_TIMEOUT_S


def describe_failure(e: BaseException, w: World | None) -> str | None:
    """A backend's collective error, in one line that names the rank; None for other errors."""
    if w is None:
        return None
    if isinstance(e, RankLost):
        return str(e)
    text = one_line(e)
    if isinstance(e, RuntimeError) and text.startswith(("[ring]", "[jaccl]", "[mpi]", "[nccl]")):
        return f"rank {w.rank}: lost {w.others()} during a collective ({text})"
    return None


class Watchdog:
    """Exits the process when no `beat()` came for `timeout_s` while armed. `on_timeout(msg)`
    runs first (it must not block for long: a thread holding a lock may be the stuck one)."""

    def __init__(
        self,
        timeout: float,
        on_timeout: Callable[[str], None],
        describe: str,
        stop: threading.Event | None = None,
    ):
        self.timeout = timeout
        self._limit = timeout
        self.stop = stop
        self.on_timeout = on_timeout
        self.describe = describe  # e.g. "rank 0: no answer from rank 1"
        self._last = time.monotonic()
        self._doing = "starting"
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="mlatui-watchdog", daemon=True)
        self._thread.start()

    def beat(self, doing: str | None = None, allowance: float = 1.0) -> None:
        self._last = time.monotonic()
        self._limit = self.timeout * allowance
        if doing is not None:
            self._doing = doing

    def close(self) -> None:
        self._stop.set()

    def _watch(self) -> None:
        while not self._stop.wait(min(1.0, self.timeout / 4)):
            idle = time.monotonic() - self._last
            stopping = self.stop is not None and self.stop.is_set()
            if idle < (min(self._limit, STOP_GRACE_S) if stopping else self._limit):
                continue
            why = (
                "after a stop signal (mlx.launch stops every rank when one exits: did it die?)"
                if stopping
                else f"(it died, hung or lost its link; {TIMEOUT_ENV} sets the limit)"
            )
            message = f"{self.describe} for {idle:.0f} s while {self._doing} {why}"
            try:
                self.on_timeout(message)
            finally:
                os._exit(1)


_watchdog: Watchdog | None = None


def beat(doing: str | None = None) -> None:
    """Progress: long work between collectives (a prefill's chunks) calls this; no-op alone."""
    if _watchdog is not None:
        _watchdog.beat(doing)


class Lockstep:
    """The collectives that keep ranks in step, each under the watchdog."""

    def __init__(
        self,
        w: World,
        on_timeout: Callable[[str], None],
        stop: threading.Event | None = None,
        timeout: float | None = None,
    ):
        global _watchdog
        self.world = w
        self.group = group()
        self.watchdog = Watchdog(
            timeout or timeout_s(),
            on_timeout,
            f"rank {w.rank}: no answer from {w.others()}",
            stop,
        )
        _watchdog = self.watchdog

    def close(self) -> None:
        global _watchdog
        self.watchdog.close()
        if _watchdog is self.watchdog:
            _watchdog = None

    def _sum(self, values: list[int], doing: str, allowance: float = 1.0) -> list[int]:
        import mlx.core as mx

        self.watchdog.beat(doing, allowance)
        try:
            total = mx.distributed.all_sum(
                mx.array(values, dtype=mx.int32), group=self.group, stream=mx.cpu
            )
            mx.eval(total)
        except RuntimeError as e:
            raise RankLost(describe_failure(e, self.world) or one_line(e)) from e
        self.watchdog.beat()
        return [int(v) for v in cast(list[int], total.tolist())]  # a 1-D int32 array

    def barrier(self, doing: str = "waiting for every rank", allowance: float = 1.0) -> None:
        self._sum([1], doing, allowance)

    def any_stop(self, local: bool) -> bool:
        """A stop asked for on any rank (a signal reaches each rank on its own) stops all at the
        same step: the stop flags are summed, so every rank reads the same answer."""
        return self._sum([int(local)], "sharing the stop flag")[0] > 0

    def leader_decides(self, wants: bool) -> bool:
        """Rank 0's decision, for every rank (the others' timings, hence wishes, differ)."""
        mine = int(wants) if self.world.leader else 0
        return self._sum([mine], "sharing rank 0's decision")[0] > 0

    def leader_decides_each(self, wants: Sequence[bool]) -> list[bool]:
        """Rank 0's yes/no for each item, in one collective (every rank passes as many)."""
        if not wants:
            return []
        mine = [int(w) if self.world.leader else 0 for w in wants]
        return [v > 0 for v in self._sum(mine, "sharing rank 0's decisions")]

    def check_same(self, value: int, what: str) -> None:
        """Every rank must hold the same `value` (e.g. the tokens a block emitted): ranks that
        diverged would issue different collectives and hang each other."""
        n = self.world.size
        mine = value & 0x7FFFFFF  # small enough that n of them cannot overflow an int32 sum
        summed = self._sum([mine, mine if self.world.leader else 0], f"comparing {what}")
        if summed[0] != n * summed[1]:
            raise RankLost(f"rank {self.world.rank}: ranks disagree on {what}; stopping all")


def world_label(d: WorldRecord | None) -> str:
    """A header's `distributed` in words: "2 ranks · ring · tensor · vm, vm" ("" alone)."""
    if d is None or d.world_size < 2:
        return ""
    hosts = list(d.hosts)
    where = (
        ", ".join(hosts) if len(set(hosts)) > 1 else f"{hosts[0]} ×{len(hosts)}" if hosts else ""
    )
    parts = [f"{d.world_size} ranks", d.backend or "?", d.shard or "?"]
    return " · ".join([*parts, where] if where else parts)
