"""The tokens contexts are cut from: shipped text for a model with a tokenizer, else seeded ids."""

from __future__ import annotations

import functools
import inspect
import random
from collections.abc import Callable

from mlatui.models.loading import Loaded, vocab_size

MODULES = (
    "textwrap",
    "argparse",
    "json.decoder",
    "string",
    "fractions",
    "heapq",
    "bisect",
    "statistics",
    "shlex",
    "difflib",
)


@functools.cache
def context_text() -> str:
    """Deterministic text of a few hundred KB from Python standard library sources (the same on
    every machine with this Python)."""
    import importlib

    parts = []
    for name in MODULES:
        try:
            parts.append(inspect.getsource(importlib.import_module(name)))
        except (OSError, ImportError):
            continue
    return "\n\n".join(parts)


def text_tokens(loaded: Loaded, seed: int) -> Callable[[int], list[int]]:
    """Context tokens: real text for a model with a tokenizer (the shipped prompts, repeated),
    seeded random ids for random weights."""
    vocab = vocab_size(loaded.model)
    cache: list[int] = []
    if loaded.tokenizer is not None:
        text = context_text()
        if loaded.name == "embedded":  # its held-out prompts first: text it never trained on
            from mlatui.models.embedded import prompts

            text = "\n\n".join(prompts()) + "\n\n" + text
        cache = _encode_quietly(loaded.tokenizer, text)
    rng = random.Random(seed)

    def tokens_for(n: int) -> list[int]:
        nonlocal cache
        while len(cache) < n:
            if loaded.tokenizer is not None and cache:
                cache += cache[: n - len(cache)]
            else:
                cache.append(rng.randrange(vocab))
        return cache[:n]

    return tokens_for


def _encode_quietly(tokenizer, text: str) -> list[int]:
    """Tokenize the whole context text without transformers' warning that it is longer than the
    model's maximum (we only ever feed it up to each context length)."""
    try:
        from transformers.utils import logging as hf_logging
    except ImportError:
        return list(tokenizer.encode(text))
    level = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        return list(tokenizer.encode(text))
    finally:
        hf_logging.set_verbosity(level)
