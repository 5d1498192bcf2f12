"""`mlatui thresholds`, `mlatui bench attention`, `mlatui calibrate` at tiny sizes."""

import json
import statistics

import pytest

# Imported before any test swaps sys.stderr: StderrProgress binds `stream=sys.stderr` when its
# module is imported, so a first import inside one capsys test would leave it writing to that
# test's closed stream in the next.
import mlatui.commands.bench_scenario  # noqa: F401
from mlatui import store as calibration
from mlatui.bench import attention
from mlatui.bench import attention as attnbench
from mlatui.cli import main
from mlatui.gate import mla
from mlatui.measure import records as forced
from mlatui.measure.sampler import round_schedule
from mlatui.models import families
from mlatui.stream.event_base import Interval
from tests.random_models import build_model


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


def _attention(*args):
    return ["bench", "attention", "--family", "glm4_moe_lite", "--size", "tiny", *args]


def _records(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def _events(path):
    from mlatui.stream.recorder import read_recording

    return read_recording(path)


def test_bench_attention_part_a_pairs_through_the_sampler(tmp_path, capsys):
    out = tmp_path / "run.jsonl"
    argv = _attention("--part", "a", "--contexts", "96", "--widths", "1,2,4", "--reps", "2")
    assert main([*argv, "--bits", "4", "--dtype", "float32", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "float32, 4-bit weights; (a): 2 rounds per context)" in text.splitlines()[0]
    assert "| absorbed ms | absorbed GB/s | absorbed MBU | materialised ms |" in text
    assert "MBU against the measured read" in text
    assert "formula: " + str(mla.max_absorbed_queries(512, 192, 256, 96)) in text
    records = _records(out)
    assert {(r["arm"], r["width"]) for r in records} == {
        (a, w) for a in ("absorbed", "materialised") for w in (1, 2, 4)
    }
    for r in records:
        s = r["settings"]
        assert r["bench"] == "attention-forced" and r["context"] == 96
        assert s["dtype"] == "float32" and s["bits"] == 4 and s["rounds"] == 2
        # one A B B A quad per width and round: two samples per arm and round, rounds 0 and 1
        assert s["sample_rounds"] == [0, 0, 1, 1] and len(r["samples_ms"]) == 4
        assert all(x > 0 for x in r["samples_ms"])
        # the estimate is the median over rounds of the per-round means of these raw samples
        means = [statistics.fmean(r["samples_ms"][i : i + 2]) for i in (0, 2)]
        assert s["step_ms"]["median"] == pytest.approx(statistics.median(means))
        ratio = s["ratio_absorbed_over_materialised"]
        assert ratio["low"] <= ratio["median"] <= ratio["high"] and ratio["rounds"] == 2
        assert r["note"] in ("absorbed faster", "materialised faster", "tie (within noise)")
        row = next(line for line in text.splitlines() if line.startswith(f"| 96 | {r['width']} |"))
        assert r["note"] in row and f"{ratio['median']:.3f} [" in row


def _fake_measure(ms_of, calls):
    """A stand-in for attnbench.forced_measure: deterministic times, every call recorded."""

    def factory(arms, cache, widths):
        def measure(arm, width):
            calls.append((width, arm))
            return ms_of(arm, width)

        return measure

    return factory


def test_bench_attention_part_a_verdicts_crossover_and_schedule(monkeypatch, capsys):
    def ms_of(arm, width):  # absorbed 2x faster up to L=2, equal at 4, 3x slower at 8
        absorbed = {1: 1.0, 2: 1.0, 4: 2.0, 8: 3.0}[width]
        return absorbed if arm == "absorbed" else {1: 2.0, 2: 2.0, 4: 2.0, 8: 1.0}[width]

    calls = []
    monkeypatch.setattr(attnbench, "forced_measure", _fake_measure(ms_of, calls))
    argv = _attention("--part", "a", "--contexts", "64", "--widths", "8,1,4,2", "--reps", "3")
    assert main(argv) == 0
    text = capsys.readouterr().out
    rows = {
        w: next(x for x in text.splitlines() if x.startswith(f"| 64 | {w} |")) for w in (1, 2, 4, 8)
    }
    assert "absorbed faster" in rows[1] and "absorbed faster" in rows[2]
    assert "tie (within noise)" in rows[4] and "materialised faster" in rows[8]
    assert "0.500 [0.500, 0.500]" in rows[1] and "3.000 [3.000, 3.000]" in rows[8]
    assert (
        "measured crossover (largest L where absorbed is significantly faster, 4 rounds): 2;"
        in text
    )
    # warm-up (one untimed call per arm and width), then 3 rounds rounded up to 4, each round
    # exactly the sampler's schedule: every width, an A B B A quad (mirrored on odd rounds)
    widths = (1, 2, 4, 8)
    warmup = [(w, a) for w in widths for a in ("absorbed", "materialised")]
    rounds = [
        round_schedule(widths, r, ("absorbed", "materialised"), control_width=None)
        for r in range(4)
    ]
    a, m = "absorbed", "materialised"

    def settled(schedule):  # before each quad: an untimed step per arm at the smallest width
        out = []
        for i in range(0, len(schedule), 4):
            opening = schedule[i][1]
            out += [(1, m if opening == a else a), (1, opening), *schedule[i : i + 4]]
        return out

    assert calls == warmup + [c for r in rounds for c in settled(r)]
    assert rounds[0][:4] == [(1, a), (1, m), (1, m), (1, a)]
    assert rounds[1][:4] == [(1, m), (1, a), (1, a), (1, m)]  # the mirror, same order
    assert rounds[2][:4] == [(2, a), (2, m), (2, m), (2, a)]  # the next pair: widths rotated


def test_verdict_and_crossover_from_the_ratio_ci():
    def iv(lo, med, hi):
        return Interval(med, lo, hi, 6)

    assert forced.verdict(iv(0.90, 0.95, 0.99)) == "absorbed faster"
    assert forced.verdict(iv(0.97, 0.99, 1.01)) == "tie (within noise)"
    assert forced.verdict(iv(1.01, 1.05, 1.10)) == "materialised faster"
    assert forced.verdict(Interval(float("nan"), float("nan"), float("nan"), 0)) == (
        "tie (within noise)"
    )
    ratios = {
        1: iv(0.5, 0.6, 0.7),
        4: iv(0.8, 0.9, 0.95),
        8: iv(0.9, 0.99, 1.05),
        16: iv(1.1, 1.2, 1.3),
    }
    assert forced.crossover(ratios) == 4  # 8 is a tie: not significantly faster
    assert forced.crossover({16: iv(1.1, 1.2, 1.3)}) is None


def test_bench_attention_both_parts(tmp_path, capsys):
    out = tmp_path / "run.jsonl"
    # --model-widths 1: the stock arm's L > 1 steps (materialised) cost ~40 ms each on a small CPU
    argv = _attention("--contexts", "96", "--widths", "1,2", "--model-widths", "1")
    assert main([*argv, "--layers", "1", "--reps", "3", "--out", str(out)]) in (0, 3)
    text = capsys.readouterr().out
    assert "## (a)" in text and "## (b)" in text and "## Phase sweep (sweep)" in text
    assert {r["bench"] for r in _records(out)} == {"attention-forced"}
    rec = _events(tmp_path / "attention-glm4_moe_lite.events.jsonl")
    assert rec.header.scenario.model_source == "random"
    assert rec.header.scenario.fill == "prefill"
    assert rec.header.geometry["num_mla_layers"] == 1  # --layers 1 (the tiny config has 2)
    assert any(e.type == "run_end" and e.status == "completed" for e in rec.events)


def test_bench_attention_part_b_runs_the_engine_sweep(tmp_path, capsys):
    from mlatui.config.scenario import load_scenario

    out = tmp_path / "run.jsonl"
    argv = _attention("--part", "b", "--layers", "2", "--contexts", "64,128")
    argv += ["--model-widths", "1", "--reps", "3", "--fill", "random-latents", "--out", str(out)]
    assert main(argv) in (0, 3)  # 3: the L = 1 check was not decided valid on a busy CPU
    text = capsys.readouterr().out
    toml = tmp_path / "attention-glm4_moe_lite.toml"
    record = tmp_path / "attention-glm4_moe_lite.events.jsonl"
    assert f"rerun: mlatui bench {toml} --random-weights" in text
    assert f"recording: {record}" in text and "## Phase sweep (sweep)" in text
    assert not out.exists()  # part (a) did not run
    scenario = load_scenario(toml)
    assert scenario.model.source == "random" and scenario.model.family == "glm4_moe_lite"
    assert scenario.model.dtype == "float32" and scenario.model.fill == "random-latents"
    assert scenario.model.config == families.config_for("glm4_moe_lite", "tiny", layers=2)
    (phase,) = scenario.phases
    assert (phase.kind, phase.contexts, phase.widths, phase.reps) == ("sweep", (64, 128), (1,), 3)
    rec = _events(record)
    assert rec.header.scenario.model_source == "random"
    assert rec.header.scenario.fill == "random-latents"
    assert rec.header.model == "random:glm4_moe_lite"
    assert rec.header.geometry["num_mla_layers"] == 2
    steps = {(e.arm, e.context, e.width) for e in rec.events if e.type == "step"}
    assert steps == {(a, t, 1) for a in ("stock", "patched") for t in (64, 128)}
    assert any(e.type == "run_end" and e.status == "completed" for e in rec.events)


def test_part_b_scenarios_round_trip_for_every_trimmable_family(tmp_path):
    import tomllib

    from mlatui.bench.attention_scenario import AttentionModel, Sweep
    from mlatui.commands.bench_attention import _check_round_trip, scenario_toml
    from mlatui.config.scenario import load_scenario

    for name, fam in families.FAMILIES.items():
        if fam.hybrid:
            continue
        model = AttentionModel(name, "tiny", "bfloat16", 4)
        text, config = scenario_toml(model, 2, "prefill", Sweep([64], [4, 2], 3))
        path = tmp_path / f"{name}.toml"
        path.write_text(text)
        scenario = load_scenario(path)
        assert scenario.phases[0].widths == (1, 2, 4), name  # the L = 1 control is always in
        assert scenario.model.config == config and scenario.model.bits == 4, name
        assert scenario.model.dtype == "bfloat16" and scenario.draft.source == "none", name
        _check_round_trip(name, config, tomllib.loads(text)["model"]["config"])


def test_part_b_refuses_a_config_toml_cannot_express(capsys):
    # kimi_vl's full text config has q_lora_rank = None; mlx-lm's default is 1536
    argv = ["bench", "attention", "--family", "kimi_vl", "--part", "b", "--layers", "1"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "q_lora_rank=None" in err and "use --part a" in err and "\n" not in err


@pytest.mark.parametrize(
    "argv,needle",
    [
        (["--reps", "0"], "--reps: expected an integer >= 2"),
        (["--part", "a", "--reps", "1"], "--reps: expected an integer >= 2"),
        (["--reps", "2"], "--reps: expected an integer >= 3 (part (b)"),
        (["--reps", "x"], "--reps: expected an integer"),
        (["--contexts", "inf"], "--contexts: 'inf': expected comma-separated integers"),
        (["--contexts", "infk"], "--contexts: 'infk': expected comma-separated integers"),
        (["--contexts", "0"], "expected positive integers"),
        (["--part", "b", "--contexts", "8"], "part (b) needs contexts >= 16"),
        (["--layers", "0"], "--layers: expected an integer >= 1"),
        (["--bits", "7"], "--bits: expected one of 2, 3, 4, 5, 6, 8"),
        (["--widths", "1,x"], "--widths: '1,x'"),
    ],
)
def test_bench_attention_bad_args_are_one_line_errors(argv, needle, capsys):
    assert main(_attention(*argv)) == 2
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert needle in err and "\n" not in err and err.startswith("mlatui: error: ")
    assert captured.out == ""  # refused before anything ran


@pytest.mark.parametrize(
    "argv,needle",
    [
        (["--reps", "1"], "--reps: expected an integer >= 2"),
        (["--contexts", "inf"], "--contexts: 'inf'"),
        (["--max-width", "1"], "--max-width: expected an integer >= 2"),
        (["--bits", "16"], "--bits: expected one of 2, 3, 4, 5, 6, 8"),
    ],
)
def test_calibrate_bad_args_are_one_line_errors(argv, needle, capsys):
    assert main(["calibrate", "--family", "deepseek_v3", "--size", "tiny", *argv]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert needle in err and "\n" not in err and captured.out == ""


def test_calibrate_stores_and_loads(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(calibration.CACHE_ENV, str(tmp_path))
    geometry = mla.Geometry(512, 128, 128, 2)
    assert calibration.load_crossovers(geometry) is None
    argv = ["calibrate", "--family", "deepseek_v3", "--size", "tiny", "--contexts", "64,128"]
    argv += ["--max-width", "8", "--reps", "2", "--dtype", "bfloat16", "--bits", "4"]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "bfloat16, 4-bit weights, 2 rounds per probe" in text.splitlines()[0]
    assert "stored for r512-n128-v128 (bfloat16, 4-bit)" in text
    found = calibration.load_crossovers(geometry)
    assert set(found) == {64, 128} and all(1 <= w <= 8 for w in found.values())
    files = list((tmp_path / "calibration").glob("*.json"))
    assert len(files) == 1
    entry = json.loads(files[0].read_text())["r512-n128-v128"]
    assert entry["dtype"] == "bfloat16" and entry["bits"] == 4 and entry["rounds_per_probe"] == 2
    model = build_model("deepseek_v3", layers=1)
    report = mla.patch_model(model, threshold="calibrated")
    assert report.policy == "calibrated" and report.threshold == found[128]


def test_calibrate_bisects_on_the_paired_ratio(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(calibration.CACHE_ENV, str(tmp_path))

    def ms_of(arm, width):  # absorbed faster up to 5, equal at 6 (within noise), slower above
        if width <= 5:
            return 1.0 if arm == "absorbed" else 2.0
        if width == 6:
            return 1.0
        return 2.0 if arm == "absorbed" else 1.0

    calls = []
    monkeypatch.setattr(attnbench, "forced_measure", _fake_measure(ms_of, calls))
    argv = ["calibrate", "--family", "deepseek_v3", "--size", "tiny", "--contexts", "64"]
    assert main([*argv, "--max-width", "16", "--reps", "2", "--dtype", "float32"]) == 0
    captured = capsys.readouterr()
    assert "| 64 | 5 | 46 | 5 | 6 |" in captured.out  # probes 16, 8, 4, 6, 5; 6 within noise
    assert "T=64 L=6:" in captured.err and "CI straddles 1: within noise" in captured.err
    assert calibration.load_crossovers(mla.Geometry(512, 128, 128, 2)) == {64: 5}
    # each probe: one warm-up call per arm, then 2 rounds of one quad (A B B A, then B A A B),
    # each quad after an untimed settle step per arm (the opening arm last)
    assert [w for w, _ in calls[::14]] == [16, 8, 4, 6, 5] and len(calls) == 5 * 14
    a, m = "absorbed", "materialised"
    assert [arm for _, arm in calls[:14]] == [a, m, m, a, a, m, m, a, a, m, m, a, a, m]
    assert {w for w, _ in calls[:14]} == {16}


def test_find_crossover_bisects():
    probes = []

    def faster(w):
        probes.append(w)
        return w <= 300

    assert attention.find_crossover(faster, 2048) == 300
    assert len(probes) <= 13
    assert attention.find_crossover(lambda w: True, 64) == 64
    assert attention.find_crossover(lambda w: w == 1, 64) == 1


def test_calibrated_falls_back_with_warning(tmp_path, monkeypatch):
    monkeypatch.setenv(calibration.CACHE_ENV, str(tmp_path))
    model = build_model("deepseek_v3", layers=1)
    with pytest.warns(UserWarning, match="mlatui calibrate"):
        report = mla.patch_model(model, threshold="calibrated")
    assert report.policy == "formula" and report.threshold == 170


def test_bench_attention_dtype_bfloat16_forced_branches(tmp_path, capsys):
    out = tmp_path / "bf16.jsonl"
    args = _attention("--part", "a", "--contexts", "128", "--widths", "1,2", "--reps", "3")
    assert main([*args, "--dtype", "bfloat16", "--out", str(out)]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert "bfloat16, unquantised weights; (a): 4 rounds per context)" in first  # 3 -> 4
    records = _records(out)
    assert records and all(r["settings"]["dtype"] == "bfloat16" for r in records)
    assert all(r["settings"]["bits"] is None for r in records)
