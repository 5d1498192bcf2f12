"""The engine's side of a run under `mlx.launch`: shard what is loaded, keep the ranks in step,
and end every rank cleanly when one is lost. A single process gets `DistRun(None, ...)`, whose
every method does nothing.

A model is sharded the way mlx-lm shards it: `model.shard(group)` (tensor parallel: every rank
keeps 1/N of the attention heads and MLP columns, with an `all_sum` after each layer's attention
and MLP) or `model.model.pipeline(group)` (every rank keeps a contiguous block of layers). Both
arms are built after this, so the patch sees the sharded heads: its gate uses the per-rank head
count, as the rank's own attention does."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import mlx.core as mx
import mlx.nn as nn

from mlatui.config.scenario import Scenario
from mlatui.errors import error_line, say
from mlatui.host import distributed
from mlatui.host.distributed import Lockstep, ShardMode, World
from mlatui.models.fit import FitEstimate
from mlatui.models.loading import Loaded, LoadError, Prepare
from mlatui.stream.events import ErrorEvent, Event, RunEnd
from mlatui.stream.run_settings import WorldRecord


@dataclass
class DistRun:
    world: World | None
    mode: ShardMode = ShardMode.TENSOR
    lockstep: Lockstep | None = None
    notes: list[str] = field(default_factory=list)  # logged once the header is out
    _sharded: set[int] = field(default_factory=set)

    @classmethod
    def for_scenario(cls, scenario: Scenario) -> DistRun:
        return cls(distributed.world(), ShardMode(scenario.model.shard))

    @property
    def leader(self) -> bool:
        return self.world is None or self.world.leader

    def describe(self) -> WorldRecord:
        return self.world.record(self.mode) if self.world else WorldRecord()

    def per_rank(self, e: FitEstimate) -> FitEstimate:
        """What one rank holds. Tensor parallel splits the weights (roughly: embeddings, norms
        and the latent projections stay whole) and the materialised K/V (per head), not the
        latent caches (every rank caches the whole latent); a pipeline splits weights and
        caches by layer, and materialises one of its own layers at a time."""
        if self.world is None:
            return e
        n = self.world.size
        tensor = self.mode is ShardMode.TENSOR
        return FitEstimate(
            e.weights_bytes // n,
            e.cache_bytes if tensor else e.cache_bytes // n,
            e.transient_bytes // n if tensor else e.transient_bytes,
            e.context,
            e.device_bytes,
            f"{e.device_what}, per rank of {n}",
        )

    def prepare_target(self) -> Prepare | None:
        if self.world is None:
            return None

        def prepare(model) -> None:
            shard(model, self.mode, distributed.group(), "model")
            self._sharded.add(id(model))

        return prepare

    def prepare_draft(self) -> Prepare | None:
        """The draft is sharded like the target where its family allows, else kept whole on
        every rank (it then computes the same thing everywhere, with no collective)."""
        if self.world is None:
            return None

        world = self.world

        def prepare(model) -> None:
            why = can_shard(model, self.mode, world.size)
            if why is None:
                shard(model, self.mode, distributed.group(), "draft model")
                self._sharded.add(id(model))
            else:
                self.notes.append(f"draft model not sharded ({why}): every rank runs it whole")

        return prepare

    def after_load(
        self,
        loaded: Loaded,
        emit: Callable[[Event], None],
        now: Callable[[], float],
        record: str | None,
        stop: threading.Event | None = None,
    ) -> None:
        """Shard a draft that came with the target (the embedded model's), start the lockstep
        and wait for every rank to have loaded (mlx-lm's sharded_load ends the same way)."""
        if self.world is None:
            return
        draft, prepare = loaded.draft_model, self.prepare_draft()
        if draft is not None and prepare is not None and id(draft) not in self._sharded:
            prepare(draft)
        kept = f"the recording {record} keeps every completed step" if record else "stopping"

        def on_timeout(message: str) -> None:
            # from the watchdog thread, while a collective is stuck: record the end, say why
            if self.leader:
                for event in (ErrorEvent(now(), message, "", False), RunEnd(now(), "error", ())):
                    try:
                        emit(event)
                    except Exception:  # noqa: BLE001 - exiting anyway
                        pass
            say(error_line(f"{message} — {kept}"))

        self.lockstep = Lockstep(self.world, _bounded(on_timeout), stop)
        self.lockstep.barrier(
            "waiting for every rank to load the model", distributed.LOAD_ALLOWANCE
        )

    def stop_requested(self, local: bool) -> bool:
        return self.lockstep.any_stop(local) if self.lockstep else local

    def failure(self, e: BaseException) -> str | None:
        return distributed.describe_failure(e, self.world)

    def close(self) -> None:
        if self.lockstep is not None:
            self.lockstep.close()


def _bounded(fn: Callable[[str], None]) -> Callable[[str], None]:
    """`fn` on a thread of its own, waited for at most 10 s (a sink's lock may be held by the
    very thread that is stuck)."""

    def run(message: str) -> None:
        t = threading.Thread(target=fn, args=(message,), daemon=True)
        t.start()
        t.join(10.0)

    return run


def can_shard(model: nn.Module, mode: ShardMode, size: int) -> str | None:
    """None if `model` can be sharded over `size` ranks in `mode`; else why not, in words."""
    family = getattr(getattr(model, "args", None), "model_type", type(model).__module__)
    if mode is ShardMode.TENSOR:
        if not callable(getattr(model, "shard", None)):
            return f"mlx-lm's {family} has no tensor-parallel shard()"
        for layer in _layers(model):
            heads = getattr(getattr(layer, "self_attn", None), "num_heads", None)
            if isinstance(heads, int) and heads % size:
                return f"{heads} attention heads do not split over {size} ranks"
        return None
    inner = getattr(model, "model", None)
    if not callable(getattr(inner, "pipeline", None)):
        return f"mlx-lm's {family} has no pipeline()"
    if len(_layers(model)) < size:
        return f"{len(_layers(model))} layers cannot fill {size} pipeline stages"
    return None


def shard(model: nn.Module, mode: ShardMode, group: Any, what: str = "model") -> None:
    """Shard in place and evaluate the parameters (each rank then holds only its part)."""
    why = can_shard(model, mode, group.size())
    if why is not None:
        other = "pipeline" if mode is ShardMode.TENSOR else "tensor"
        raise LoadError(
            f"{what}: cannot shard {mode.value}-parallel: {why} — try [model] shard = "
            f'"{other}" in the scenario, or run it on one process'
        )
    try:
        if mode is ShardMode.TENSOR:
            model.shard(group)
        else:
            model.model.pipeline(group)
    except ValueError as e:  # mlx's shard_linear: a dimension that does not split
        raise LoadError(f"{what}: mlx-lm could not shard it {mode.value}-parallel: {e}") from e
    mx.eval(model.parameters())


def _layers(model: nn.Module) -> list:
    inner = getattr(model, "model", None)
    layers = getattr(inner, "layers", None) or getattr(model, "layers", None) or []
    return [layer for layer in layers if layer is not None]
