"""`bench context-pair`: one arm, two context lengths, alternated inside every A B B A quad."""

from __future__ import annotations

import json
from pathlib import Path

from mlatui.config.scenario import load_scenario
from mlatui.gate.policy import Variant
from mlatui.models.loading import load_target
from mlatui.run.context_pair import ContextPairPlan, measure_context_pair
from mlatui.run.engine_setup import text_tokens
from tests.engine_run import cli_in_process

TINY = Path(__file__).parent / "fixtures" / "tiny.toml"


def _tiny():
    scenario = load_scenario(TINY)
    return load_target(None, scenario, True, 0)


def test_the_lengths_alternate_inside_every_quad_and_caches_keep_their_length():
    loaded = _tiny()
    plan = ContextPairPlan((32, 96), (1, 2), rounds=4, seed=0)
    results, run = measure_context_pair(loaded.model, text_tokens(loaded, 0), plan)
    # the timed calls, in order: each quad is A B B A of the two lengths, never one length twice
    slots = [t.arm for t in run.timings]
    assert set(slots) == {"96", "32"}
    for i in range(0, len(slots), 4):
        a, b, c, d = slots[i : i + 4]
        assert a == d and b == c and a != b, slots[i : i + 4]
    firsts = [slots[i] for i in range(0, len(slots), 4)]
    assert firsts.count("96") == firsts.count("32")  # each length opens equally often
    by_width = {r.width: r for r in results}
    assert set(by_width) == {1, 2}
    for r in results:
        assert r.rounds == 4
        assert r.growth.low <= r.growth.median <= r.growth.high
        assert r.growth.n == 4  # one quad per width per round
        assert len(r.samples_ms[32]) == len(r.samples_ms[96]) == 8
        for c in (32, 96):
            ms = r.step_ms[c]
            assert ms.low <= ms.median <= ms.high and ms.median > 0


def test_stock_variant_and_random_latents_and_a_time_limit():
    loaded = _tiny()
    plan = ContextPairPlan(
        (32, 64),
        (1, 3),
        rounds=40,
        seed=0,
        variant=Variant.STOCK,
        fill="random-latents",
        max_seconds=0.0,
    )
    results, run = measure_context_pair(loaded.model, text_tokens(loaded, 0), plan)
    assert run.rounds == 2  # stopped after the first whole pair of rounds
    assert {r.width for r in results} == {1, 3}


def _cli(capsys, *args: str) -> tuple[int, str, str]:
    """`mlatui bench context-pair` on the tiny scenario, in this process."""
    return cli_in_process(capsys, "bench", "context-pair", str(TINY), "--random-weights", *args)


def test_cli_prints_the_paired_table_and_keeps_raw_samples(tmp_path, capsys):
    out = tmp_path / "pair.jsonl"
    code, stdout, stderr = _cli(
        capsys, "--contexts", "32,96", "--widths", "1,2", "--rounds", "2", "--out", str(out)
    )
    assert code == 0, stderr[-2000:]
    assert "| L | 32 ms [95% CI] | 96 ms [95% CI] | 96 / 32 paired [95% CI] |" in stdout
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert {(r["context"], r["width"]) for r in records} == {(32, 1), (96, 1), (32, 2), (96, 2)}
    assert all(r["bench"] == "context-pair" and r["arm"] == "patched" for r in records)
    assert all(len(r["samples_ms"]) == 4 for r in records)  # 2 rounds x 2 calls per length
    s = records[0]["settings"]
    assert s["growth_low"] <= s["growth"] <= s["growth_high"] and s["rounds_done"] == 2
    assert records[0]["env"]["blas_threading"]


def test_cli_refuses_bad_contexts_in_one_line(capsys):
    code, _, stderr = _cli(capsys, "--contexts", "96,32")
    assert code == 2 and "give two lengths, short first" in stderr
    assert len(stderr.strip().splitlines()) == 1 and "Traceback" not in stderr
