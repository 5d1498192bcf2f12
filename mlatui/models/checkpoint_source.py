"""An original checkpoint to take tensors from: a local folder or a hub id, one file at a time.

A hub id goes through huggingface_hub's `hf_hub_download`, one call per file, so only the files
asked for are fetched (resumable, with its progress bar) into the usual hub cache; a local folder
is read in place. Either way the files read are listed, so `mtp extract` can say (and a test can
check) that it touched the index and the shards holding one layer, nothing else.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mlatui.models.safetensors_read import INDEX, SINGLE, pickle_only


class SourceError(ValueError):
    """One line: the source cannot give what is asked of it, and what to do."""


def is_hub_id(ref: str) -> bool:
    return (
        not Path(ref).expanduser().exists()
        and ref.count("/") == 1
        and not ref.startswith((".", "/", "~"))
    )


def local_folder(ref: str | Path) -> Path:
    """Where a model folder is on disk: the path itself, or a hub id's snapshot in the local hub
    cache (where `mlx_lm.load` put it); the path as given when neither exists."""
    path = Path(ref).expanduser()
    if path.exists() or not is_hub_id(str(ref)):
        return path
    try:
        import huggingface_hub as hf

        return Path(hf.snapshot_download(str(ref), local_files_only=True))
    except Exception:  # noqa: BLE001 - not cached: the caller says what is missing
        return path


@dataclass
class CheckpointSource:
    """`ref` as given; `fetched` the local paths handed out so far, in order."""

    ref: str
    revision: str | None = None
    fetched: list[Path] = field(default_factory=list[Path])
    _listing: list[str] | None = None

    @property
    def hub(self) -> bool:
        return is_hub_id(self.ref)

    def listing(self) -> list[str]:
        """File names at the top of the checkpoint (a hub listing is one API call)."""
        if self._listing is None:
            if self.hub:
                import huggingface_hub as hf

                try:
                    self._listing = list(hf.list_repo_files(self.ref, revision=self.revision))
                except Exception as e:  # noqa: BLE001 - network, auth, not found: one line
                    raise SourceError(
                        f"{self.ref}: cannot list the hub repository ({_first_line(e)}) — "
                        "check the id, or download it and give the folder"
                    ) from e
            else:
                folder = Path(self.ref).expanduser()
                if not folder.is_dir():
                    raise SourceError(
                        f"{self.ref}: no such folder (give an original checkpoint folder or a hub id like org/name)"
                    )
                self._listing = sorted(p.name for p in folder.iterdir() if p.is_file())
        return self._listing

    def file(self, name: str) -> Path:
        """A local path to `name` (downloaded first for a hub id)."""
        if self.hub:
            import huggingface_hub as hf

            try:
                path = Path(hf.hf_hub_download(self.ref, name, revision=self.revision))
            except Exception as e:  # noqa: BLE001
                raise SourceError(f"{self.ref}: cannot download {name} ({_first_line(e)})") from e
            if self.revision is None or len(self.revision) != 40:
                self.revision = _snapshot_commit(path) or self.revision
        else:
            path = Path(self.ref).expanduser() / name
        self.fetched.append(path)
        return path

    def config(self) -> dict[str, Any]:
        if "config.json" not in self.listing():
            raise SourceError(f"{self.ref}: no config.json (not a model checkpoint)")
        return json.loads(self.file("config.json").read_text())

    def shards_for(self, prefix: str) -> list[str]:
        """The safetensors files holding tensors named `prefix*`: from the index when there is
        one, else the single model.safetensors. Pickle-only checkpoints are refused unread."""
        names = self.listing()
        pickled = pickle_only(names)
        if pickled:
            raise SourceError(
                f"{self.ref}: only pickle-based weights ({', '.join(pickled[:3])}) — these can run "
                "code when loaded and are never opened; use a safetensors copy of the checkpoint"
            )
        if INDEX in names:
            weight_map = json.loads(self.file(INDEX).read_text()).get("weight_map", {})
            return sorted({f for k, f in weight_map.items() if k.startswith(prefix)})
        if SINGLE in names:
            return [SINGLE]
        tensors = sorted(n for n in names if n.endswith(".safetensors"))
        if not tensors:
            raise SourceError(f"{self.ref}: no safetensors weights")
        if len(tensors) > 1:
            raise SourceError(
                f"{self.ref}: {len(tensors)} safetensors files and no {INDEX} to say which holds what"
            )
        return tensors


def _snapshot_commit(path: Path) -> str | None:
    """The commit of a file in the hub cache (.../snapshots/<commit>/<name>)."""
    parts = path.parts
    if "snapshots" in parts:
        i = len(parts) - 1 - parts[::-1].index("snapshots")
        if i + 1 < len(parts):
            return parts[i + 1]
    return None


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__
