"""A deterministic corpus from the Python standard library's sources (PSF License).

Every `.py` file under the running interpreter's stdlib (or `--stdlib`), minus site-packages,
byte caches and the codec tables in `encodings/` (tables of hex, not Python), read as UTF-8,
sorted by path, shuffled with a seeded RNG, each prefixed by a `# file: <path>` line and
separated by the end-of-text token. The held-out split is whole files.

Optionally more permissively licensed Python joins the training split only: the `.py` files of
installed packages whose metadata names a licence in PERMISSIVE (read from their dist-info and
recorded), minus vendored copies and any file that shares lines with a held-out file.
"""

from __future__ import annotations

import random
import sysconfig
from dataclasses import asdict, dataclass
from email.parser import Parser
from pathlib import Path

EOT = "<|endoftext|>"
SKIP_DIRS = {"site-packages", "__pycache__", "encodings", "lib-dynload"}
MAX_FILE_BYTES = 400_000  # a few generated tables (e.g. unicode data) would dominate otherwise
PERMISSIVE = ("MIT", "BSD-2-Clause", "BSD-3-Clause", "Apache-2.0", "PSF-2.0", "ISC", "0BSD", "Zlib",
              "CC0-1.0")  # fmt: skip
_CLASSIFIERS = {
    "MIT License": "MIT",
    "BSD License": "BSD",
    "Apache Software License": "Apache-2.0",
    "ISC License (ISCL)": "ISC",
}
SKIP_EXTRA_DIRS = {"__pycache__", "_vendor", "vendor", "vendored", "_vendored"}
SHARED_LINE_CHARS = 30  # lines this long or longer count for the held-out overlap check


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


@dataclass(frozen=True)
class ExtraSource:
    package: str
    distribution: str
    version: str
    licence: str
    files: int
    chars: int
    skipped_overlap: int  # files left out for sharing lines with held-out files


def package_licence(site: Path, package: str) -> tuple[str, str, str]:
    """(distribution, version, licence) of the installed package `package` (its import name)."""
    for dist in sorted(site.glob("*.dist-info")):
        top = dist / "top_level.txt"
        names = top.read_text().split() if top.exists() else []
        record = dist / "RECORD"
        if not names and record.exists():
            names = sorted({r.split("/")[0] for r in record.read_text().splitlines() if "/" in r})
        if package not in names:
            continue
        meta = Parser().parsestr((dist / "METADATA").read_text(encoding="utf-8"))
        licence = (meta.get("License-Expression") or "").strip()
        if not licence:
            classifiers = [
                c.rsplit(" :: ", 1)[-1]
                for c in meta.get_all("Classifier") or []
                if c.startswith("License ::")
            ]
            licence = next((_CLASSIFIERS[c] for c in classifiers if c in _CLASSIFIERS), "")
            if licence == "BSD":  # the classifier does not say which: the licence text does
                text = " ".join(f.read_text(errors="replace") for f in dist.rglob("LICENSE*"))
                licence = "BSD-3-Clause" if "Neither the name" in text else "BSD-2-Clause"
        return meta.get("Name", dist.name), meta.get("Version", "?"), licence or "unknown"
    raise FileNotFoundError(f"package {package!r} is not installed in {site}")


def _long_lines(text: str) -> set[str]:
    return {ln.strip() for ln in text.splitlines() if len(ln.strip()) >= SHARED_LINE_CHARS}


def extra_docs(
    site: Path, packages: list[str], held_out: list[str], max_overlap: float = 0.05
) -> tuple[list[str], list[ExtraSource]]:
    """Documents of the permissively licensed `packages` under `site`, and what each gave."""
    banned = set().union(*map(_long_lines, held_out)) if held_out else set()
    docs, sources = [], []
    for package in packages:
        dist, version, licence = package_licence(site, package)
        parts = licence.replace("(", " ").replace(")", " ").split()
        if not all(x in PERMISSIVE for x in parts if x not in ("AND", "OR")):
            raise ValueError(
                f"{package} ({dist} {version}) is licensed {licence!r}, not one of {PERMISSIVE}"
            )
        root = site / package
        mine, overlap = [], 0
        for p in sorted(root.rglob("*.py")):
            if (
                SKIP_EXTRA_DIRS & set(p.relative_to(root).parts[:-1])
                or p.stat().st_size > MAX_FILE_BYTES
            ):
                continue
            doc = document(site, p)
            if doc is None:
                continue
            lines = _long_lines(doc)
            if lines and len(lines & banned) > max_overlap * len(lines):
                overlap += 1
                continue
            mine.append(doc)
        docs += mine
        sources.append(
            ExtraSource(package, dist, version, licence, len(mine), sum(map(len, mine)), overlap)
        )
    return docs, sources


def sources_record(sources: list[ExtraSource]) -> list[dict]:
    return [asdict(s) for s in sources]
