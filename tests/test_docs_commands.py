"""The documented commands run as written, where running them is cheap: a recording's `--dump`,
the demo's, the crossover table, the gate scan, and every documented scenario run (`bench` or
`launch` on a scenario in the repository) as far as its resolved plan (`--plan`: flags, scenario
and budget checked, no model loaded). The rest need a model, a GPU or minutes; they parse
(tests/test_docs.py) and their subcommand's `--help` works. The test commands the README gives
select by markers the suite declares."""

from __future__ import annotations

import re
import shlex
import tomllib
from pathlib import Path

import pytest
from test_docs import DOCUMENTED, PAGES, ROOT

BENCH_TARGETS = {"attention", "indexer", "observer", "context-pair", "decode-parity"}
REPO_PATH = re.compile(r"(scenarios|tests|docs)/[\w./-]+")


def cheap_form(words: list[str]) -> list[str] | None:
    """The arguments that run a documented command cheaply, or None where only --help is."""
    command, rest = words[1], words[2:]
    names_files = [w for w in rest if REPO_PATH.fullmatch(w) and (ROOT / w).exists()]
    if command == "bench" and rest and rest[0].endswith(".toml") and (ROOT / rest[0]).exists():
        return [*words[1:], "--plan"]
    if command == "launch" and all(not w.endswith(".toml") or (ROOT / w).exists() for w in rest):
        return [*words[1:], "--plan"]
    if command in ("replay", "compare") and names_files and "--follow" not in rest:
        return [*words[1:], *([] if "--dump" in rest else ["--dump"])]
    if command == "demo":
        return [*words[1:], *([] if "--dump" in rest else ["--dump"])]
    if command == "thresholds" and "NAME" not in rest and "--model" not in rest:
        return words[1:]
    if command == "scan" and not rest:
        return words[1:]
    return None


def help_form(words: list[str]) -> list[str]:
    command = words[1]
    if command == "bench" and words[2:3] and words[2] in BENCH_TARGETS:
        return [command, words[2], "--help"]
    if command == "mtp":
        return [command, words[2], "--help"]
    return [command, "--help"]


MLATUI = [(page, cmd) for page, cmd in DOCUMENTED if cmd.startswith("mlatui ")]
CHEAP = [(p, c) for p, c in MLATUI if cheap_form(shlex.split(c)) is not None]


def test_most_documented_mlatui_commands_run_cheaply():
    assert len(CHEAP) >= 10 and {p for p, _ in CHEAP} >= {"README.md", "results.md", "guide.md"}


def run_main(argv: list[str], capsys) -> tuple[int, str, str]:
    from mlatui.cli import main

    try:
        code = main(argv)
    except SystemExit as e:  # argparse's --help
        code = e.code if isinstance(e.code, int) else 1
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(("page", "cmd"), CHEAP, ids=[c for _, c in CHEAP])
def test_a_documented_command_runs(page, cmd, capsys, tmp_path, monkeypatch):
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)  # a relative --out or --record lands here, not in the checkout
    argv = cheap_form(shlex.split(cmd))
    assert argv is not None
    argv = [str(ROOT / w) if REPO_PATH.fullmatch(w) else w for w in argv]
    code, out, err = run_main(argv, capsys)
    assert code == 0, f"{page}: `{' '.join(argv)}` exit {code}: {err[-400:]}"
    assert out.strip(), f"{page}: `{' '.join(argv)}` printed nothing"
    if "--plan" in argv:  # the plan only: nothing was measured or written
        assert out.startswith("scenario ") and "phases" in out, out[:300]
        assert list(cwd.iterdir()) == []


HELP = sorted({" ".join(help_form(shlex.split(c))) for _, c in MLATUI})


@pytest.mark.parametrize("argv", HELP)
def test_every_documented_subcommand_has_help(argv, capsys):
    code, out, _ = run_main(argv.split(), capsys)
    assert code == 0 and out.startswith("usage: "), (argv, code)


def test_the_documented_test_commands_select_by_declared_markers():
    declared = {
        m.split(":")[0]
        for m in tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"][
            "ini_options"
        ]["markers"]
    }
    exprs = []
    for page in PAGES:
        for line in page.read_text().splitlines():
            exprs += re.findall(r"pytest[^`\n]*?-m ['\"]?([\w ]+?)['\"]?(?:`|\s*$|\))", line)
    assert exprs, "no page gives a test command with -m"
    for expr in exprs:
        names = set(expr.split()) - {"not", "and", "or"}
        assert names <= declared, f"-m {expr!r} names markers the suite does not declare"


@pytest.fixture(autouse=True)
def _no_state_writes(tmp_path, monkeypatch):
    """Commands that keep state (a calibration store, crash logs) write under tmp_path."""
    home = tmp_path / "home"
    monkeypatch.setenv("XDG_DATA_HOME", str(home / "data"))
    monkeypatch.setenv("XDG_STATE_HOME", str(home / "state"))
    monkeypatch.setenv("MLATUI_CRASH_DIR", str(home / "crashes"))
    yield
    assert not list(Path(home / "crashes").glob("*")), "a command crashed"
