"""Output files are claimed before a run starts: an existing file is refused unless --overwrite, a
directory, a device, a path under a file or an unwritable place is a one-line error up front, and
default recording names are unique (sub-second timestamp + pid, created with O_EXCL)."""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Protocol

from mlatui.errors import UserError

OVERWRITE_HINT = "pass --overwrite to replace it, or choose another name"
PLACE_HINT = "choose a writable place"


class Record(Protocol):
    def to_dict(self) -> dict[str, Any]: ...


def ensure_folder(folder: Path, what: str, hint: str) -> None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise UserError(f"{what}: {folder} is not a folder (a file is in the way)", hint) from None
    except OSError as e:
        raise UserError(f"{what}: cannot create the folder {folder} ({e.strerror})", hint) from None
    if not folder.is_dir():
        raise UserError(f"{what}: {folder} is not a folder", hint)


def claim_output(
    path: str | os.PathLike[str], *, overwrite: bool = False, flag: str = "--out"
) -> Path:
    """Create `path` (empty) so the run can write it; a UserError if it cannot or must not."""
    p = Path(path)
    what = f"{flag} {p}"
    try:
        p.lstat()
    except (FileNotFoundError, NotADirectoryError):  # new, or under a file: said below
        pass
    except OSError as e:  # a name the file system cannot hold (ENAMETOOLONG), a loop, ...
        raise UserError(f"{what}: cannot write there ({e.strerror})", PLACE_HINT) from None
    if p.is_dir():
        raise UserError(f"{what}: is a directory", f"give a file name, e.g. {p / 'run.jsonl'}")
    if p.exists():
        if not p.is_file():
            raise UserError(f"{what}: not a regular file (a device or a FIFO)", "give a file path")
        if not overwrite:
            raise UserError(f"{what}: already exists", OVERWRITE_HINT)
    ensure_folder(p.parent, what, PLACE_HINT)
    flags = os.O_WRONLY | os.O_CREAT | (os.O_TRUNC if overwrite else os.O_EXCL)
    try:
        os.close(os.open(p, flags, 0o644))
    except FileExistsError:
        raise UserError(f"{what}: already exists", OVERWRITE_HINT) from None
    except OSError as e:
        raise UserError(f"{what}: cannot write there ({e.strerror})", PLACE_HINT) from None
    return p


def write_output(path: str | os.PathLike[str], text: str, *, flag: str = "--out") -> None:
    """Write a claimed output file whole; a UserError in one line if the write fails."""
    try:
        Path(path).write_text(text, encoding="utf-8")
    except OSError as e:
        raise UserError(
            f"cannot write {flag} {path}: {e.strerror} — choose a writable path"
        ) from None


def runs_dir() -> Path:
    import platformdirs

    return Path(platformdirs.user_data_dir("mlatui")) / "runs"


# a new file's time stamp, part by part: its strftime code and the word help texts show for it
STAMP_PARTS = (("%Y%m%d", "date"), ("%H%M%S", "time"), ("%f", "microseconds"))


def _named(prefix: str, stamp: str, pid: str, suffix: str) -> str:
    return f"{prefix}-{stamp}-{pid}{suffix}"


def unique_name(prefix: str, suffix: str = ".jsonl") -> str:
    stamp = dt.datetime.now().strftime("-".join(code for code, _ in STAMP_PARTS))
    return _named(prefix, stamp, str(os.getpid()), suffix)


def name_pattern(prefix: str, suffix: str = ".jsonl") -> str:
    """unique_name's names as help texts show them: `run-<date>-<time>-<microseconds>-<pid>.jsonl`."""
    return _named(prefix, "-".join(f"<{word}>" for _, word in STAMP_PARTS), "<pid>", suffix)


def new_record_path(prefix: str = "run", folder: Path | None = None) -> Path:
    """A new, empty recording with a unique name in `folder` (default: the user's data dir),
    created with an exclusive open so two runs started together never share a file."""
    folder = folder if folder is not None else runs_dir()
    hint = "pass --out/--record FILE, or point XDG_DATA_HOME at a writable folder"
    ensure_folder(folder, "the recordings folder", hint)
    name = unique_name(prefix)
    for attempt in range(1000):
        path = folder / (name if not attempt else name.replace(".jsonl", f"-{attempt}.jsonl"))
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
            return path
        except FileExistsError:
            continue
        except OSError as e:
            raise UserError(
                f"the recordings folder {folder}: cannot write ({e.strerror})", hint
            ) from None
    raise UserError(f"the recordings folder {folder}: no free name for {name}", hint)


def check_out_dir(path: str | os.PathLike[str] | None, flag: str = "--out-dir") -> Path | None:
    """A folder that exports and screenshots go to: created if missing, refused if it cannot be."""
    if path is None:
        return None
    folder = Path(path)
    ensure_folder(folder, f"{flag} {folder}", PLACE_HINT)
    if not os.access(folder, os.W_OK | os.X_OK):
        raise UserError(f"{flag} {folder}: not writable", PLACE_HINT)
    return folder


class JsonlSink:
    """Records as JSON lines, each flushed as written, so a signal or a crash keeps every line
    already completed. A failed write is kept in `error` (and not raised into the run)."""

    def __init__(self, path: str | os.PathLike[str]):
        self.path = Path(path)
        self._file = open(self.path, "w", encoding="utf-8", buffering=1)
        self.error: str | None = None
        self.lines = 0

    def write(self, record: dict[str, Any]) -> None:
        import json

        if self._file.closed:
            return
        try:
            self._file.write(json.dumps(record, separators=(",", ":")) + "\n")
            self._file.flush()
            self.lines += 1
        except OSError as e:
            self.error = (
                f"{self.path}: write failed after {self.lines} lines ({e.strerror or e}) — free "
                "some space or write elsewhere; later records were not saved"
            )
            self._close_quietly()

    def write_records(self, records: Iterable[Record]) -> None:
        for r in records:
            self.write(r.to_dict())

    def _close_quietly(self) -> None:
        try:
            self._file.close()
        except OSError:
            pass

    def close(self) -> None:
        if not self._file.closed:
            try:
                self._file.flush()
                os.fsync(self._file.fileno())
            except OSError as e:
                self.error = self.error or f"{self.path}: write failed ({e.strerror or e})"
            self._close_quietly()

    def __enter__(self) -> JsonlSink:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
