"""Build the corpus, the tokenizer and the token ids the trainer reads (CPU, ~1 minute).

    python -m tools.train.prepare --out .corpus

Writes OUT/tokenizer/{tokenizer.json,tokenizer_config.json} and OUT/tokens.npz (uint16 train and
valid ids, documents separated by the end-of-text id). The device only needs OUT, not
`tokenizers` or the stdlib sources.
"""

from __future__ import annotations

import argparse
import json
import random
import sysconfig
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from tools.train.corpus import (
    ExtraSource,
    build_corpus,
    extra_docs,
    sources_record,
    stdlib_root,
)
from tools.train.tokenizer import save_tokenizer, train_tokenizer


def encode(tok, docs: list[str], eot: int) -> np.ndarray:
    ids: list[int] = []
    for enc in tok.encode_batch(docs):
        ids.extend(enc.ids)
        ids.append(eot)
    return np.asarray(ids, dtype=np.uint16)


def prepare(
    out: Path,
    stdlib: Path | None,
    vocab_size: int,
    seed: int,
    max_length: int,
    extra: Sequence[str] = (),
    site: Path | None = None,
) -> dict:
    """The tokenizer learns from the stdlib training files only (so it is the shipped one when no
    sources change); `extra` packages' files join the training split, shuffled in."""
    t0 = time.perf_counter()
    root = stdlib or stdlib_root()
    corpus = build_corpus(root, seed=seed)
    tok = train_tokenizer(corpus.train, vocab_size)
    eot = save_tokenizer(tok, out / "tokenizer", max_length)
    train_docs = list(corpus.train)
    sources: list[ExtraSource] = []
    if extra:
        more, sources = extra_docs(
            site or Path(sysconfig.get_paths()["purelib"]), list(extra), corpus.valid
        )
        train_docs += more
        random.Random(seed + 1).shuffle(train_docs)
    train, valid = encode(tok, train_docs, eot), encode(tok, corpus.valid, eot)
    np.savez_compressed(out / "tokens.npz", train=train, valid=valid)
    info = {
        "stdlib": str(root),
        "files": corpus.files,
        "chars": corpus.chars,
        "vocab_size": tok.get_vocab_size(),
        "eot_id": eot,
        "train_tokens": int(train.size),
        "valid_tokens": int(valid.size),
        "stdlib_train_files": len(corpus.train),
        "extra": sources_record(sources),
        "seed": seed,
        "seconds": round(time.perf_counter() - t0, 1),
    }
    (out / "corpus.json").write_text(json.dumps(info, indent=2) + "\n")
    return info


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, required=True, help="output folder (e.g. .corpus)")
    p.add_argument(
        "--stdlib", type=Path, default=None, help="stdlib folder (default: this Python's)"
    )
    p.add_argument("--vocab-size", type=int, default=4096)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-length", type=int, default=8192)
    p.add_argument(
        "--extra-packages",
        default="",
        help="comma-separated import names of permissively licensed packages to add (training only)",
    )
    p.add_argument("--site-packages", type=Path, default=None, help="where they are installed")
    a = p.parse_args(argv)
    a.out.mkdir(parents=True, exist_ok=True)
    extra = [x.strip() for x in a.extra_packages.split(",") if x.strip()]
    info = prepare(a.out, a.stdlib, a.vocab_size, a.seed, a.max_length, extra, a.site_packages)
    print(json.dumps(info))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
