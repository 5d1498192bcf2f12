"""Sequence-level unlikelihood (Welleck et al. 2019, "Neural Text Generation with Unlikelihood
Training"): the target greedily continues prefixes from the training text, and every token of a
4-gram that its own continuation already produced is pushed down, -log(1 - p(token)). A model
trained by cross-entropy alone loops under greedy decoding (the shipped model: 26% distinct
4-grams in 128 greedy tokens, the held-out text itself 83%); penalising the loops it actually
produces is what breaks them, where a penalty on every repeated context token would also punish
the copying of names that code needs.
"""

from __future__ import annotations

from typing import Any

import mlx.core as mx
import numpy as np
from mlx_lm.models.cache import make_prompt_cache

from mlatui.measure.acceptance import distinct_ngram_share

NGRAM = 4


def repeat_mask(tokens: np.ndarray, n: int = NGRAM) -> np.ndarray:
    """(B, N) tokens -> (B, N) float32: 1 on every token of an n-gram that already occurred
    earlier in the same row (the loops of a continuation), else 0."""
    mask = np.zeros(tokens.shape, dtype=np.float32)
    for b, row in enumerate(tokens.tolist()):
        seen: set[tuple[int, ...]] = set()
        for i in range(n - 1, len(row)):
            gram = tuple(row[i - n + 1 : i + 1])
            if gram in seen:
                mask[b, i - n + 1 : i + 1] = 1.0
            seen.add(gram)
    return mask


def greedy_continuations(model: Any, prefixes: mx.array, n: int) -> mx.array:
    """(B, P) prefixes of equal length -> (B, n) greedy continuations, batched, with a cache
    (decode steps at L = 1, as the model runs when it generates)."""
    cache = make_prompt_cache(model)
    logits = model(prefixes, cache=cache)  # (B, P, V)
    tok = mx.argmax(logits[:, -1], axis=-1)[:, None]  # (B, 1)
    out = [tok]
    for _ in range(n - 1):
        tok = mx.argmax(model(tok, cache=cache)[:, -1], axis=-1)[:, None]  # (B, 1)
        mx.eval(tok)
        out.append(tok)
    return mx.stop_gradient(mx.concatenate(out, axis=1))  # (B, n)


def unlikelihood_loss(logits: mx.array, tokens: mx.array, mask: mx.array) -> mx.array:
    """-sum(mask * log(1 - p(token))) / tokens; logits (B, N, V) predict tokens (B, N)."""
    logp = logits - mx.logsumexp(logits, axis=-1, keepdims=True)  # (B, N, V)
    chosen = mx.take_along_axis(logp, tokens[..., None], axis=-1)[..., 0]  # (B, N)
    one_minus = mx.clip(1.0 - mx.exp(chosen), 1e-5, 1.0)
    return -(mask * mx.log(one_minus)).sum() / tokens.size


def file_openings(ids: np.ndarray, eot: int) -> np.ndarray:
    """Positions where a training file starts (after each end-of-text token, and 0)."""
    return np.concatenate([[0], np.flatnonzero(ids == eot) + 1]).astype(np.int64)


def sequence_step_inputs(
    model: Any,
    ids: np.ndarray,
    batch: int,
    prefix: int,
    n: int,
    rng: np.random.Generator,
    openings: np.ndarray | None = None,
) -> tuple[mx.array, mx.array, mx.array, float]:
    """A UL-seq batch: training-text prefixes (at random offsets, or the openings of files when
    `openings` is given: what the shipped prompts are), the model's own greedy continuations.
    Returns (inputs (B, P + n - 1), continuation (B, n), its repeat mask (B, n), the share of
    distinct 4-grams in the continuations)."""
    if openings is not None:
        starts = rng.choice(openings[openings < ids.size - prefix - 1], size=batch)
    else:
        starts = rng.integers(0, ids.size - prefix - 1, size=batch)
    pre = mx.array(np.stack([ids[s : s + prefix] for s in starts]).astype(np.int32))  # (B, P)
    cont = greedy_continuations(model, pre, n)  # (B, n)
    cont_np = np.array(cont)
    shares = [distinct_ngram_share(row, NGRAM) for row in cont_np.tolist()]
    distinct = float(np.mean([s for s in shares if s is not None] or [1.0]))
    seq = mx.concatenate([pre, cont], axis=1)  # (B, P + n)
    return seq[:, :-1], cont, mx.array(repeat_mask(cont_np)), distinct
