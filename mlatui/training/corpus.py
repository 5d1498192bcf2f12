"""A deterministic corpus from the Python standard library's sources (PSF License).

Every `.py` file under the running interpreter's stdlib (or `--stdlib`), minus site-packages,
byte caches and the codec tables in `encodings/` (tables of hex, not Python), read as UTF-8,
sorted by path, shuffled with a seeded RNG, each prefixed by a `# file: <path>` line and
separated by the end-of-text token. The held-out split is whole files.
"""

from __future__ import annotations

import random
import sysconfig
from dataclasses import dataclass
from pathlib import Path

EOT = "<|endoftext|>"
SKIP_DIRS = {"site-packages", "__pycache__", "encodings", "lib-dynload"}
MAX_FILE_BYTES = 400_000  # a few generated tables (e.g. unicode data) would dominate otherwise


def stdlib_root() -> Path:
    return Path(sysconfig.get_paths()["stdlib"])


@dataclass(frozen=True)
class Corpus:
    train: list[str]
    valid: list[str]
    files: int
    chars: int


def stdlib_files(root: Path) -> list[Path]:
    out = []
    for p in sorted(root.rglob("*.py")):
        rel = p.relative_to(root)
        if SKIP_DIRS & set(rel.parts[:-1]) or rel.name.startswith("_sysconfigdata"):
            continue
        if p.stat().st_size > MAX_FILE_BYTES:
            continue
        out.append(p)
    return out


def document(root: Path, path: Path) -> str | None:
    try:
        text = path.read_text(encoding="utf-8")
    except (UnicodeDecodeError, OSError):
        return None
    if EOT in text or "\x00" in text:
        return None
    return f"# file: {path.relative_to(root).as_posix()}\n{text.rstrip()}\n"


def build_corpus(root: Path | None = None, seed: int = 0, valid_fraction: float = 0.01) -> Corpus:
    root = root or stdlib_root()
    docs = [d for p in stdlib_files(root) if (d := document(root, p)) is not None]
    if not docs:
        raise FileNotFoundError(f"no Python sources under {root}: pass --stdlib PATH")
    random.Random(seed).shuffle(docs)
    n_valid = max(1, int(len(docs) * valid_fraction))
    return Corpus(docs[n_valid:], docs[:n_valid], len(docs), sum(map(len, docs)))


def make_prompts(corpus: Corpus, count: int = 8, max_chars: int = 1600) -> list[str]:
    """Prompts from held-out files (never trained on): each file's opening, cut at a line end."""
    out = []
    for doc in corpus.valid + corpus.train:
        if len(doc) < max_chars:
            continue
        cut = doc.rfind("\n", 0, max_chars)
        out.append(doc[: cut + 1])
        if len(out) == count:
            break
    return out
