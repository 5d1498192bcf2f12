"""`+` after a run: a run whose L = 1 check ended undecided keeps its arms, offers more rounds
on the strip, measures them on request (a phase of its own, in the same event stream) and the
verdict refolds, decided.

Timing is injected so that no outcome depends on the host: every timed step reads a fixed
number of ms (so every paired ratio is exactly 1), and the sweep's own check is forced to
inconclusive (the pooled check, which would otherwise decide it before `+`, is held off).
"""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import replace

import pytest

from mlatui.config.phase_kind import PhaseKind
from mlatui.config.run_plan import RunConfig, resolve_plan
from mlatui.measure.estimates import Outcome
from mlatui.run.phases import base, sweep
from mlatui.stream.events import LogMessage, PhaseStart, RunEnd, Step, Validity
from mlatui.stream.sources import LiveSource, RunControl, parse_ask
from mlatui.views.dashboard_state import DashboardState
from mlatui.views.progress_view import more_offer
from mlatui.views.verdict_strip import verdict_line
from tests.engine_run import run
from tests.summaries import markdown as summary_markdown
from tests.tiny_scenario import tiny_with_phase

ROUNDS = 4


@pytest.fixture
def forced(monkeypatch, tmp_path):
    """A sweep-only tiny scenario whose check ends inconclusive, on fixed step times."""
    real = base.forward_and_trim

    def fixed(tokens):
        step = real(tokens)

        def timed(arm):
            _, absorbed, materialised = step(arm)  # the real forward, its time replaced
            return 5.0 + len(tokens), absorbed, materialised

        return timed

    real_validity = sweep.validity

    def undecided(ctx, phase, context, estimates):
        forced = replace(estimates, control_outcome=Outcome.INCONCLUSIVE)
        return real_validity(ctx, phase, context, forced)

    monkeypatch.setattr(base, "forward_and_trim", fixed)
    monkeypatch.setattr(sweep, "validity", undecided)
    monkeypatch.setattr(base, "pool_checks", lambda ctx, phase, checks, l1: {})
    phase = (
        'name = "sweep"\nkind = "sweep"\ncontexts = [64]\nwidths = [1, 2]\nreps = 3\n'
        "max_rounds = 3\nwarmup = 1\n"
    )
    path = tiny_with_phase(tmp_path / "one.toml", phase)
    return RunConfig(scenario=str(path), random_weights=True, budget_s=0)


def _wait(events: list, pred, timeout_s: float = 120.0) -> None:
    end = time.monotonic() + timeout_s
    while not pred(events):
        assert time.monotonic() < end, [type(e).__name__ for e in events[-5:]]
        time.sleep(0.02)


def _ends(events: list) -> list[RunEnd]:
    return [e for e in events if isinstance(e, RunEnd)]


def _fold(events: list) -> DashboardState:
    state = DashboardState()
    state.apply_all(list(events))
    return state


@pytest.mark.system  # a whole engine run (a child process for the isolated one)
def test_an_undecided_run_gets_more_rounds_and_becomes_decided(forced):
    events: list = []
    control = RunControl(offer_more=True)
    status: list[str] = []
    worker = threading.Thread(target=lambda: status.append(run(forced, events.append, control)))
    worker.start()
    try:
        _wait(events, lambda ev: len(_ends(ev)) == 1)
        before = _fold(events)
        assert before.status == "completed"
        assert before.validity[("sweep", 64)].verdict == "inconclusive"
        assert "Δ2" not in verdict_line(before)  # no valid context: no verdict on the cost
        offer = more_offer(before)
        assert offer is not None and offer.contexts == (64,)
        assert offer.text.startswith("+ to measure 12 more rounds of the undecided contexts")
        assert offer.seconds > 0  # from this run's own step costs

        control.ask_more(ROUNDS)
        _wait(events, lambda ev: any(isinstance(e, Step) and e.phase == "more" for e in ev))
        assert _fold(events).status == "running"  # measuring again: not "done" on screen
        _wait(events, lambda ev: len(_ends(ev)) == 2)
        after = _fold(events)
        start = next(e for e in events if isinstance(e, PhaseStart) and e.kind == PhaseKind.MORE)
        assert start.phase == "more" and start.contexts == (64,)
        steps = [e for e in events if isinstance(e, Step) and e.phase == "more"]
        assert len(steps) == ROUNDS * 4 and {s.width for s in steps} == {1}  # A B B A per round
        check = after.validity[("sweep", 64)]
        assert check.verdict == "valid" and check.diff_pct == 0.0
        # decided on every L = 1 round measured there: the sweep's and the new ones
        assert check.rounds == before.validity[("sweep", 64)].rounds + ROUNDS
        assert after.status == "completed" and _ends(events)[-1].invalid_contexts == ()
        assert more_offer(after) is None
        assert "Δ2 @ 64" in verdict_line(after)  # the verdict refolded, decided
        md = summary_markdown(events)  # the last end: nothing left out
        assert "- status: completed" in md and "Left out of verdicts" not in md

        control.ask_more(ROUNDS)  # nothing is undecided now: said, nothing measured
        _wait(
            events, lambda ev: any(isinstance(e, LogMessage) and "+: no" in e.message for e in ev)
        )
        assert sum(isinstance(e, PhaseStart) and e.kind == PhaseKind.MORE for e in events) == 1
    finally:
        control.set()
        worker.join(120)
    assert status == ["completed"] and len(_ends(events)) == 2


@pytest.mark.system  # a whole engine run (a child process for the isolated one)
def test_without_offer_more_the_engine_ends_at_once(forced):
    events: list = []
    assert run(forced, events.append, RunControl()) == "completed"
    assert len(_ends(events)) == 1 and isinstance(events[-1], RunEnd)
    assert any(isinstance(e, Validity) and e.verdict == "inconclusive" for e in events)


def test_ask_lines_parse():
    assert parse_ask("more 12\n") == 12
    assert parse_ask("more x") is None and parse_ask("stop") is None


@pytest.mark.system  # a whole engine run (a child process for the isolated one)
async def test_plus_in_the_dashboard_measures_more_rounds(forced, tmp_path):
    from mlatui.widgets.app import MlatuiApp

    src = LiveSource(resolve_plan(forced), record=tmp_path / "live.jsonl", offer_more=True)
    app = MlatuiApp(src, ui_hz=10, out_dir=tmp_path)
    async with app.run_test(size=(160, 50)) as pilot:
        end = time.monotonic() + 120
        while not app._done:
            assert time.monotonic() < end
            await pilot.pause(0.1)
        header = app.query_one("#header").render()
        assert "+ to measure 12 more rounds" in str(header)
        await pilot.press("plus")
        end = time.monotonic() + 120
        while app.dash.validity[("sweep", 64)].verdict != "valid":
            assert time.monotonic() < end
            await pilot.pause(0.1)
        await pilot.pause(0.3)
        assert "+ to measure" not in str(app.query_one("#header").render())
        await pilot.press("q")
        await asyncio.sleep(0)
    assert not src.alive
    kinds = [line for line in (tmp_path / "live.jsonl").read_text().splitlines() if '"l1"' in line]
    assert kinds  # the `+` phase is in the same recording


@pytest.mark.system  # a whole engine run (a child process for the isolated one)
def test_an_isolated_run_takes_the_request_over_its_stdin(tmp_path):
    import os
    from pathlib import Path

    from mlatui.stream.sources import ProcessSource

    env = dict(os.environ)
    here = str(Path(__file__).parent)
    env["PYTHONPATH"] = os.pathsep.join([here, *filter(None, [env.get("PYTHONPATH")])])
    src = ProcessSource(
        RunConfig(),
        engine="more_engine:engine",
        record=tmp_path / "r.jsonl",
        env=env,
        offer_more=True,
    )
    src.start()
    events: list = []
    try:
        end = time.monotonic() + 60
        while not src.finished:  # ended: its RunEnd read, the child still waiting
            events += src.drain()
            assert time.monotonic() < end
            time.sleep(0.02)
        assert src.alive and src.request_more(5)
        _wait_drained(src, events, lambda ev: len(_ends(ev)) == 2)
        assert any(
            isinstance(e, LogMessage) and e.message == "asked for 5 more rounds" for e in events
        )
    finally:
        src.stop()
    assert not src.alive and not src.request_more(5)


def _wait_drained(src, events: list, pred, timeout_s: float = 60.0) -> None:
    end = time.monotonic() + timeout_s
    while not pred(events):
        events += src.drain()
        assert time.monotonic() < end
        time.sleep(0.02)


@pytest.mark.system  # a whole engine run (a child process for the isolated one)
def test_an_aa_run_measures_its_last_pass_only(forced):
    """An A/A's last pass's arms are the ones loaded: `+` measures its checks (a phase of that
    pass, slots A and B), never the first pass's."""
    events: list = []
    control = RunControl(offer_more=True)
    worker = threading.Thread(
        target=lambda: run(replace(forced, null=True), events.append, control)
    )
    worker.start()
    try:
        _wait(events, lambda ev: len(_ends(ev)) == 1)
        assert more_offer(_fold(events)).contexts == (64,)
        control.ask_more(ROUNDS)
        _wait(events, lambda ev: len(_ends(ev)) == 2)
        after = _fold(events)
        assert {e.phase for e in events if isinstance(e, Step) and e.width == 1} >= {
            "more/aa-patched"
        }
        assert after.validity[("sweep/aa-patched", 64)].verdict == "valid"
        assert after.validity[("sweep/aa-stock", 64)].verdict == "inconclusive"
        assert more_offer(after) is None  # the first pass's arms are gone
    finally:
        control.set()
        worker.join(120)
