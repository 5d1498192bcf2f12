"""The single-process parts of distributed runs: scenario key, shard checks, per-rank memory,
labels, and the dashboard's header on a distributed recording."""

from __future__ import annotations

import msgspec
import pytest

from mlatui.config.scenario import ScenarioError, load_scenario
from mlatui.host.distributed import ShardMode, World, describe_failure, launched, world_label
from mlatui.models.fit import FitEstimate
from mlatui.run.engine_dist import DistRun
from mlatui.stream.run_settings import WorldRecord
from tests.random_models import build_model

WORLD = WorldRecord(world_size=2, backend="ring", shard="tensor", hosts=("mac-a", "mac-b"))


def test_scenario_shard_key(tmp_path):
    good = tmp_path / "p.toml"
    phase = '[[phase]]\nname = "s"\nkind = "sweep"\ncontexts = [64]\nwidths = [1]\n'
    good.write_text('name = "p"\n[model]\nshard = "pipeline"\n' + phase)
    assert load_scenario(str(good)).model.shard == "pipeline"
    bad = tmp_path / "b.toml"
    bad.write_text('name = "b"\n[model]\nshard = "columns"\n' + phase)
    with pytest.raises(
        ScenarioError, match='model.shard: expected one of pipeline, tensor, got "columns"'
    ):
        load_scenario(str(bad))


def test_a_single_process_is_not_distributed(monkeypatch):
    for key in ("MLX_HOSTFILE", "MLX_RANK", "MLX_WORLD_SIZE", "OMPI_COMM_WORLD_SIZE"):
        monkeypatch.delenv(key, raising=False)
    assert not launched()
    monkeypatch.setenv("MLX_WORLD_SIZE", "1")
    assert not launched()
    monkeypatch.setenv("MLX_WORLD_SIZE", "2")
    assert launched()


def test_shard_refusals_say_why():
    from mlatui.models.embedded import load_embedded
    from mlatui.run.engine_dist import can_shard

    model, _, _ = load_embedded(draft=False)
    assert can_shard(model, ShardMode.TENSOR, 2) is None
    assert "3 ranks" in can_shard(model, ShardMode.TENSOR, 3)  # 4 heads
    assert "no pipeline()" in can_shard(model, ShardMode.PIPELINE, 2)
    dsv3 = build_model("deepseek_v3", evaluate=False)
    assert can_shard(dsv3, ShardMode.PIPELINE, 2) is None
    assert "cannot fill 3 pipeline stages" in can_shard(dsv3, ShardMode.PIPELINE, 3)


def test_per_rank_memory_splits_what_each_mode_splits():
    e = FitEstimate(8_000, 600, 400, 1024, 10_000, "RAM")
    tensor = DistRun(World(0, 2, "ring", ("a", "b")), ShardMode.TENSOR).per_rank(e)
    pipeline = DistRun(World(0, 2, "ring", ("a", "b")), ShardMode.PIPELINE).per_rank(e)
    assert (tensor.weights_bytes, tensor.cache_bytes, tensor.transient_bytes) == (4000, 600, 200)
    assert (pipeline.weights_bytes, pipeline.cache_bytes, pipeline.transient_bytes) == (
        4000,
        300,
        400,
    )
    assert "per rank of 2" in tensor.describe()
    assert DistRun(None).per_rank(e) is e


def test_labels_and_failures():
    assert world_label(WORLD) == "2 ranks · ring · tensor · mac-a, mac-b"
    assert world_label(msgspec.structs.replace(WORLD, hosts=("vm", "vm"))) == (
        "2 ranks · ring · tensor · vm ×2"
    )
    assert world_label(WorldRecord()) == "" and world_label(None) == ""
    w = World(0, 3, "ring", ("a", "b", "c"))
    lost = describe_failure(RuntimeError("[ring] connection to a peer was lost"), w)
    assert lost == (
        "rank 0: lost one of ranks 1, 2 during a collective ([ring] connection to a peer was lost)"
    )
    assert describe_failure(RuntimeError("shape mismatch"), w) is None
    assert describe_failure(RuntimeError("[ring] x"), None) is None


async def test_dashboard_header_and_memory_show_the_world(tmp_path):

    from mlatui.stream.recorder import iter_recording
    from mlatui.stream.replay_source import ReplaySource
    from mlatui.widgets.app import MlatuiApp

    src = "tests/fixtures/ui_tiny_run.jsonl"
    events = [e for _, e in iter_recording(src)]
    events[0] = msgspec.structs.replace(events[0], distributed=WORLD)
    path = tmp_path / "dist.jsonl"
    path.write_text("".join(e.to_json() + "\n" for e in events))
    app = MlatuiApp(ReplaySource(path, speed=1024.0), ui_hz=20, out_dir=tmp_path)
    async with app.run_test(size=(160, 50)) as pilot:
        while not app._done:
            await pilot.pause(0.05)
        await pilot.pause()
        header = app.query_one("#header").content().plain
        assert "2 ranks · ring · tensor · mac-a, mac-b" in header
        assert "rank 0 of 2" in app.query_one("#memory").content().plain
