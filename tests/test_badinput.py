"""Every case of the bad-input corpus (tests/badinput.py, tests/badinput_load.py) through the CLI
in a subprocess under an 8 GB address-space limit: a non-zero exit (not a signal), a last stderr
line `mlatui: error: ...`, no traceback, no crash log (an unexpected exception), and files that
must be kept left as they were; the few deliberate cases must exit 0 cleanly. The default run takes the
quick sample of every class; `pytest -m slow` runs the whole corpus."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import badinput
import pytest

TIMEOUT_S = 60
WORKERS = 4
ADDRESS_SPACE_BYTES = 8 << 30  # as the corpus ran: a missed refusal crashes, not swaps


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE_BYTES, ADDRESS_SPACE_BYTES))


@dataclass
class Outcome:
    case: badinput.Case
    code: int | None
    stdout: str
    stderr: str
    seconds: float
    problems: list[str]


def run_case(case: badinput.Case, root: Path) -> Outcome:
    folder = Path(tempfile.mkdtemp(dir=root))
    argv, extra = case.materialise(folder)
    env = {
        **os.environ,
        "XDG_DATA_HOME": str(folder / "data"),  # nothing lands in the user's own folders
        "XDG_STATE_HOME": str(folder / "state"),
        "MLATUI_CRASH_DIR": str(folder / "crashes"),
        "MLATUI_CACHE_DIR": str(folder / "cache"),
        **extra,
    }
    if "no-cache-override" in case.tags:
        env.pop("MLATUI_CACHE_DIR")
    before = {rel: (folder / rel).read_bytes() for rel in case.unchanged}
    t0 = time.monotonic()
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "mlatui", *argv],
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
            env=env,
            stdin=subprocess.DEVNULL,
            preexec_fn=_limit_memory,
        )
        code, out, err = proc.returncode, proc.stdout, proc.stderr
    except subprocess.TimeoutExpired as e:
        code, out, err = None, str(e.stdout or ""), str(e.stderr or "")
    seconds = time.monotonic() - t0
    problems = []
    lines = [x for x in err.splitlines() if x.strip()]
    if code is None:
        problems.append(f"no exit within {TIMEOUT_S} s")
    elif code < 0 or code > 128:
        problems.append(f"killed by signal {abs(code) if code < 0 else code - 128}")
    elif case.deliberate:
        if code != 0 or any(x.startswith("mlatui: error: ") for x in lines):
            problems.append(f"a deliberate result ended in exit {code}")
    elif code == 0:
        problems.append("exit status 0")
    if not case.deliberate and (not lines or not lines[-1].startswith("mlatui: error: ")):
        problems.append(f"last stderr line is {lines[-1] if lines else ''!r}")
    if "Traceback" in out + err:
        problems.append("a traceback was printed")
    if "unexpected " in (lines[-1] if lines else "") or list((folder / "crashes").glob("*")):
        problems.append("an unexpected exception (crash log written)")
    for rel, content in before.items():
        if (folder / rel).read_bytes() != content:
            problems.append(f"{rel} was changed")
    return Outcome(case, code, out, err, seconds, problems)


def check(cases: list[badinput.Case], root: Path) -> None:
    with ThreadPoolExecutor(WORKERS) as pool:
        outcomes = list(pool.map(lambda c: run_case(c, root), cases))
    failed = [o for o in outcomes if o.problems]
    report = "\n".join(
        f"{o.case.name}: {'; '.join(o.problems)} (exit {o.code}; stderr tail: "
        f"{o.stderr.strip()[-300:]!r})"
        for o in failed
    )
    assert not failed, f"{len(failed)} of {len(outcomes)} cases failed:\n{report}"


def test_corpus_covers_every_class():
    cases = badinput.cases()
    kinds = {c.kind for c in cases}
    assert kinds == set(badinput.CaseClass)
    assert {c.kind for c in cases if c.quick} == kinds
    assert len(cases) > 300


BENCH_TARGETS = ("attention", "indexer", "observer", "context-pair", "decode-parity")
# behaviours another default-run test already starts a command for: a scenario bench that cannot
# fit (each such case loads the engine, ~3 CPU-s) is test_fit's
# test_a_run_that_cannot_fit_is_refused_before_loading_in_one_line (`bench --contexts 1000000000`,
# its one-line refusal and exit 2); the whole corpus keeps them all
RUN_ELSEWHERE = {(badinput.CaseClass.MEMORY, ("bench",), False)}


def one_per_behaviour(cases: list[badinput.Case]) -> list[badinput.Case]:
    """The first quick case of each class, command and expectation (refused or deliberate): one
    child process per behaviour; the whole corpus is `test_bad_input_whole_corpus` (slow)."""
    chosen: dict[tuple, badinput.Case] = {}
    for case in cases:
        argv = list(case.argv)
        command = tuple(argv[:2] if argv[1:2] and argv[1] in BENCH_TARGETS else argv[:1])
        if (case.kind, command, case.deliberate) not in RUN_ELSEWHERE:
            chosen.setdefault((case.kind, command, case.deliberate), case)
    return list(chosen.values())


def test_bad_input_quick_sample(tmp_path):
    sample = one_per_behaviour([c for c in badinput.cases() if c.quick])
    assert {c.kind for c in sample} == set(badinput.CaseClass)
    check(sample, tmp_path)


@pytest.mark.slow
def test_bad_input_whole_corpus(tmp_path):
    check(badinput.cases(), tmp_path)


def test_the_checker_flags_a_command_that_succeeds(tmp_path):
    good = badinput.Case("good", badinput.CaseClass.CLI, ("thresholds", "--family", "deepseek_v3"))
    assert run_case(good, tmp_path).problems[:1] == ["exit status 0"]
