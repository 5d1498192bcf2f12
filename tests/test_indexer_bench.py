"""The indexer bench and the engine's indexer phase, through the one sampler, at tiny sizes."""

from __future__ import annotations

import argparse
import time
from collections import Counter

import mlx.core as mx
import numpy as np
import pytest

from mlatui.bench import indexer as indexer_bench
from mlatui.bench.indexer import (
    CONTROL_QUADS,
    IndexerGrid,
    PartBuild,
    Rounds,
    default_plan,
    measure_part,
    run_indexer_bench,
)
from mlatui.gate.policy import STOCK_GATES
from mlatui.measure.estimates import Outcome, Timing, control_outcome, estimate_context
from mlatui.measure.records import IndexerRecord
from mlatui.measure.sampler import round_schedule
from mlatui.models.indexer import Indexer, IndexerCache, pool_windows
from mlatui.models.sparse_mla import rewind
from mlatui.run.phases.indexer import indexer_verdict
from mlatui.stream.event_base import Interval
from mlatui.stream.phase_rows import IndexerRow
from tests.test_indexer import KPOOL, small_config

OUTCOMES = {o.value for o in Outcome}


def slow_stock_at_s1(monkeypatch, extra_s: float = 0.005) -> None:
    """The stock arm's S = 1 step sleeps `extra_s` more, inside the timed region."""
    original = Indexer.__call__

    def slow(self, x, qr, cache=None, valid=None):
        if self.mode == "stock" and x.shape[1] == 1:
            time.sleep(extra_s)
        return original(self, x, qr, cache, valid)

    monkeypatch.setattr(Indexer, "__call__", slow)


def timings_of(records: list[IndexerRecord]) -> list[Timing]:
    """The samples back in the order they were taken (quads are recovered from the order)."""
    found = [
        (i, Timing(rnd, r.width, r.arm, ms))
        for r in records
        for rnd, ms, i in zip(r.rounds, r.samples_ms, r.order, strict=True)
    ]
    return [t for _, t in sorted(found, key=lambda x: x[0])]


# The rewind ---------------------------------------------------------------------------------


def _indexer(seed=0) -> Indexer:
    mx.random.seed(seed)
    ix = Indexer(small_config(q_lora_rank=None), "patched")
    ix.compress_ape = mx.random.normal(ix.compress_ape.shape) * 0.5
    mx.eval(ix.parameters())
    return ix


def _x(n, seed):
    return mx.random.normal((1, n, 32), key=mx.random.key(seed))


@pytest.mark.parametrize("width", [2, 3, 4])
@pytest.mark.parametrize("context", [24, 26])  # aligned and inside a window
def test_rewind_restores_the_steady_state_exactly(context, width):
    """After a step and a rewind, the next step reuses the pool (unlike a plain trim, which is the
    rejection case) and selects and pools exactly what it would on a cache of `context` tokens."""
    ix = _indexer()
    x = _x(context, 1)
    base = IndexerCache()
    ix(x, x, base)
    ix(_x(1, 2), _x(1, 2), base)  # an S = 1 step: the pool is current at context + 1
    base.trim(1)
    base.pool_length = context  # (what rewind does, by hand, for the reference)
    y, z = _x(width, 3), _x(width, 4)

    rewound = base.copy()
    ix(y, y, rewound)
    rewind(rewound, rewound, context)
    assert rewound.offset == rewound.pool_length == context
    got = ix(z, z, rewound)
    assert rewound.last_reused and rewound.rebuilds == base.rebuilds

    fresh = base.copy()  # never saw y: the true state at `context`
    want = ix(z, z, fresh)
    for a, b in zip(got, want, strict=True):
        assert mx.array_equal(a, b)
    assert mx.array_equal(rewound.pooled_keys(), fresh.pooled_keys())
    full = pool_windows(
        rewound.keys[:, :, : rewound.offset],
        rewound.gates[:, :, : rewound.offset],
        KPOOL,
        ix.compress_ape,
    )
    np.testing.assert_allclose(np.array(rewound.pooled_keys()), np.array(full), atol=1e-6)

    trimmed = base.copy()  # a plain trim: the guard refuses the stale pool and rebuilds
    ix(y, y, trimmed)
    trimmed.trim(width)
    ix(z, z, trimmed)
    assert not trimmed.last_reused


@pytest.mark.parametrize("part", ["indexer", "sparse-layer"])
@pytest.mark.parametrize("context", [64, 66])
def test_every_sample_starts_at_the_context_and_patched_never_rebuilds(part, context):
    plan = default_plan(part, context, (1, 2, 4), Rounds(2, 1, 2))
    result = measure_part(part, context, plan, PartBuild(small_config(), "float32"))
    counts = Counter((t.arm, t.width) for t in result.run.timings)
    for (arm, width), lengths in result.lengths.items():
        assert lengths == {context}  # every arm, width, round and position: the same cache
        pool, n = result.pool[(arm, width)], counts[(arm, width)]
        assert n > 0 and pool["rebuilds"] + pool["reuses"] == n  # timed calls only
        if arm == "patched" or width == 1:
            assert pool == {"rebuilds": 0, "reuses": n}
        else:  # the defect: stock re-pools the whole cache on every S > 1 step
            assert pool == {"rebuilds": n, "reuses": 0}


# The bench ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_records():
    return run_indexer_bench(
        IndexerGrid([64], [1, 2, 4]), Rounds(2, 1, 4), PartBuild(small_config())
    )


def test_bench_runs_through_the_sampler_and_keeps_raw_samples_with_rounds(tiny_records):
    cells = {(r.bench, r.width, r.arm) for r in tiny_records}
    assert cells == {
        (p, w, a)
        for p in ("indexer", "sparse-layer")
        for w in (1, 2, 4)
        for a in ("stock", "patched")
    }
    for part in ("indexer", "sparse-layer"):
        mine = [r for r in tiny_records if r.bench == part]
        n_rounds = mine[0].n_rounds
        assert n_rounds in (2, 4)  # whole mirrored pairs, min 2, max 4
        plan = default_plan(part, 64, (1, 2, 4), Rounds(2, 1, 4))
        want = Counter(
            (w, arm)
            for r in range(n_rounds)
            for w, arm in round_schedule(plan.widths, r, plan.arms, 1, CONTROL_QUADS)
        )
        for r in mine:
            assert len(r.samples_ms) == len(r.rounds) == want[(r.width, r.arm)]
            per_round = Counter(r.rounds)
            assert sorted(per_round) == list(range(n_rounds))
            assert set(per_round.values()) == {2 * CONTROL_QUADS if r.width == 1 else 2}
            assert all(ms > 0 for ms in r.samples_ms)
        # the records' estimates are the sampler's, recomputed from their own raw samples
        est = estimate_context(timings_of(mine), seed=plan.seed)
        for r in mine:
            iv = est.step_ms[(r.arm, r.width)]
            assert (r.median_ms, r.ci_low_ms, r.ci_high_ms) == (iv.median, iv.low, iv.high)
            ratio = est.ratio[r.width]
            assert (r.ratio, r.ratio_low, r.ratio_high) == (ratio.median, ratio.low, ratio.high)
            assert r.ci_low_ms <= r.median_ms <= r.ci_high_ms
            assert r.outcome == est.control_outcome.value and r.outcome in OUTCOMES
            assert r.valid == (r.outcome == "valid")
        if mine[0].outcome == "inconclusive":
            assert n_rounds == 4  # inconclusive adds rounds up to max_rounds
        d = mine[0].to_dict()
        assert d["rounds"] == mine[0].rounds and d["samples_ms"] == mine[0].samples_ms
        assert d["median_ms"] == mine[0].median_ms and d["n"] == len(mine[0].samples_ms)


def test_s1_check_uses_three_outcomes_from_the_paired_ci(tiny_records):
    for part in ("indexer", "sparse-layer"):
        one = next(r for r in tiny_records if r.bench == part and r.width == 1)
        iv = Interval(one.ratio, one.ratio_low, one.ratio_high, one.n_rounds)
        assert one.outcome == control_outcome(iv, 2.0).value
        assert f"[{one.ratio_low:.4f}, {one.ratio_high:.4f}]" in one.note
        assert one.note.startswith("S=1 control") == (one.outcome == "valid")


def test_injected_stock_slowdown_at_s1_is_invalid(monkeypatch):
    slow_stock_at_s1(monkeypatch)
    records = run_indexer_bench(
        IndexerGrid([64], [1, 2], layer_contexts=[]), Rounds(2, 1, 4), PartBuild(small_config())
    )
    one = next(r for r in records if r.width == 1 and r.arm == "stock")
    assert one.outcome == "invalid" and not one.valid and one.ratio_low > 1.02
    assert one.note.startswith("INVALID:")
    assert all(not r.valid for r in records)  # the whole context is marked
    assert one.n_rounds == 2  # invalid is decided: no extra rounds


def test_modes_decide_what_each_slot_runs():
    """An A/A of stock pooling: the 'patched' slot re-pools like stock, and no patched-pool guard
    trips."""
    plan = default_plan("indexer", 64, (1, 2), Rounds(2, 1, 2))
    modes = {"stock": STOCK_GATES, "patched": STOCK_GATES}
    result = measure_part("indexer", 64, plan, PartBuild(small_config(), "float32", modes=modes))
    assert (
        result.pool[("patched", 2)]["rebuilds"] > 0 and result.pool[("patched", 2)]["reuses"] == 0
    )


# The phase ----------------------------------------------------------------------------------


def _rows(context, outcome, ratio=(3.0, 2.8, 3.3), vs=(1.1, 1.0, 1.2)):
    rows = []
    for width in (1, 4):
        for arm in ("stock", "patched"):
            rows.append(
                IndexerRow(
                    part="indexer",
                    context=context,
                    width=width,
                    arm=arm,
                    median_ms=1.0,
                    ratio=1.0 if width == 1 else ratio[0],
                    ratio_low=0.99 if width == 1 else ratio[1],
                    ratio_high=1.01 if width == 1 else ratio[2],
                    vs_s1=1.0 if width == 1 else vs[0],
                    vs_s1_low=1.0 if width == 1 else vs[1],
                    vs_s1_high=1.0 if width == 1 else vs[2],
                    outcome=outcome,
                    valid=outcome == "valid",
                )
            )
    return rows


def test_indexer_verdict_has_cis_and_leaves_out_non_valid_contexts():
    rows = (
        _rows(8192, "valid")
        + _rows(32768, "inconclusive", ratio=(9.0, 8.0, 10.0))
        + _rows(131072, "invalid")
    )
    verdict = indexer_verdict(rows)
    assert verdict == (
        "8192: S=4 stock/patched 3.00× [2.80, 3.30], patched S>1 at most 1.10× [1.00, 1.20] S=1 "
        "(S=4); 32768: excluded (S=1 check inconclusive); "
        "131072: excluded (S=1 check invalid)"
    )
    assert "9.00" not in verdict
    assert indexer_verdict(_rows(8192, "inconclusive")).startswith("no valid context")


# The command --------------------------------------------------------------------------------


def test_bench_indexer_command_prints_the_paired_table(monkeypatch, capsys, tmp_path):
    from mlatui.commands import bench_indexer

    monkeypatch.setattr("mlatui.models.indexer.SparseMLAConfig", small_config)
    monkeypatch.setattr(indexer_bench, "SparseMLAConfig", small_config)
    parser = argparse.ArgumentParser()
    bench_indexer.configure(parser)
    out = tmp_path / "r.jsonl"
    args = parser.parse_args(
        [
            "--contexts",
            "64",
            "--widths",
            "1,2",
            "--rounds",
            "2",
            "--max-rounds",
            "4",
            "--quiet",
            "--out",
            str(out),
        ]
    )
    assert bench_indexer.run(args) == 0
    text = capsys.readouterr().out
    assert "stock/patched paired (95% CI)" in text and "S=1 check" in text
    lines = [line for line in text.splitlines() if line.startswith("| indexer | 64 | 1 |")]
    assert len(lines) == 1
    outcome = lines[0].rstrip(" |").rsplit("| ", 1)[1]
    assert outcome.lower() in OUTCOMES
    assert "- indexer T=64: " in text and "S=1 control: paired stock/patched" in text
    import json

    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 8 and all(len(r["rounds"]) == len(r["samples_ms"]) for r in rows)
