"""`mlatui` command line. Subcommands live in mlatui/commands/<name>.py, each with
`HELP`, `configure(parser)` and `run(args) -> int`; they import mlx/textual only inside `run`.
`mlatui bench <what>` dispatches to mlatui/commands/bench_<what>.py, or runs a scenario file."""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys

import mlatui.commands as commands_pkg


class UserError(Exception):
    """Bad input: printed as one line, exit status 2."""


def _modules() -> dict[str, str]:
    names = {}
    for info in pkgutil.iter_modules(commands_pkg.__path__):
        if not info.name.startswith("_") and not info.name.startswith("bench_"):
            names[info.name.replace("_", "-")] = f"mlatui.commands.{info.name}"
    return names


def bench_targets() -> list[str]:
    return sorted(
        info.name[len("bench_") :].replace("_", "-")
        for info in pkgutil.iter_modules(commands_pkg.__path__)
        if info.name.startswith("bench_")
    )


def build_parser() -> argparse.ArgumentParser:
    from mlatui import __version__

    parser = argparse.ArgumentParser(
        prog="mlatui",
        description="Stock vs patched MLA models side by side: what speculative decoding costs, live.",
    )
    parser.add_argument("--version", action="version", version=f"mlatui {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, modname in sorted(_modules().items()):
        mod = importlib.import_module(modname)
        p = sub.add_parser(name, help=mod.HELP, description=mod.HELP)
        mod.configure(p)
        p.set_defaults(_run=mod.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "_run", None):
        parser.print_help()
        return 2
    try:
        return int(args._run(args) or 0)
    except UserError as e:
        print(f"mlatui: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("mlatui: interrupted", file=sys.stderr)
        return 130


def entry() -> None:
    """Console-script entry. Exits with os._exit after flushing: MLX can abort at interpreter
    exit once compiled mlx-lm code has run in a worker thread (exit code 134 instead of ours)."""
    import os

    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
