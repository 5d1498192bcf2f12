"""`--overwrite` and `--force` each mean one thing: every command that writes an output file
takes --overwrite (replace it), every command with a memory estimate takes --force (run past it),
and each flag's help says which; a refusal's hint names the one flag it means."""

from __future__ import annotations

import argparse
import importlib

import pytest

from mlatui.cli import BENCH_SCENARIO, BENCH_TARGETS, COMMANDS

# the commands whose runs a memory estimate can refuse
ESTIMATED = {"launch", "calibrate", "bench", "attention", "indexer", "observer"}


def _parsers() -> list[tuple[str, argparse.ArgumentParser]]:
    modules = {**COMMANDS, **BENCH_TARGETS, "bench": BENCH_SCENARIO}
    out = []
    for name, modname in sorted(modules.items()):
        parser = argparse.ArgumentParser(prog=name)
        importlib.import_module(modname).configure(parser)
        out.append((name, parser))
    return out


def _help(parser: argparse.ArgumentParser, flag: str) -> str | None:
    for action in parser._actions:
        if flag in action.option_strings:
            return action.help or ""
    return None


@pytest.mark.parametrize("name,parser", _parsers(), ids=lambda v: v if isinstance(v, str) else "")
def test_each_flag_means_one_thing_in_every_commands_help(name, parser):
    writes = _help(parser, "--out") is not None or _help(parser, "--record") is not None
    overwrite, force = _help(parser, "--overwrite"), _help(parser, "--force")
    assert (overwrite is not None) == writes, name
    if overwrite is not None:
        assert overwrite.startswith("replace an existing") and "memory estimate still" in overwrite
    assert (force is not None) == (name in ESTIMATED), name
    if force is not None:
        assert "memory estimate" in force and "--overwrite" in force


@pytest.mark.parametrize("force", [False, True])
def test_launch_hands_force_to_the_run_and_overwrite_only_to_its_recording(force):
    from pathlib import Path

    from mlatui.cli import build_parser
    from mlatui.commands.argtypes import resolve_request

    tiny = Path(__file__).parent / "fixtures" / "tiny.toml"
    argv = ["launch", "--scenario", str(tiny), "--random-weights", "--overwrite"]
    args = build_parser().parse_args(argv + (["--force"] if force else []))
    config, plan = resolve_request(args, record=args.record)
    assert config.force is force and plan.force is force  # --overwrite never implies it
