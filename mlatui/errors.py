"""The one error path of the command line: user errors are one line on stderr,
`mlatui: error: <what> — <what to do>`, exit status 2; anything unexpected is one line plus the
path of a crash log holding the traceback (never a traceback on the terminal)."""

from __future__ import annotations

import datetime as dt
import os
import shlex
import sys
import tempfile
import traceback
from enum import IntEnum
from pathlib import Path

PREFIX = "mlatui: error: "
CRASH_DIR_ENV = "MLATUI_CRASH_DIR"  # overrides the state dir (tests)


class ExitStatus(IntEnum):
    OK = 0
    FAILED = 1  # an engine error, an output that failed mid-run, an unexpected exception
    USAGE = 2  # bad input: refused before anything ran
    INVALID_CHECK = 3  # bench: an L = 1 check was invalid or inconclusive
    INTERRUPTED = 130


class UserError(Exception):
    """Bad input: printed as one line, exit status 2. `hint` says what to do."""

    def __init__(self, what: str, hint: str = ""):
        super().__init__(what)
        self.what = what
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.what} — {self.hint}" if self.hint else self.what


def say(line: str) -> None:
    """A line on stderr that never raises: a signal handler or a dying rank may write it while
    stderr is closed."""
    try:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def one_line(text: str) -> str:
    """Whitespace (newlines included) collapsed: an error message never spans lines."""
    return " ".join(str(text).split())


def error_line(message: object) -> str:
    return PREFIX + one_line(str(message))


def _crash_dirs() -> list[Path]:
    dirs = []
    if os.environ.get(CRASH_DIR_ENV):
        dirs.append(Path(os.environ[CRASH_DIR_ENV]))
    try:
        import platformdirs

        dirs.append(Path(platformdirs.user_state_dir("mlatui")) / "crashes")
    except Exception:  # noqa: BLE001 - a broken environment must not hide the crash
        pass
    dirs.append(Path(tempfile.gettempdir()) / f"mlatui-crashes-{os.getuid()}")
    return dirs


def write_crash_log(exc: BaseException, argv: list[str]) -> Path | None:
    """The traceback in a new file under the user's state dir, else the temp dir; None when no
    place at all is writable."""
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S-%f")
    text = (
        f"mlatui crash, {dt.datetime.now().isoformat(timespec='seconds')}\n"
        f"argv: {argv!r}\n\n" + "".join(traceback.format_exception(exc))
    )
    for folder in _crash_dirs():
        try:
            folder.mkdir(parents=True, exist_ok=True)
            path = folder / f"crash-{stamp}-{os.getpid()}.log"
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
            return path
        except OSError:
            continue
    return None


def shell_path(path: object) -> str:
    """A path as a shell takes it, quoted where it must be: macOS keeps mlatui's files under
    `~/Library/Application Support`, and a printed path is copied into the next command."""
    return shlex.quote(str(path))


def crash_line(exc: BaseException, argv: list[str]) -> str:
    """The one line shown for an unexpected exception (its log written first)."""
    where = write_crash_log(exc, argv)
    what = one_line(str(exc)) or "no message"
    log = (
        f"the traceback is in {shell_path(where)}; please report it with that file"
        if where
        else "no crash log could be written (state and temp dirs unwritable)"
    )
    return error_line(f"unexpected {type(exc).__name__}: {what} — {log}")
