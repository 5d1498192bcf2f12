"""The `mlatui` command line: an explicit table of subcommands and the one place errors leave.

Each subcommand is one module in mlatui/commands/, listed in COMMANDS,
with `HELP`, `configure(parser)` and `run(args) -> int`; they import mlx/textual only inside `run`.
`mlatui bench <what>` dispatches through BENCH_TARGETS, or runs a scenario file (BENCH_SCENARIO).

Every error leaves here as one line on stderr (mlatui/errors.py): user errors exit 2, anything
unexpected exits 1 with the path of a crash log holding the traceback."""

from __future__ import annotations

import argparse
import importlib
import sys

from mlatui.commands.argtypes import OneLineParser
from mlatui.errors import ExitStatus, UserError, crash_line, error_line

__all__ = [
    "BENCH_SCENARIO",
    "BENCH_TARGETS",
    "COMMANDS",
    "UserError",
    "bench_targets",
    "build_parser",
    "entry",
    "main",
]

START_HERE = """start here:
  1. mlatui demo      a recorded run of the real engine, explained (no MLX needed, q quits)
  2. mlatui launch    the same screen live: stock vs patched on the embedded model
  3. mlatui bench scenarios/default.toml
                      the numbers headless, with 95% CIs (--help on any command for more)
  then: mlatui replay FILE / mlatui compare A.jsonl B.jsonl to review recorded runs"""


COMMANDS: dict[str, str] = {
    "bench": "mlatui.commands.bench",
    "calibrate": "mlatui.commands.calibrate",
    "compare": "mlatui.commands.compare",
    "demo": "mlatui.commands.demo",
    "launch": "mlatui.commands.launch",
    "mtp": "mlatui.commands.mtp",
    "replay": "mlatui.commands.replay",
    "scan": "mlatui.commands.scan",
    "serve": "mlatui.commands.serve",
    "thresholds": "mlatui.commands.thresholds",
}
BENCH_TARGETS: dict[str, str] = {
    "attention": "mlatui.commands.bench_attention",
    "context-pair": "mlatui.commands.bench_context_pair",
    "decode-parity": "mlatui.commands.bench_decode_parity",
    "indexer": "mlatui.commands.bench_indexer",
    "observer": "mlatui.commands.bench_observer",
}
BENCH_SCENARIO = "mlatui.commands.bench_scenario"
MLX = ("mlx", "mlx_lm")


def bench_targets() -> list[str]:
    return sorted(BENCH_TARGETS)


def build_parser() -> OneLineParser:
    from mlatui import __version__

    parser = OneLineParser(
        prog="mlatui",
        description="Stock vs patched MLA models side by side: what speculative decoding costs, live.",
        epilog=START_HERE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"mlatui {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, modname in sorted(COMMANDS.items()):
        mod = importlib.import_module(modname)
        epilog = mod.epilog() if hasattr(mod, "epilog") else None
        p = sub.add_parser(
            name,
            help=mod.HELP,
            description=mod.HELP,
            epilog=epilog,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        mod.configure(p)
        p.set_defaults(_run=mod.run)
    return parser


def _known_input_errors() -> tuple[type[BaseException], ...]:
    """Exceptions that describe bad input (a scenario, a recording) in their own words."""
    from mlatui.stream.recorder import RecordingError

    return (UserError, RecordingError)  # a ScenarioError is a UserError


def _without_mlx(e: BaseException) -> UserError | None:
    """MLX or mlx-lm missing, in one line: on an Intel Mac (or an x86_64 Python under Rosetta)
    MLX cannot be installed at all."""
    if not isinstance(e, ModuleNotFoundError) or (e.name or "").split(".")[0] not in MLX:
        return None
    import platform

    if sys.platform == "darwin" and platform.machine() != "arm64":
        return UserError(
            f"MLX runs on Apple silicon only, and this Python is {platform.machine()} (an Intel "
            "Mac, or Rosetta)",
            "run live on an Apple-silicon Mac with an arm64 Python, or on Linux with mlx[cpu]; "
            "`mlatui demo`, `mlatui replay` and `mlatui compare` work here without MLX",
        )
    return UserError(
        f"{e.name} is not installed", "install mlatui with its dependencies (pip install mlatui)"
    )


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        if not getattr(args, "_run", None):
            parser.print_help(sys.stderr)
            print(
                error_line(
                    "no command given — start with `mlatui demo`, then `mlatui launch` "
                    "(every command is listed above)"
                ),
                file=sys.stderr,
            )
            return ExitStatus.USAGE
        return int(args._run(args) or 0)
    except KeyboardInterrupt:
        print("mlatui: interrupted", file=sys.stderr)
        return ExitStatus.INTERRUPTED
    except BrokenPipeError:  # `mlatui scan | head`: the reader has what it wanted
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except SystemExit:
        raise  # --help, --version, and commands that chose their own status
    except BaseException as e:  # noqa: BLE001 - the one top-level handler
        if isinstance(e, _known_input_errors()):
            print(error_line(e), file=sys.stderr)
            return ExitStatus.USAGE
        if (missing := _without_mlx(e)) is not None:
            print(error_line(missing), file=sys.stderr)
            return ExitStatus.USAGE
        print(crash_line(e, argv), file=sys.stderr)
        return ExitStatus.FAILED


def entry() -> None:
    """Console-script entry: the CPU BLAS first (mlatui.host.blas.choose_blas), then the command.
    Exits with os._exit after flushing: MLX can abort at interpreter exit once compiled mlx-lm
    code has run in a worker thread (exit code 134 instead of ours)."""
    import os

    from mlatui.host.blas import choose_blas

    choose_blas()  # before anything loads MLX; may run this process again with LD_PRELOAD
    try:
        code = main()
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)
