"""What differs between the platforms the suite runs on (Linux here and in CI, macOS on the
machines the tool is for): a Linux-only mark that says why, and the portable stand-ins its
tests' twins use."""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

import pytest

# a name longer than any file system holds (255 bytes): the OS refuses it on Linux and macOS
TOO_LONG_NAME = "x" * 300


def linux_only(reason: str) -> pytest.MarkDecorator:
    """Skip off Linux, saying why; the test beside it that runs everywhere is its twin."""
    return pytest.mark.skipif(sys.platform != "linux", reason=f"Linux only: {reason}")


def pipe_without_reader(folder: Path) -> tuple[Path, threading.Thread]:
    """A FIFO and a thread that opens it for reading and closes it at once: a writer's open
    succeeds, and every write after the reader left fails (EPIPE), on Linux and macOS alike
    (/dev/full's portable twin). Join the thread after the writer opened it to be sure the
    reader is gone."""
    path = folder / "gone.jsonl"
    os.mkfifo(path)
    reader = threading.Thread(
        target=lambda: os.close(os.open(path, os.O_RDONLY)), name="reader-that-leaves", daemon=True
    )
    reader.start()
    return path, reader
