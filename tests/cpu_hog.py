"""Busy `python -c 'while True: pass'` workers on every core: the load under which the UI's
settled state must still be the same screen (the UI stress tests)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def cpu_hog(workers: int | None = None) -> Iterator[list[subprocess.Popen]]:
    """`workers` busy processes (one per core by default) for the length of the block."""
    count = workers if workers is not None else os.cpu_count() or 1
    busy = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"], stdin=subprocess.DEVNULL)
        for _ in range(count)
    ]
    try:
        yield busy
    finally:
        for proc in busy:
            proc.kill()
        for proc in busy:
            proc.wait()
