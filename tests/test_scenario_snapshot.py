"""Every shipped and test scenario reads to the same Scenario and RunPlan as the snapshot in
tests/fixtures/scenario_snapshot.json, and every phase a kept recording names (its header's plan,
its budget's re-plans) reads back to the same phase. Written by the hand-written parser the
msgspec schema replaced; `python tests/test_scenario_snapshot.py` writes it again."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import msgspec
import pytest

from mlatui.config.run_plan import RunConfig, resolve_plan
from mlatui.config.scenario import Phase, load_scenario

ROOT = Path(__file__).resolve().parents[1]
SNAPSHOT = ROOT / "tests" / "fixtures" / "scenario_snapshot.json"
SCENARIOS = sorted([*ROOT.glob("scenarios/*.toml"), *ROOT.glob("tests/fixtures/*.toml")])
RECORDINGS = sorted(
    [
        *ROOT.glob("scenarios/*.jsonl"),
        *ROOT.glob("docs/data/*.jsonl.gz"),
        *ROOT.glob("tests/fixtures/**/*.jsonl"),
        *ROOT.glob("tests/fixtures/**/*.jsonl.gz"),
    ]
)


QUICK = {"reps": 3, "warmup": 1, "tokens": 8, "contexts": [256, 512]}


def _rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


def scenario_dump(path: Path) -> dict[str, Any]:
    """What a run reads of a scenario: the header's summary, the model, the draft, the story and
    the plan of a plain request."""
    s = load_scenario(path)
    m, d = s.model, s.draft
    plan = resolve_plan(RunConfig(scenario=str(path)), s)
    dump = {
        "scenario": msgspec.to_builtins(s.record()),
        "model": [m.source, m.path, m.family, m.config, m.bits, m.dtype, m.fill, m.shard],
        "draft": [d.source.value, d.path, d.config, d.acceptance, [k.value for k in d.kinds]],
        "story": msgspec.to_builtins(s.story),
        "arms": [s.arms, [list(a) for a in s.arm_sources]],
        "depths_for": [[p.depths_for(k) for k in ("mtp", "draft-model")] for p in s.phases],
        "plan": msgspec.to_builtins(plan.recorded()),
        "quick_plan": msgspec.to_builtins(
            resolve_plan(RunConfig(scenario=str(path), overrides=QUICK), s).recorded()
        ),
    }
    return json.loads(json.dumps(dump).replace(str(ROOT), "ROOT"))


def recorded_phases(path: Path) -> list[dict[str, Any]]:
    """Each phase a recording's header plan or a BudgetPlanned names, as written."""
    opener = gzip.open if path.suffix == ".gz" else open
    found: list[dict[str, Any]] = []
    with opener(path, "rt", encoding="utf-8") as f:
        for line in f:
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if not isinstance(record, dict):
                continue
            plan = (record.get("settings") or {}).get("plan") or {}
            found += plan.get("phases") or [] if record.get("type") == "header" else []
            if record.get("type") == "budget_planned":
                found += record.get("phases") or []
    return [p for p in found if isinstance(p, dict)]


def phase_dump(raw: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(msgspec.json.encode(msgspec.convert(raw, Phase)))
    return out


def snapshot() -> dict[str, Any]:
    return {
        "scenarios": {_rel(p): scenario_dump(p) for p in SCENARIOS},
        "recorded_phases": {
            _rel(p): [phase_dump(r) for r in recorded_phases(p)] for p in RECORDINGS
        },
    }


@pytest.fixture(scope="module")
def kept() -> dict[str, Any]:
    return json.loads(SNAPSHOT.read_text())


@pytest.mark.parametrize("path", SCENARIOS, ids=_rel)
def test_a_shipped_scenario_reads_as_it_did(path, kept):
    assert scenario_dump(path) == kept["scenarios"][_rel(path)]


def test_every_scenario_is_in_the_snapshot(kept):
    assert sorted(kept["scenarios"]) == [_rel(p) for p in SCENARIOS]


def test_recorded_phases_read_back_as_they_did(kept):
    now = {_rel(p): [phase_dump(r) for r in recorded_phases(p)] for p in RECORDINGS}
    assert sum(len(v) for v in now.values()) > 20
    for name, phases in kept["recorded_phases"].items():
        if name in now and len(now[name]) == len(phases):  # a recording migrated since: skip
            assert now[name] == phases, name


if __name__ == "__main__":
    SNAPSHOT.write_text(json.dumps(snapshot(), indent=1, sort_keys=True) + "\n")
