"""Every measuring bench keeps a time limit: past it, no new pair of rounds and no part a later
context would overrun; what it left out or undecided is said (no mlx run here: the hooks alone)."""

from __future__ import annotations

import time
from types import SimpleNamespace

from mlatui.bench.indexer import TimedProgress
from mlatui.commands.bench_indexer import DEFAULT_MAX_SECONDS
from mlatui.views.bench_report import undecided_lines


def test_past_the_limit_no_new_pair_of_rounds_and_no_part_that_would_overrun():
    hooks = TimedProgress(quiet=True, max_seconds=600.0)
    assert not hooks.skip("indexer", 8192)  # the first part always runs
    assert [hooks.decide_more(True) for _ in range(4)] == [True] * 4  # within the limit
    hooks.last = (8192, 200.0)  # it took 200 s: 4x the context would take ~800 s, past 600 s
    assert hooks.skip("indexer", 32768) and hooks.skipped == [("indexer", 32768)]
    assert not hooks.skip("sparse-layer", 8192)  # ~200 s still fits
    late = TimedProgress(quiet=True, max_seconds=0.001)
    late.skip("indexer", 8192)
    time.sleep(0.01)
    # a pair's second round still runs (each arm first equally often), then no new pair
    assert [late.decide_more(True) for _ in range(2)] == [True, False]
    assert not late.decide_more(False)


def test_what_the_limit_left_is_listed():
    unsure = SimpleNamespace(
        bench="indexer", context=8192, width=1, arm="stock", outcome="inconclusive", n_rounds=2
    )
    lines = undecided_lines([unsure], [("indexer", 32768), ("indexer", 131072)], 110.0)
    assert lines[0].startswith("time limit 110 s: indexer not run at T=32768, 131072")
    assert lines[1] == (
        "S=1 check undecided at indexer T=8192 (2 rounds): more rounds (--max-seconds) may decide it"
    )
    assert DEFAULT_MAX_SECONDS <= 120


def test_a_pair_that_would_end_past_the_limit_is_not_started():
    slow = TimedProgress(quiet=True, max_seconds=600.0)
    slow.skip("indexer", 8192)
    slow.pair_end -= 700.0  # the last pair took 700 s: another would end past the limit
    assert [slow.decide_more(True) for _ in range(2)] == [True, False]


def test_attention_part_a_stops_at_its_deadline_and_scenario_benches_take_max_seconds():
    import argparse

    import pytest

    from mlatui.commands import bench_attention, bench_scenario
    from mlatui.host.signals import Interrupted

    check = bench_attention.within(lambda: None, time.monotonic() + 60)
    check()  # before the deadline: nothing
    with pytest.raises(Interrupted):
        bench_attention.within(lambda: None, time.monotonic() - 1)()
    parser = argparse.ArgumentParser()
    bench_attention.configure(parser)
    args = parser.parse_args(["--family", "deepseek_v3"])
    assert args.max_seconds == bench_attention.DEFAULT_MAX_SECONDS <= 120
    parser = argparse.ArgumentParser()
    bench_scenario.configure(parser)
    assert parser.parse_args(["s.toml", "--max-seconds", "90"]).budget == 90


def test_the_observer_bench_has_a_default_time_limit():
    import argparse

    from mlatui.commands import bench_observer

    parser = argparse.ArgumentParser()
    bench_observer.configure(parser)
    assert parser.parse_args([]).max_seconds == bench_observer.DEFAULT_MAX_SECONDS <= 120


def test_every_bench_subcommand_has_a_time_limit_of_about_two_minutes_by_default():
    import argparse

    from mlatui.commands import (
        bench_attention,
        bench_context_pair,
        bench_decode_parity,
        bench_indexer,
        bench_observer,
    )

    cases = {
        bench_attention: ["--family", "deepseek_v3"],
        bench_context_pair: [],
        bench_decode_parity: [],
        bench_indexer: [],
        bench_observer: [],
    }
    for module, argv in cases.items():
        parser = argparse.ArgumentParser()
        module.configure(parser)
        assert 0 < parser.parse_args(argv).max_seconds <= 120, module.__name__
