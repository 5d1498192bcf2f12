"""`mlatui thresholds`, `mlatui bench attention`, `mlatui calibrate` at tiny sizes."""

import json

import pytest

from mlatui import calibration, families, mla
from mlatui.cli import main


def test_thresholds_family_json(capsys):
    assert main(["thresholds", "--family", "glm4_moe_lite", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["limit"] == 398 and out["geometry"]["num_attention_heads"] == 20
    assert out["thresholds"]["1024"] == 286 and out["thresholds"]["8192"] == 379
    assert set(out["thresholds"]) == {
        "512",
        "1024",
        "2048",
        "4096",
        "8192",
        "16384",
        "32768",
        "131072",
    }


def test_thresholds_nested_config_and_model_folder(tmp_path, capsys):
    (tmp_path / "config.json").write_text(json.dumps(families.config_for("kimi_vl", "full")))
    assert main(["thresholds", "--model", str(tmp_path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["model_type"] == "kimi_vl" and out["limit"] == 170
    assert out["thresholds"]["8192"] == 167
    assert main(["thresholds", "--config", str(tmp_path / "config.json")]) == 0
    text = capsys.readouterr().out
    assert "L <= 170" in text and "| 8,192 | 167 |" in text


@pytest.mark.parametrize(
    "argv,needle",
    [
        (["--config", "/nonexistent/config.json"], "no such file"),
        (["--family", "llama"], "unknown family"),
    ],
)
def test_thresholds_errors(argv, needle, capsys):
    assert main(["thresholds", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and "\n" not in err


def test_thresholds_not_mla(tmp_path, capsys):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama", "hidden_size": 64}))
    assert main(["thresholds", "--model", str(tmp_path)]) == 2
    assert "not an MLA model" in capsys.readouterr().err


def test_bench_attention_writes_records_and_tables(tmp_path, capsys):
    out = tmp_path / "run.jsonl"
    argv = [
        "bench",
        "attention",
        "--family",
        "glm4_moe_lite",
        "--size",
        "tiny",
        "--contexts",
        "96",
        "--widths",
        "1,2,4",
        "--model-widths",
        "1,3",
        "--layers",
        "1",
        "--reps",
        "2",
        "--out",
        str(out),
    ]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert (
        "## (a)" in text
        and "## (b)" in text
        and "formula: " + str(mla.max_absorbed_queries(512, 192, 256, 96)) in text
    )
    records = [json.loads(line) for line in out.read_text().splitlines()]
    forced = [r for r in records if r["bench"] == "attention-forced"]
    model = [r for r in records if r["bench"] == "attention-model"]
    assert {(r["arm"], r["width"]) for r in forced} == {
        (a, w) for a in ("absorbed", "materialised") for w in (1, 2, 4)
    }
    assert {(r["arm"], r["width"]) for r in model} == {
        (a, w) for a in ("stock", "patched") for w in (1, 3)
    }
    for r in records:
        assert len(r["samples_ms"]) == 2 and all(x > 0 for x in r["samples_ms"])
        assert r["context"] == 96 and r["env"]["backend"] == "cpu" and r["median_ms"] > 0
    assert all(r["settings"]["geometry"] == "r512-n192-v256" for r in records)


def test_bench_attention_rejects_hybrid_part_b(capsys):
    assert (
        main(["bench", "attention", "--family", "kimi_linear", "--size", "tiny", "--part", "b"])
        == 2
    )
    assert "use --part a" in capsys.readouterr().err


def test_calibrate_stores_and_loads(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(calibration.CACHE_ENV, str(tmp_path))
    geometry = mla.Geometry(512, 128, 128, 2)
    assert calibration.load_crossovers(geometry) is None
    argv = [
        "calibrate",
        "--family",
        "deepseek_v3",
        "--size",
        "tiny",
        "--contexts",
        "64,128",
        "--max-width",
        "8",
        "--reps",
        "1",
    ]
    assert main(argv) == 0
    assert "stored for r512-n128-v128" in capsys.readouterr().out
    found = calibration.load_crossovers(geometry)
    assert set(found) == {64, 128} and all(1 <= w <= 8 for w in found.values())
    files = list((tmp_path / "calibration").glob("*.json"))
    assert len(files) == 1 and "r512-n128-v128" in json.loads(files[0].read_text())
    model = families.build_model("deepseek_v3", layers=1)
    report = mla.patch_model(model, threshold="calibrated")
    assert report.policy == "calibrated" and report.threshold == found[128]


def test_find_crossover_bisects():
    probes = []

    def faster(w):
        probes.append(w)
        return w <= 300

    assert calibration.find_crossover(faster, 2048) == 300
    assert len(probes) <= 13
    assert calibration.find_crossover(lambda w: True, 64) == 64
    assert calibration.find_crossover(lambda w: w == 1, 64) == 1


def test_calibrated_falls_back_with_warning(tmp_path, monkeypatch):
    monkeypatch.setenv(calibration.CACHE_ENV, str(tmp_path))
    model = families.build_model("deepseek_v3", layers=1)
    with pytest.warns(UserWarning, match="mlatui calibrate"):
        report = mla.patch_model(model, threshold="calibrated")
    assert report.policy == "formula" and report.threshold == 170


def test_bench_attention_dtype_bfloat16_forced_branches(tmp_path, capsys):
    from mlatui.cli import main

    out = tmp_path / "bf16.jsonl"
    args = ["bench", "attention", "--family", "glm4_moe_lite", "--size", "tiny", "--part", "a"]
    args += ["--contexts", "128", "--widths", "1,2", "--reps", "3", "--dtype", "bfloat16"]
    assert main([*args, "--out", str(out)]) == 0
    assert "bfloat16" in capsys.readouterr().out
    import json

    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert records and all(r["settings"]["dtype"] == "mlx.core.bfloat16" for r in records)
