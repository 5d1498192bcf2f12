"""A converted folder whose config announces an MTP layer it does not hold: `auto` still runs and
says so (header, verdict strip, log, screen); after `mtp extract` the same run tunes the MTP head.
Also: heads stored unlike their target are converted on load, half-precision MoE folders are
refused on the CPU before loading, and the quantization reader works without mlx-lm's helper."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import mlx.core as mx
import mlx.nn as nn
import pytest

from mlatui.config.run_plan import RunConfig
from mlatui.stream.events import DecodeResult, LogMessage, RunHeader
from mlatui.views.dashboard_state import DashboardState
from mlatui.views.verdict_strip import verdict_line
from tests.mtp_folders import Pair, pair

MISSING = "MTP head missing (dropped by the converter)"


@pytest.fixture
def glm(tmp_path_factory) -> Pair:
    return pair(tmp_path_factory, "glm")


def tune_scenario(tmp_path: Path, folder: Path) -> Path:
    path = tmp_path / "tune.toml"
    path.write_text(
        f'name = "mtp-tune"\n[model]\nsource = "path"\npath = "{folder}"\n'
        '[draft]\nsource = "auto"\n'
        '[[phase]]\nname = "tune"\nkind = "tune"\ncontexts = [48]\ndepths = [1]\n'
        "tokens = 6\nreps = 2\nmax_rounds = 2\nwarmup = 1\n"
    )
    return path


def engine_run(scenario: Path) -> list:
    from tests.engine_run import run

    events: list = []
    assert run(RunConfig(scenario=str(scenario), budget_s=0), events.append) == "completed"
    return events


def write(events: list, path: Path) -> Path:
    header = next(e for e in events if isinstance(e, RunHeader))
    rest = [e for e in events if e is not header]
    path.write_text("".join(e.to_json() + "\n" for e in [header, *rest]))
    return path


@pytest.fixture(scope="module")
def missing_run(tmp_path_factory) -> tuple[Path, list]:
    """One engine run, shared by the tests that read it."""
    glm = pair(tmp_path_factory, "glm")
    tmp_path = tmp_path_factory.mktemp("missing")
    folder = tmp_path / "converted"
    shutil.copytree(glm.converted, folder)
    (folder / "README.md").write_text("---\nbase_model: zai-org/GLM-4.7-Flash\n---\n")
    return folder, engine_run(tune_scenario(tmp_path, folder))


@pytest.mark.system
def test_auto_without_the_head_runs_and_says_so_everywhere(missing_run, tmp_path):
    folder, events = missing_run
    line = f"{MISSING} — `mlatui mtp extract zai-org/GLM-4.7-Flash --into {folder}`"  # the source named by the folder's model card
    header = next(e for e in events if isinstance(e, RunHeader))
    assert header.settings.mtp_missing == line and header.draft == "none"
    assert any(
        isinstance(e, LogMessage) and e.level == "warning" and e.message == line for e in events
    )
    state = DashboardState()
    state.apply_all(events)
    assert verdict_line(state).startswith(line)
    assert "MTP head missing (see log)" in verdict_line(state, 40)  # a narrow strip keeps it
    from mlatui.views.run_meta import header_fields

    assert any(f.value == line for f in header_fields(header))


@pytest.mark.system
async def test_the_missing_head_is_on_screen(missing_run, tmp_path):
    from mlatui.stream.sources import ReplaySource
    from mlatui.widgets.app import MlatuiApp

    folder, events = missing_run
    recording = write(events, tmp_path / "missing.jsonl")
    app = MlatuiApp(ReplaySource(recording, speed=1024.0), ui_hz=20, out_dir=tmp_path)
    async with app.run_test(size=(220, 50)) as pilot:
        while not app._done:
            await pilot.pause(0.02)
        await pilot.pause()
        header = app.query_one("#header").content().plain
        log = app.query_one("#log").content().plain
    flat = " ".join(header.split())
    assert MISSING in flat and "mlatui mtp extract zai-org/GLM-4.7-Flash" in flat
    assert flat.count("MTP head missing") >= 2  # the header line and the verdict strip
    assert "MTP head missing" in log


@pytest.mark.system
def test_after_extract_the_same_run_tunes_the_mtp_head(glm, tmp_path):
    from mlatui.run.mtp_extract import extract

    folder = tmp_path / "converted"
    shutil.copytree(glm.converted, folder)
    extract(str(glm.original), folder, check=False)
    events = engine_run(tune_scenario(tmp_path, folder))
    header = next(e for e in events if isinstance(e, RunHeader))
    assert header.draft == "mtp" and not header.settings.mtp_missing
    tuned = [e for e in events if isinstance(e, DecodeResult) and e.depth > 0]
    assert {(r.arm, r.draft_kind) for r in tuned} == {("stock", "mtp"), ("patched", "mtp")}


def test_a_bf16_sidecar_beside_a_4bit_folder_is_quantized_on_load(glm, tmp_path):
    """Left bf16, its MoE experts would die on the CPU in MLX's float32-only GatherMM."""
    from mlx_lm.utils import load_model

    from mlatui.run.drafts import load_mtp_draft

    folder = tmp_path / "converted"
    shutil.copytree(glm.converted, folder)
    shard = mx.load(str(glm.original / "model-00002-of-00002.safetensors"))
    mx.save_safetensors(
        str(folder / "mtp.safetensors"), {k: v.astype(mx.bfloat16) for k, v in shard.items()}
    )
    model, _ = load_model(folder)
    notes: list[str] = []
    draft = load_mtp_draft(folder, model, notes=notes)
    assert notes == ["MTP head stored unquantized, target 4-bit g32: converted to match"]
    layer = draft.head.layer
    assert isinstance(layer.eh_proj, nn.QuantizedLinear) and layer.eh_proj.bits == 4
    assert hasattr(layer.mlp.switch_mlp.gate_proj, "scales")
    from mlx_lm.models.cache import make_prompt_cache

    ctx = mx.array([[3, 1, 4, 1, 5, 9, 2, 6]])
    _, hidden = draft.target_forward(model, ctx, make_prompt_cache(model))
    draft.prefill(ctx, hidden)
    assert len(draft.propose(5, 2, hidden[:, -1:])) == 2  # runs on the CPU


def half_moe_folder(glm: Pair, tmp_path: Path) -> Path:
    folder = tmp_path / "bf16"
    shutil.copytree(glm.original, folder)
    for f in folder.glob("*.safetensors"):
        w = mx.load(str(f))
        mx.save_safetensors(str(f), {k: v.astype(mx.bfloat16) for k, v in w.items()})
    return folder


@pytest.fixture
def on_the_cpu():
    """The CPU as default device, as on Linux; a Mac's default is its GPU."""
    device = mx.default_device()
    mx.set_default_device(mx.cpu)
    yield
    mx.set_default_device(device)


def test_a_bf16_moe_folder_is_refused_on_the_cpu_before_loading(
    glm, tmp_path, monkeypatch, on_the_cpu
):
    import mlx_lm

    from mlatui.models.loading import LoadError, load_checkpoint

    folder = half_moe_folder(glm, tmp_path)

    def never(*a, **k):
        raise AssertionError("mlx_lm.load called")

    monkeypatch.setattr(mlx_lm, "load", never)
    with pytest.raises(LoadError) as e:
        load_checkpoint(str(folder))
    msg = str(e.value)
    assert "\n" not in msg and "unquantized bfloat16" in msg and "float32 on the CPU" in msg
    assert "--dtype float32" in msg and "GPU" in msg and "GatherMM" not in msg


def test_a_bf16_moe_folder_passes_where_the_gpu_is_the_default_device(glm, tmp_path, monkeypatch):
    from mlatui.models.loading import refuse_half_moe_on_cpu

    folder = half_moe_folder(glm, tmp_path)
    monkeypatch.setattr(mx, "default_device", lambda: mx.gpu)  # as on a Mac (Metal)
    assert refuse_half_moe_on_cpu(folder, "model", str(folder)) is None


def test_the_cpu_moe_check_passes_what_runs(glm, tmp_path):
    from mlatui.models.loading import half_precision_experts

    assert half_precision_experts(glm.converted) is None  # quantized experts
    assert half_precision_experts(glm.original) is None  # float32 experts
    assert half_precision_experts(half_moe_folder(glm, tmp_path)) == "bfloat16"


@pytest.mark.parametrize("bits, group", [(4, 32), (8, 64), (2, 32)])
def test_the_quantization_reader_matches_mlx_lm_without_it(bits, group):
    """mlx-lm 0.31 lacks `infer_quant_config`: the copy gives the same answers."""
    import mlx_lm.utils

    from mlatui.models.mtp_weights import _infer

    infer_quant_config = getattr(mlx_lm.utils, "infer_quant_config", None)
    if infer_quant_config is None:
        pytest.skip("this mlx-lm has no infer_quant_config to compare with")

    layer = nn.Linear(128, 64)
    w, s, b = mx.quantize(layer.weight, group_size=group, bits=bits)
    weights = {"p.weight": w, "p.scales": s, "p.biases": b}
    assert _infer("p", layer, weights) == infer_quant_config("p", layer, weights)
    w, s = mx.quantize(layer.weight, mode="mxfp4")
    weights = {"p.weight": w, "p.scales": s}
    assert _infer("p", layer, weights) == infer_quant_config("p", layer, weights)


def test_a_folder_names_its_source(tmp_path):
    from mlatui.models.mtp_weights import missing_head_line, named_source

    (tmp_path / "config.json").write_text(json.dumps({"model_type": "glm4_moe_lite"}))
    assert named_source(tmp_path) is None
    assert "`mlatui mtp extract <original checkpoint> --into" in missing_head_line(tmp_path)
    (tmp_path / "README.md").write_text(
        "# x\nThis model was converted to MLX format from [zai-org/GLM-4.7-Flash]() using mlx-lm\n"
    )
    assert named_source(tmp_path) == "zai-org/GLM-4.7-Flash"
    (tmp_path / "mtp.provenance.json").write_text(json.dumps({"source": "/data/glm-orig"}))
    assert named_source(tmp_path) == "/data/glm-orig"


@pytest.mark.system
async def test_asked_for_explicitly_the_missing_head_is_an_error_read_in_full(glm, tmp_path):
    """`source = "mtp"` on the converted folder: the run stops with one line naming the extract
    command, and on an 80-column screen the log pane shows all of it, wrapped, not cut."""
    from mlatui.stream.events import ErrorEvent
    from mlatui.stream.sources import ReplaySource
    from mlatui.widgets.app import MlatuiApp
    from tests.engine_run import run

    folder = tmp_path / "converted"
    shutil.copytree(glm.converted, folder)
    scenario = tune_scenario(tmp_path, folder)
    scenario.write_text(scenario.read_text().replace('source = "auto"', 'source = "mtp"'))
    events: list = []
    assert run(RunConfig(scenario=str(scenario), budget_s=0), events.append) == "error"
    error = next(e for e in events if isinstance(e, ErrorEvent)).message
    assert (
        "\n" not in error and f"mlatui mtp extract <original checkpoint> --into {folder}" in error
    )
    recording = write(events, tmp_path / "error.jsonl")
    app = MlatuiApp(ReplaySource(recording, speed=1024.0), ui_hz=20, out_dir=tmp_path)
    async with app.run_test(size=(80, 40)) as pilot:
        while not app._done:
            await pilot.pause(0.02)
        await pilot.pause()
        log = app.query_one("#log").content().plain
    assert " ".join(error.split()) in " ".join(log.split())
