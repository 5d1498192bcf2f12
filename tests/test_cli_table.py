"""The CLI's explicit command table: every listed module is a command, every command is listed."""

from __future__ import annotations

import importlib
import pkgutil

import mlatui.commands
from mlatui.cli import BENCH_SCENARIO, BENCH_TARGETS, COMMANDS, build_parser


def _is_command(mod) -> bool:
    return all(hasattr(mod, name) for name in ("HELP", "configure", "run"))


def test_every_listed_module_is_a_command():
    for modname in [*COMMANDS.values(), *BENCH_TARGETS.values(), BENCH_SCENARIO]:
        assert _is_command(importlib.import_module(modname)), modname


def test_every_command_module_is_listed():
    listed = {*COMMANDS.values(), *BENCH_TARGETS.values(), BENCH_SCENARIO}
    for info in pkgutil.iter_modules(mlatui.commands.__path__):
        modname = f"{mlatui.commands.__name__}.{info.name}"
        if _is_command(importlib.import_module(modname)):
            assert modname in listed, f"{modname} is a command but not in mlatui.cli's tables"


def test_parser_offers_exactly_the_table():
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    assert sorted(sub.choices) == sorted(COMMANDS)
