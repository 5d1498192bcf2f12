"""The two flags that let a command past a refusal, each for one thing: `--overwrite` replaces
an output file that already exists, `--force` runs what the memory estimate says will not fit.
One never implies the other: replacing yesterday's recording must not switch off the memory
guard."""

from __future__ import annotations

import argparse


def add_overwrite(parser: argparse.ArgumentParser, what: str = "--out file") -> None:
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help=f"replace an existing {what} (without it an existing file is refused; the memory "
        "estimate still applies)",
    )


def add_force(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--force",
        action="store_true",
        help="run even where the memory estimate says it will not fit (existing outputs are "
        "still refused: --overwrite)",
    )
