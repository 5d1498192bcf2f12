"""`mlatui mtp extract`: tiny GLM-4.7-Flash- and DeepSeek-V3-shaped originals (HF layout, sharded,
with an index) and their `mlx_lm convert -q` folders, which have no MTP layer; the head comes
back from the original, quantized like the folder, read from only the shard that holds it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import mlx.core as mx
import mlx.nn as nn
import pytest
from mlx.utils import tree_flatten
from mlx_lm.models.cache import KVCache, make_prompt_cache
from mlx_lm.utils import load_model

from mlatui.cli import main
from mlatui.models.mtp_weights import read_header
from mlatui.run.drafts import MTPHead, load_mtp_draft
from mlatui.run.mtp_extract import NEAR_TIE_LOGITS, extract, judge
from tests.mtp_folders import GROUP, OpenedFiles, Pair, embedded_pair, pair


@pytest.fixture(params=["glm", "dsv3"])
def both(request, tmp_path_factory) -> Pair:
    return pair(tmp_path_factory, request.param)


@pytest.fixture
def glm(tmp_path_factory) -> Pair:
    return pair(tmp_path_factory, "glm")


def fresh(p: Pair, tmp_path: Path) -> Path:
    """A copy of the converted folder this test may write into."""
    into = tmp_path / p.converted.name
    shutil.copytree(p.converted, into)
    return into


def test_the_converter_dropped_the_head_and_extract_puts_it_back(both, tmp_path):
    config = json.loads((both.converted / "config.json").read_text())
    assert config["num_nextn_predict_layers"] == 1  # still announced...
    prefix = f"model.layers.{both.layer}."
    stored = [k for f in both.converted.glob("*.safetensors") for k in read_header(f)]
    assert stored and not any(k.startswith(prefix) for k in stored)  # ...but dropped

    into = fresh(both, tmp_path)
    done = extract(str(both.original), into, check=both.family == "glm")  # dsv3: 61 layers, slow
    assert done.sidecar == into / "mtp.safetensors" and done.layer == both.layer
    assert all(k.startswith(prefix) for k in read_header(done.sidecar))
    assert done.quantization == f"{both.bits}-bit g{GROUP}, float32"
    record = json.loads(done.provenance.read_text())
    assert record["source"] == str(both.original) and record["layer"] == both.layer
    assert record["written_tensors"] == sorted(read_header(done.sidecar))
    assert f"{prefix}eh_proj.weight" in record["source_tensors"]
    assert f"{prefix}embed_tokens.weight" not in record["source_tensors"]  # the target's is used
    assert all(len(h) == 64 for h in record["source_tensors"].values())  # sha256 hex
    if done.check is not None:
        assert done.check.matches_greedy and done.check.proposed > 0

    model, _ = load_model(into)
    head = load_mtp_draft(into, model).head.layer  # what every run loads
    assert isinstance(head.eh_proj, nn.QuantizedLinear) and head.eh_proj.bits == both.bits
    assert head.mlp.switch_mlp.gate_proj.bits == both.bits  # the experts as the folder's


def reference_heads(p: Pair, into: Path):
    """(fp32 head from the original, extracted head, fp32 target) with the extracted layer put
    in a head that shares the fp32 target's embedding and output head, so the two heads differ
    only by their own layer."""
    fp32, _ = load_model(p.original)
    ref = load_mtp_draft(p.original, fp32)
    conv, _ = load_model(into)
    got = load_mtp_draft(into, conv)
    return ref.head, MTPHead(got.head.layer, fp32.model.embed_tokens, ref.head._lm_head), fp32


def test_the_extracted_head_is_the_fp32_head_quantized_like_the_folder(both, tmp_path):
    """Bit for bit: the original's fp32 MTP layer quantized by mlx's own `nn.quantize` with the
    folder's bits and group size and mlx-lm convert's predicate is the extracted layer."""
    into = fresh(both, tmp_path)
    extract(str(both.original), into, check=False)
    ref, got, _ = reference_heads(both, into)

    def convert_predicate(path: str, m: nn.Module) -> bool:
        return hasattr(m, "to_quantized") and m.weight.shape[-1] % GROUP == 0

    nn.quantize(ref.layer, group_size=GROUP, bits=both.bits, class_predicate=convert_predicate)
    want, have = (
        dict(tree_flatten(ref.layer.parameters())),
        dict(tree_flatten(got.layer.parameters())),
    )
    assert sorted(want) == sorted(have)
    different = [k for k in want if not mx.array_equal(want[k], have[k])]
    assert not different


def test_greedy_proposals_match_the_fp32_head_within_the_quantization_tolerance(both, tmp_path):
    """Same target hidden states, same embedding and output head: the extracted (quantized) head
    proposes the fp32 head's greedy token wherever the fp32 head is not near a tie. Tolerance:
    quantization moves each logit by at most `err` (measured); the top-1 can only change where
    the fp32 top-2 margin is below 2 * err. The random heads here have near-ties (64-token
    vocabulary), so a few flips are expected; the agreement rate bounds how many (a head built
    from wrong tensors agrees on about 1 in 64)."""
    into = fresh(both, tmp_path)
    extract(str(both.original), into, check=False)
    ref, got, fp32 = reference_heads(both, into)
    seq = [(7 * i + 3) % 64 for i in range(64)]
    _, hidden = load_mtp_draft(both.original, fp32).target_forward(
        fp32, mx.array([seq]), make_prompt_cache(fp32)
    )
    tokens, h = mx.array([seq[1:]]), hidden[:, :-1]  # slot j: (h_j, t_{j+1})
    la = ref.logits(ref(tokens, h, [KVCache()]))[0]  # (63, V)
    lb = got.logits(got(tokens, h, [KVCache()]))[0]
    pa, pb = mx.argmax(la, axis=-1).tolist(), mx.argmax(lb, axis=-1).tolist()
    top2 = mx.sort(la, axis=-1)[:, -2:]
    margin = (top2[:, 1] - top2[:, 0]).tolist()
    err = mx.abs(la - lb).max(axis=-1).tolist()
    flips = [i for i, (a, b) in enumerate(zip(pa, pb, strict=True)) if a != b]
    assert all(margin[i] <= 2 * err[i] for i in flips), "a flip where the fp32 head was sure"
    least = {8: 0.95, 4: 0.75}[both.bits]
    assert 1 - len(flips) / len(pa) >= least, (len(flips), len(pa))


def test_only_the_shard_holding_the_layer_is_read(glm, tmp_path):
    into = fresh(glm, tmp_path)
    with OpenedFiles(glm.original) as opened:
        done = extract(str(glm.original), into, check=False)
    assert sorted(set(opened.paths)) == sorted(
        ["config.json", "model.safetensors.index.json", "model-00002-of-00002.safetensors"]
    )
    assert opened.paths.count("model-00002-of-00002.safetensors") == 2  # header, then the bytes
    assert "model-00001-of-00002.safetensors" not in done.files_read


def hub_stand_in(monkeypatch, tmp_path: Path, repo: str, original: Path) -> list[str]:
    """huggingface_hub's listing and per-file download served from `original`, written into a
    hub-cache layout (models--org--name/snapshots/<commit>/file); returns the files fetched."""
    import huggingface_hub as hf

    commit = "0123456789abcdef0123456789abcdef01234567"
    snap = tmp_path / "hub" / f"models--{repo.replace('/', '--')}" / "snapshots" / commit
    fetched: list[str] = []

    def list_repo_files(repo_id, revision=None, **_):
        assert repo_id == repo
        return sorted(p.name for p in original.iterdir())

    def hf_hub_download(repo_id, filename, revision=None, **_):
        assert repo_id == repo
        fetched.append(filename)
        snap.mkdir(parents=True, exist_ok=True)
        shutil.copy(original / filename, snap / filename)
        return str(snap / filename)

    monkeypatch.setattr(hf, "list_repo_files", list_repo_files)
    monkeypatch.setattr(hf, "hf_hub_download", hf_hub_download)
    return fetched


def test_a_hub_id_fetches_only_the_index_and_the_shard(glm, tmp_path, monkeypatch):
    fetched = hub_stand_in(monkeypatch, tmp_path, "zai-org/GLM-tiny", glm.original)
    into = fresh(glm, tmp_path)
    done = extract("zai-org/GLM-tiny", into, check=False)
    assert fetched == [
        "config.json",
        "model.safetensors.index.json",
        "model-00002-of-00002.safetensors",
    ]
    record = json.loads(done.provenance.read_text())
    assert record["source"] == "zai-org/GLM-tiny"
    assert record["revision"] == "0123456789abcdef0123456789abcdef01234567"
    local = fresh(glm, tmp_path / "local")
    extract(str(glm.original), local, check=False)
    assert (into / "mtp.safetensors").read_bytes() == (local / "mtp.safetensors").read_bytes()


def test_the_command_line_says_what_it_did(glm, tmp_path, capsys):
    into = fresh(glm, tmp_path)
    # random weights: the head is the right one, but nothing was learnt, so its acceptance is
    # implausibly low for a trained head (exit 1); the tokens still match plain greedy
    assert main(["mtp", "extract", str(glm.original), "--into", str(into)]) == 1
    out = capsys.readouterr().out
    assert f"MTP head: {into / 'mtp.safetensors'}" in out and "4-bit g32" in out
    assert "self-check:" in out and "same tokens as plain greedy" in out
    assert "implausibly low for a trained head" in out


def refused(argv: list[str], capsys) -> str:
    assert main(argv) == 2
    lines = capsys.readouterr().err.strip().splitlines()  # progress lines, then the error
    errors = [line for line in lines if line.startswith("mlatui: error: ")]
    assert len(errors) == 1 and lines[-1] == errors[0]
    return errors[0]


def test_refusals_are_one_line(glm, tmp_path, tmp_path_factory, capsys):
    into = fresh(glm, tmp_path)
    src = str(glm.original)
    # the source is itself a conversion: no MTP layer in its weights
    err = refused(["mtp", "extract", str(glm.converted), "--into", str(into)], capsys)
    assert "no MTP layer" in err
    # a source whose config announces none
    plain = tmp_path / "plain"
    shutil.copytree(glm.original, plain)
    cfg = json.loads((plain / "config.json").read_text())
    (plain / "config.json").write_text(json.dumps(dict(cfg, num_nextn_predict_layers=0)))
    assert "num_nextn_predict_layers" in refused(
        ["mtp", "extract", str(plain), "--into", str(into)], capsys
    )
    # geometry: a DeepSeek-V3 source for the GLM folder
    dsv3 = pair(tmp_path_factory, "dsv3")
    err = refused(["mtp", "extract", str(dsv3.original), "--into", str(into)], capsys)
    assert "does not match" in err and "num_hidden_layers 61 vs 2" in err
    # not an mlx model folder
    empty = tmp_path / "empty"
    empty.mkdir()
    assert "not an mlx model folder" in refused(
        ["mtp", "extract", src, "--into", str(empty)], capsys
    )
    # the original itself still holds its layer
    err = refused(["mtp", "extract", src, "--into", src], capsys)
    assert "already holds its MTP layer" in err
    assert not (into / "mtp.safetensors").exists()


def test_pickle_only_weights_are_refused_unopened(glm, tmp_path, capsys):
    src = tmp_path / "pickled"
    src.mkdir()
    shutil.copy(glm.original / "config.json", src / "config.json")
    (src / "pytorch_model.bin").write_bytes(b"not to be unpickled")
    into = fresh(glm, tmp_path)
    with OpenedFiles(src) as opened:
        err = refused(["mtp", "extract", str(src), "--into", str(into)], capsys)
    assert "pickle" in err and "pytorch_model.bin" in err
    assert "pytorch_model.bin" not in opened.paths


def test_an_mlx_vlm_split_drafter_is_a_source_too(glm, tmp_path):
    """mlx-vlm's glm4_moe_lite_mtp split layout (flat names, kv_b_proj split, experts stacked,
    its own config) gives the same head as the original's shards."""
    from mlatui.models.mtp_weights import layer_local

    shard = glm.original / "model-00002-of-00002.safetensors"
    local = layer_local(dict(mx.load(str(shard))), glm.layer)
    fp32, _ = load_model(glm.original)
    from mlatui.run.drafts import sanitize_layer

    split = sanitize_layer(fp32, local)  # kv_b_proj split, experts stacked, as split.py does
    top = {"enorm.weight", "hnorm.weight", "eh_proj.weight"}
    flat = {
        ("model." + k if k in top else "model.mtp_block." + k): v
        for k, v in split.items()
        if not k.startswith("shared_head.")
    }
    flat["model.shared_head_norm.weight"] = split["shared_head.norm.weight"]
    flat["model.embed_tokens.weight"] = local["embed_tokens.weight"]
    drafter = tmp_path / "drafter"
    drafter.mkdir()
    cfg = json.loads((glm.original / "config.json").read_text())
    (drafter / "config.json").write_text(json.dumps(dict(cfg, model_type="glm4_moe_lite_mtp")))
    mx.save_safetensors(str(drafter / "model.safetensors"), flat)

    a, b = fresh(glm, tmp_path / "a"), fresh(glm, tmp_path / "b")
    extract(str(drafter), a, check=False)
    extract(str(glm.original), b, check=False)
    ha, hb = mx.load(str(a / "mtp.safetensors")), mx.load(str(b / "mtp.safetensors"))
    assert sorted(ha) == sorted(hb)
    assert all(mx.array_equal(ha[k], hb[k]) for k in ha)


def test_a_hub_id_folder_is_completed_in_the_hub_cache(glm, tmp_path, monkeypatch):
    """`--into mlx-community/...`: the snapshot mlx_lm.load downloaded (hub-cache layout) gets
    the sidecar, and a run given the same hub id finds the head there."""
    import huggingface_hub.constants as hfc

    from mlatui.models.mtp_weights import local_folder

    commit = "fedcba9876543210fedcba9876543210fedcba98"
    repo = tmp_path / "hub" / "models--mlx-community--GLM-tiny-4bit"
    shutil.copytree(glm.converted, repo / "snapshots" / commit)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    monkeypatch.setattr(hfc, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    snapshot = local_folder("mlx-community/GLM-tiny-4bit")
    assert snapshot == (repo / "snapshots" / commit).resolve()
    extract(str(glm.original), "mlx-community/GLM-tiny-4bit", check=False)
    assert (snapshot / "mtp.safetensors").exists()
    model, _ = load_model(snapshot)
    assert load_mtp_draft("mlx-community/GLM-tiny-4bit", model) is not None


def test_a_divergence_at_a_near_tie_is_reported_with_its_margin_not_failed():
    want, margins = [5, 9, 9, 2, 7], [3.0, 2.5, 0.04, 1.9, 4.0]
    tie = judge(32, want, margins, [5, 9, 4, 2, 7], (4, 3))
    assert (tie.diverged_at, tie.margin, tie.passed) == (2, 0.04, True)
    assert "from new token 2" in tie.line() and "0.04 apart (a near-tie" in tie.line()
    wrong = judge(32, want, margins, [5, 4, 9, 2, 7], (4, 3))  # at a 2.5-logit margin
    assert wrong.margin == 2.5 > NEAR_TIE_LOGITS and not wrong.passed
    assert "not a near-tie" in wrong.line() and "FAILED" in wrong.line()
    low = judge(32, want, margins, want, (16, 1))
    assert low.matches_greedy and not low.passed and "implausibly low" in low.line()


@pytest.mark.slow
def test_the_embedded_model_passes_and_a_head_from_another_layer_fails(tmp_path, capsys):
    right = embedded_pair(tmp_path)
    assert main(["mtp", "extract", str(right.original), "--into", str(right.converted)]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("self-check:"))
    accepted, proposed = map(int, line.split()[1].split("/"))
    assert accepted / proposed >= 0.5 and "FAILED" not in line
    wrong = embedded_pair(tmp_path, head_from=5)
    assert main(["mtp", "extract", str(wrong.original), "--into", str(wrong.converted)]) == 1
    assert "implausibly low for a trained head" in capsys.readouterr().out
