"""What the training commands share: a JSONL log echoed to stdout, and the command-line wrapper
that turns a bad input into one `mlatui: error:` line."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any


class RunLog:
    """One JSON line per record, flushed at once (a stopped run keeps every record)."""

    def __init__(self, path: Path):
        self._file = open(path, "a")

    def emit(self, rec: dict) -> None:
        line = json.dumps(rec)
        print(line, flush=True)
        self._file.write(line + "\n")
        self._file.flush()

    def close(self) -> None:
        self._file.close()


def run_command(
    command: Callable[[Any], int], args: Any, errors: tuple[type[Exception], ...]
) -> int:
    """`command(args)`, with the bad-input `errors` it raises as one line and exit status 2."""
    try:
        return command(args)
    except errors as e:
        print(f"mlatui: error: {e}", file=sys.stderr)
        return 2
