"""Benchmark records and the one set of printers (mlatui.views.mdtable): raw samples kept beside the
medians, markdown, CSV and JSON lines."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from mlatui.measure.records import BenchRecord
from mlatui.stream.phrases import ci_text as ci
from mlatui.views.mdtable import csv_text, env_line, jsonl, num, table


def _records() -> list[BenchRecord]:
    env = {"device_name": "cpu", "mlx": "0.32.4"}
    return [
        BenchRecord(
            "attention-model", "glm4_moe_lite", "stock", 4096, 2, [3.0, 1.0, 2.0], {"reps": 3}, env
        ),
        BenchRecord(
            "attention-model",
            "glm4_moe_lite",
            "patched",
            4096,
            2,
            [1.5, 0.5, 1.0],
            {"reps": 3},
            env,
            False,
            "L=1 off",
        ),
    ]


def test_jsonl_keeps_raw_samples_env_and_settings():
    rows = [json.loads(line) for line in jsonl(r.to_dict() for r in _records()).splitlines()]
    assert rows[0]["samples_ms"] == [3.0, 1.0, 2.0] and rows[0]["median_ms"] == 2.0
    assert rows[0]["env"]["mlx"] == "0.32.4" and rows[0]["settings"] == {"reps": 3}
    assert rows[1]["valid"] is False and rows[1]["note"] == "L=1 off"


def test_csv_text_keeps_field_order_fills_gaps_and_drops_or_refuses_extras():
    rows = [r.to_dict() for r in _records()]
    text = csv_text(("arm", "median_ms", "valid", "missing"), rows)
    assert text.splitlines()[0] == "arm,median_ms,valid,missing" and "\r" not in text
    parsed = list(csv.DictReader(io.StringIO(text)))
    assert [r["arm"] for r in parsed] == ["stock", "patched"]
    assert parsed[1] == {"arm": "patched", "median_ms": "1.0", "valid": "False", "missing": ""}
    with pytest.raises(ValueError):
        csv_text(("arm",), rows, extras="raise")


def test_markdown_table_shape_and_bench_number_cells():
    text = table(["T", "ms"], [(4096, 2.0), (8192, 12.345), (16384, 0.012345)], cell=num)
    lines = text.splitlines()
    assert lines[0] == "| T | ms |" and lines[1] == "|---|---:|"
    assert lines[2:] == ["| 4096 | 2 |", "| 8192 | 12.3 |", "| 16384 | 0.0123 |"]
    assert table(["a"], [(1.5,)]).splitlines()[2] == "| 1.5 |"


def test_observer_table_uses_the_shared_percentile():
    from mlatui.measure.records import percentile
    from mlatui.views.bench_report import observer_table as summary_table

    xs = [float(x) for x in range(1, 21)]
    assert percentile(xs, 95) == pytest.approx(19.05)  # interpolated between ranks 19 and 20
    row = {"mode": "tui", "arm": "stock", "n": 20, "median_ms": 10.5, "p95_ms": percentile(xs, 95)}
    row |= {"median_ratio": 1.0, "p95_ratio": 1.0126}
    lines = summary_table([row]).splitlines()
    assert lines[0].startswith("| mode | arm | n | median ms | p95 ms |")
    assert lines[2] == "| tui | stock | 20 | 10.50 | 19.05 | 1.000 | 1.013 |"


def test_ci_cell_with_unit_and_missing_bounds():
    assert ci(1.23456, 1.1, 1.4, 3, "x") == "1.235x [1.100, 1.400]"
    assert ci(88.0, 61.0, 94.0, 1) == "88.0 [61.0, 94.0]"
    assert ci(2.0, None, 3.0, unit="x") == "2.00x" and ci(None, 1.0, 2.0) == "-"


def test_env_line_names_device_backend_blas_and_versions():
    env = {"device_name": "H200", "backend": "cuda", "blas": "n/a (gpu)", "mlx": "0.32.4"}
    env |= {"mlx_lm": "0.32.2", "mlatui": "0.1.0", "python": "3.11.7"}
    line = env_line(env)
    assert line.startswith("H200 (cuda, blas: n/a (gpu)), mlx 0.32.4, mlx-lm 0.32.2")
    assert line.endswith("mlatui 0.1.0, python 3.11.7") and "\n" not in line


def _l1_steps(ratios, context=512):
    """Step events of L = 1 quads (A B B A, two per round) whose stock/patched sums are `ratios`."""
    from mlatui.stream.events import Step

    out = []
    for i, ratio in enumerate(ratios):
        rep = i // 2
        for arm in ("stock", "patched", "patched", "stock"):
            ms = 20.0 * ratio if arm == "stock" else 20.0
            out.append(Step(0.0, "sweep", arm, context, 1, rep, ms, 6, 0))
        out.append(Step(0.0, "sweep", "stock", context, 2, rep, 140.0, 6, 0))  # not L = 1
    return out


def test_observer_reads_the_l1_quads_each_context_on_its_own():
    from mlatui.commands.bench_observer import l1_quad_ratios

    a, b = [1.0, 1.1, 0.9, 1.05], [1.2, 0.8]
    got = l1_quad_ratios(_l1_steps(a, 512) + _l1_steps(b, 1024))
    assert got == [pytest.approx(r) for r in ([1.0, 1.1], [0.9, 1.05], [1.2, 0.8])]  # by round


def test_observer_spread_detects_a_noisier_mode_and_an_aa_comes_out_null():
    import random

    from mlatui.commands.bench_observer import spread_ratio

    rng = random.Random(1)

    def rounds(sigma: float) -> list[list[float]]:  # 50 rounds of 3 quads
        return [[rng.lognormvariate(0, sigma) for _ in range(3)] for _ in range(50)]

    quiet, quiet_too, noisy = rounds(0.02), rounds(0.02), rounds(0.08)
    worse = spread_ratio(noisy, quiet)
    assert worse is not None and worse.low > 2.0  # four times the spread, clearly found
    assert worse.n == 150
    same = spread_ratio(quiet_too, quiet)
    assert same is not None and same.low < 1.0 < same.high
    assert spread_ratio([noisy[0]], quiet) is None  # under four quads: no figure
    assert spread_ratio(noisy, [[1.0, 1.0], [1.0, 1.0]]) is None  # a base without spread


def test_observer_table_shows_each_modes_l1_spread_with_its_ci():
    from mlatui.commands.bench_observer import summary_rows
    from mlatui.views.bench_report import observer_table

    verify = {"stock": [100.0, 110.0], "patched": [20.0, 21.0]}
    samples = {"headless": verify, "tui": verify, "isolated": verify}
    quads = {"headless": [[1.0, 1.01, 0.99], [1.0, 1.02]], "tui": [[1.0, 1.2, 0.8], [1.1, 0.9]]}
    quads["isolated"] = [[1.0]]  # too few for a spread: no row
    text = observer_table(summary_rows(samples, quads, 4.0))
    spread_lines = text.split("quad ratios, whose spread")[1].splitlines()
    rows = [line for line in spread_lines if line.startswith("| ") and "mode" not in line]
    assert [r.split(" | ")[0] for r in rows] == ["| headless", "| tui"]
    assert "| 1.0% | 1.00× [" in rows[0]  # headless against itself
    tui_spread = float(rows[1].split(" | ")[2].rstrip("%"))
    assert tui_spread == pytest.approx(100 * (1.1 / 0.9 - 1), abs=0.1)
    assert f"| {(1.1 / 0.9 - 1) / (1.01 / 1.0 - 1):.2f}× [" in rows[1]  # over headless


def test_observer_runs_every_later_mode_on_the_first_runs_fitted_plan():
    import msgspec

    from mlatui.commands.bench_observer import one_plan
    from mlatui.config.run_plan import RunConfig, resolve_plan
    from mlatui.stream.events import BudgetPlanned, Step

    tiny = str(Path(__file__).parent / "fixtures" / "tiny.toml")
    plan = resolve_plan(RunConfig(scenario=tiny, random_weights=True, budget_s=20.0))
    first = plan.phases[0]
    fitted = (msgspec.structs.replace(first, contexts=first.contexts[:1], reps=2),)
    planned = BudgetPlanned(1.0, 20.0, 30.0, 19.0, ("fewer rounds",), fitted, (64,), 0.5)
    ran = [Step(2.0, first.name, "stock", 64, 1, r, 1.0, 6, 0) for r in range(7)]  # rounds 0-6
    ran.append(Step(3.0, "more", "stock", 64, 1, 11, 1.0, 6, 0))  # the budget's last rounds
    again, compared = one_plan(plan, [planned, *ran])
    assert again.budget_s == 0 and not again.budgeted
    assert [p.contexts for p in again.phases] == [first.contexts[:1]]  # as the budget fitted
    assert again.phases[0].reps == again.phases[0].max_rounds == 8  # 7 rounds, made a pair
    assert compared == {first.name}  # a budget's `more` rounds are not compared
    unbudgeted, names = one_plan(plan, [])  # a first run that fitted nothing: its phases as given
    assert [p.contexts for p in unbudgeted.phases] == [p.contexts for p in plan.phases]
    assert names == {p.name for p in plan.phases}


def test_observer_later_runs_run_the_phases_as_re_planned_and_not_the_ones_dropped():
    import msgspec

    from mlatui.commands.bench_observer import one_plan
    from mlatui.config.run_plan import RunConfig, resolve_plan
    from mlatui.stream.events import BudgetPlanned, PhaseStart, Step

    tiny = str(Path(__file__).parent / "fixtures" / "tiny.toml")
    plan = resolve_plan(RunConfig(scenario=tiny, random_weights=True, budget_s=20.0))
    first, *rest = plan.phases
    assert rest  # the fixture has a phase after the first: the one a re-plan drops or shrinks
    second = rest[0]
    planned = BudgetPlanned(1.0, 20.0, 30.0, 19.0, (), (first, *rest), (64,), 0.5)
    shrunk = msgspec.structs.replace(second, contexts=second.contexts[:1])
    again = BudgetPlanned(5.0, 20.0, 30.0, 19.0, ("fewer contexts",), (shrunk,), (64,), 0.5)
    ran = [PhaseStart(2.0, first.name, first.kind, 0, 2, 8)]
    ran += [Step(2.0, first.name, "stock", 64, 1, r, 1.0, 6, 0) for r in range(4)]
    later = [again, PhaseStart(6.0, second.name, second.kind, 1, 2, 4)]
    replanned, compared = one_plan(plan, [planned, *ran, *later])
    assert [p.name for p in replanned.phases] == [first.name, second.name]
    assert replanned.phases[1].contexts == second.contexts[:1]  # as the re-plan fitted it
    assert compared == {first.name, second.name}
    dropped, names = one_plan(plan, [planned, *ran])  # the run ended before the second phase
    assert [p.name for p in dropped.phases] == [first.name] and names == {first.name}


def test_observer_compares_each_context_over_the_rounds_the_first_run_measured_there():
    from mlatui.commands.bench_observer import compared_steps, first_rounds
    from mlatui.config.run_plan import RunConfig, resolve_plan
    from mlatui.stream.events import Step

    tiny = str(Path(__file__).parent / "fixtures" / "tiny.toml")
    plan = resolve_plan(RunConfig(scenario=tiny, random_weights=True, budget_s=0.0))
    name = plan.phases[0].name
    first = [Step(1.0, name, "stock", 64, 1, r, 1.0, 6, 0) for r in range(2)]
    first += [Step(1.0, name, "stock", 128, 1, r, 1.0, 6, 0) for r in range(6)]  # undecided longer
    first.append(Step(2.0, "more", "stock", 64, 1, 0, 1.0, 6, 0))  # a budget's last rounds
    fixed, rounds = first_rounds(plan, first)
    assert rounds == {(name, 64): 2, (name, 128): 6}
    assert fixed.phases[0].reps == 6  # a later run gives every context of the phase 6 rounds
    later = [Step(1.0, name, "stock", c, 1, r, 1.0, 6, 0) for c in (64, 128) for r in range(6)]
    kept = compared_steps(later, rounds)
    assert sorted((e.context, e.rep) for e in kept) == sorted(
        (e.context, e.rep) for e in first if e.phase == name
    )  # as the first run weighed its contexts
