"""The tune phase end to end on tiny models: guards, divergence, sampled reproducibility."""

from __future__ import annotations

from pathlib import Path

import mlx.core as mx
from tiny_scenario import tiny_with_phase

import mlatui.run.engine
from mlatui.config.run_plan import RunConfig
from mlatui.run.arms import cache_len
from mlatui.stream.events import DecodeBlock, DecodeResult, LogMessage, PhaseSummary
from tests.engine_run import cli_in_process, run

TINY = Path(__file__).parent / "fixtures" / "tiny.toml"


def _tiny_tune(tmp_path: Path, acceptance: float, extra: str = "") -> Path:
    phase = (
        'name = "tune"\nkind = "tune"\ncontexts = [64]\ndepths = [1, 2]\n'
        f"tokens = 8\nreps = 2\nmax_rounds = 2\nwarmup = 1\nreject_by_bound = false\nverify_rounds = 2\n{extra}"
    )
    return tiny_with_phase(tmp_path / "tune.toml", phase, acceptance)


def test_an_injected_barely_speculating_run_is_flagged_and_excluded(tmp_path):
    events = []
    scenario = _tiny_tune(tmp_path, 0.02)
    assert run(RunConfig(scenario=str(scenario), random_weights=True), events.append) in (
        "completed",
        "invalid",
    )
    results = [e for e in events if isinstance(e, DecodeResult) and e.depth > 0]
    assert results and all(any("barely speculated" in w for w in r.warnings) for r in results)
    summary = next(e for e in events if isinstance(e, PhaseSummary))
    assert "wins" not in summary.verdict
    assert all(
        "left out" in part or "no usable speculative result" in part
        for part in summary.verdict.split("; ")
    ), summary.verdict
    # a run that drafts (acceptance 0.75) is not flagged: test_engine's shared tiny run


FORCED_TOKEN = 3  # the patched arm's stream is made to differ at this emitted token


def test_a_forced_divergence_is_reported_at_its_position(tmp_path, monkeypatch):
    original = mlatui.run.engine.build_arms

    def diverging(model, *args, **kwargs):
        stock, patched = original(model, *args, **kwargs)
        inner = patched.model

        class Flip:
            """Negates the logits predicting stream token FORCED_TOKEN after a 64-token context:
            the argmax becomes the former argmin, so the arms must differ exactly there."""

            def __call__(self, x, cache=None):
                start = cache_len(cache)
                out = inner(x, cache=cache)
                row = 64 + FORCED_TOKEN - 1 - start
                if 0 <= row < x.shape[1]:
                    flip = (mx.arange(x.shape[1]) == row)[None, :, None]  # (1, L, 1)
                    out = mx.where(flip, -out, out)
                return out

            def __getattr__(self, name):
                return getattr(inner, name)

        patched.model = Flip()
        return stock, patched

    monkeypatch.setattr(mlatui.run.engine, "build_arms", diverging)
    events = []
    run(RunConfig(scenario=str(_tiny_tune(tmp_path, 0.8)), random_weights=True), events.append)
    (msg,) = [e.message for e in events if isinstance(e, LogMessage) and "diverged" in e.message]
    assert f"arms diverged at token {FORCED_TOKEN} (round 1" in msg
    blocks = [e for e in events if isinstance(e, DecodeBlock) and e.round == 0]
    first = {e.arm: e for e in reversed(blocks)}  # each arm's first timed block of round 1
    s, p = first["stock"].token_ids, first["patched"].token_ids
    assert (
        s[: FORCED_TOKEN - 1] == p[: FORCED_TOKEN - 1]
        and s[FORCED_TOKEN - 1] != p[FORCED_TOKEN - 1]
    )


# the tiny model with its random draft model: sampling, not the weights, is what must reproduce
SAMPLED = (
    TINY.read_text()
    .split("[[phase]]")[0]
    .replace("seed = 0", "seed = 3\ntemperature = 0.8\ntop_p = 0.95")
    .replace('source = "synthetic"', 'source = "draft-model"')
    + """[[phase]]
name = "tune"
kind = "tune"
contexts = [64]
depths = [2]
tokens = 6
reps = 2
max_rounds = 2  # no adaptive rounds: their number depends on timing, the tokens must not
warmup = 1
reject_by_bound = false
verify_rounds = 2
"""
)


def test_sampled_runs_reproduce_exactly_from_the_seed(tmp_path):
    streams = []
    for seed in (3, 3, 4):
        path = tmp_path / f"s{seed}.toml"
        path.write_text(SAMPLED.replace("seed = 3", f"seed = {seed}"))
        events = []
        run(RunConfig(scenario=str(path), random_weights=True), events.append)
        blocks = [e for e in events if isinstance(e, DecodeBlock)]
        assert blocks and all(b.temperature == 0.8 for b in blocks)
        assert {b.acceptance_rule for b in blocks if b.depth} == {"exact-match"}
        streams.append([(b.arm, b.depth, b.round, b.token_ids, b.accepted) for b in blocks])
        result = next(e for e in events if isinstance(e, DecodeResult) and e.depth == 2)
        assert result.sampling == {"temperature": 0.8, "top_p": 0.95}
    assert streams[0] == streams[1]
    assert streams[0] != streams[2]


def _parity(capsys, *args: str) -> tuple[int, str, str]:
    """`mlatui bench decode-parity` on the tiny scenario, in this process."""
    return cli_in_process(capsys, "bench", "decode-parity", str(TINY), "--random-weights", *args)


def test_decode_parity_bench_prints_paired_ratios_and_keeps_records(tmp_path, capsys):
    import json

    out = tmp_path / "parity.jsonl"
    code, stdout, stderr = _parity(
        capsys,
        "--context",
        "64",
        "--tokens",
        "6",
        "--depth",
        "2",
        "--rounds",
        "2",
        "--out",
        str(out),
    )
    assert code in (0, 3), stderr[-2000:]
    assert "| plain | mlx_lm |" in stdout and "| depth 2 | mlx_lm |" in stdout
    assert "| plain | sync-loop |" in stdout and "| plain | mlx_lm-thread |" in stdout
    records = [json.loads(line) for line in out.read_text().splitlines()]
    sides = {(r["arm"], r["settings"]["versus"], r["width"]) for r in records}
    assert sides == {
        ("mlatui", "mlx_lm", 1),
        ("mlx_lm", "mlx_lm", 1),
        ("mlatui", "mlx_lm", 3),
        ("mlx_lm", "mlx_lm", 3),
        ("mlatui", "mlx_lm-thread", 1),
        ("mlx_lm-thread", "mlx_lm-thread", 1),
        ("mlatui", "mlx_lm-thread", 3),
        ("mlx_lm-thread", "mlx_lm-thread", 3),
        ("mlatui", "sync-loop", 1),
        ("sync-loop", "sync-loop", 1),
    }
    # raw samples beside the summary: 2 rounds x 2 blocks per side, plus the ratio and its CI
    assert all(len(r["samples_ms"]) == 4 for r in records)
    assert all(
        r["settings"]["ratio_low"] <= r["settings"]["ratio"] <= r["settings"]["ratio_high"]
        for r in records
    )
    # `--out` never overwrites
    code, _, stderr = _parity(
        capsys, "--context", "64", "--tokens", "6", "--rounds", "2", "--out", str(out)
    )
    assert code == 2 and "already exists" in stderr and "Traceback" not in stderr


def test_decode_parity_versus_runs_only_the_named_side(tmp_path, capsys):
    import json

    # one side named, and a time limit that ends the rounds early, after a whole pair, and
    # still leaves the records
    quick = tmp_path / "quick.jsonl"
    code, stdout, stderr = _parity(
        capsys, "--context", "64", "--tokens", "6", "--rounds", "40", "--versus", "mlx_lm-thread",
        "--max-seconds", "0.01", "--out", str(quick),
    )  # fmt: skip
    assert code in (0, 3), stderr[-2000:]
    assert "| plain | mlx_lm-thread |" in stdout and "| depth 2 | mlx_lm-thread |" in stdout
    assert "| mlx_lm |" not in stdout and "sync-loop |" not in stdout
    records = [json.loads(line) for line in quick.read_text().splitlines()]
    assert {r["settings"]["versus"] for r in records} == {"mlx_lm-thread"}
    assert {r["settings"]["rounds_done"] for r in records} == {2}
    assert all(len(r["samples_ms"]) == 4 for r in records)  # 2 rounds x 2 blocks per side
    code, _, stderr = _parity(capsys, "--versus", "mlx_lm,vllm")
    assert code == 2 and "--versus 'mlx_lm,vllm'" in stderr
    assert len(stderr.strip().splitlines()) == 1 and "Traceback" not in stderr


def test_a_draft_with_another_vocabulary_is_refused_in_one_line(tmp_path):
    from tests.checkpoints import save_random_checkpoint

    target = save_random_checkpoint(tmp_path / "target", "deepseek_v3", seed=1)
    draft = save_random_checkpoint(
        tmp_path / "draft", "deepseek_v3", layers=1, seed=2, vocab_size=1024
    )
    scenario = tmp_path / "d.toml"
    scenario.write_text(
        '[model]\nsource = "path"\n'
        '[[phase]]\nkind = "decode"\ncontexts = [80]\ndepths = [1]\ntokens = 8\nwarmup = 1\n'
    )
    events = []
    config = RunConfig(model=str(target), draft_model=str(draft), scenario=str(scenario))
    assert run(config, events.append) == "error"
    (error,) = [e for e in events if e.type == "error"]
    assert "vocabulary of 1024 tokens" in error.message and "\n" not in error.message
    assert not [e for e in events if e.type in ("step", "decode_block")]  # refused before any step
