"""Long held-out contexts for acceptance at 1K-4K tokens: each shipped prompt, preceded by other
held-out files of the corpus (whole files, joined by the end-of-text token as in training, the
first one cut from the left), so the prompt's own continuation is what gets drafted."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tools.train.corpus import build_corpus, stdlib_root


class ContextError(ValueError):
    pass


def held_out_docs(stdlib: Path | None = None, seed: int = 0) -> tuple[list[str], list[str]]:
    """(valid docs, valid + train docs) of the corpus the shipped prompts were cut from."""
    corpus = build_corpus(stdlib or stdlib_root(), seed=seed)
    return corpus.valid, corpus.valid + corpus.train


def long_prompt(
    tokenizer: Any, eot: int, prompt: str, valid: list[str], every: list[str], length: int
) -> list[int]:
    """Token ids of exactly `length` tokens ending with `prompt`'s own tokens."""
    ids = tokenizer.encode(prompt)
    need = length - len(ids)
    if need <= 0:
        return ids[-length:]
    source = next((d for d in every if d.startswith(prompt)), None)
    if source is None:
        raise ContextError("a shipped prompt is not the opening of any corpus file")
    start = valid.index(source) + 1 if source in valid else 0
    others = [d for d in valid[start:] + valid[:start] if d != source]
    ctx: list[int] = []
    for doc in others:
        ctx = tokenizer.encode(doc) + [eot] + ctx
        if len(ctx) >= need:
            return ctx[-need:] + ids
    raise ContextError(f"the held-out files hold fewer than {length} tokens")
