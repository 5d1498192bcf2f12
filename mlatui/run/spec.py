"""The speculative step, gpt-fast style: the step is pure (draft, verify, accept, roll back) and
returns plain numbers; counting acceptance per position happens outside, in the phases."""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from typing import Any

import mlx.core as mx
import mlx.nn as nn
from mlx_lm.models.cache import can_trim_prompt_cache, trim_prompt_cache

from mlatui.models.mx_typed import as_float, as_int, as_ints
from mlatui.run.drafts import DraftSource


class UntrimmableCacheError(ValueError):
    pass


def require_trimmable(
    cache: list[Any], model_name: str, purpose: str = "speculative decoding"
) -> None:
    if not can_trim_prompt_cache(cache):
        raise UntrimmableCacheError(
            f"{model_name}: its cache cannot be trimmed (hybrid linear-attention layers keep a "
            f"recurrent state), so {purpose} cannot roll back its steps on this model"
        )


@dataclass(frozen=True)
class StepResult:
    drafts: tuple[int, ...]
    targets: tuple[int, ...]  # target greedy token after last, d1, ..., dk
    accepted: int
    emitted: tuple[int, ...]  # d1..d_accepted + the target's correction/bonus token
    draft_ms: float
    verify_ms: float


def accept_greedy(drafts: list[int], targets: list[int]) -> int:
    n = 0
    while n < len(drafts) and drafts[n] == targets[n]:
        n += 1
    return n


def accept_sampled(
    drafts: list[int], p_target: mx.array, q_draft: mx.array, rng: random.Random
) -> tuple[int, int]:
    """Standard rejection sampling (Leviathan et al.): accept d_i with prob min(1, p/q); on the
    first rejection resample from norm(max(p - q, 0)); if all accepted, sample the bonus from p.
    p_target (k+1, V), q_draft (k, V) are probabilities. Returns (accepted, next token)."""
    k = len(drafts)
    for i, d in enumerate(drafts):
        p, q = as_float(p_target[i, d]), as_float(q_draft[i, d])
        if q > 0 and rng.random() < min(1.0, p / q):
            continue
        residual = mx.maximum(p_target[i] - q_draft[i], 0)
        total = as_float(residual.sum())
        dist = residual / total if total > 0 else p_target[i]
        return i, _sample(dist, rng)
    return k, _sample(p_target[k], rng)


def _sample(probs: mx.array, rng: random.Random) -> int:
    u = rng.random()
    cdf = mx.cumsum(probs.astype(mx.float32))
    return int(min(as_int(mx.sum(cdf < u)), probs.shape[-1] - 1))


def speculative_step(
    model: nn.Module,
    cache: list[Any],
    draft: DraftSource,
    last: int,
    depth: int,
    hidden: mx.array | None,
) -> tuple[StepResult, mx.array | None]:
    """One greedy speculative step from a cache covering every token but `last`.
    Returns the result and the target hidden state at the position before the new `last`."""
    t0 = time.perf_counter_ns()
    drafts = draft.propose(last, depth, hidden)
    mx.eval(draft.sync_arrays())
    inputs = mx.array([[last, *drafts]])  # (1, depth + 1)
    t1 = time.perf_counter_ns()
    logits, new_hidden = draft.target_forward(model, inputs, cache)
    greedy = mx.argmax(logits[0], axis=-1)  # (depth + 1,)
    mx.eval(greedy, *([] if new_hidden is None else [new_hidden]))
    t2 = time.perf_counter_ns()
    targets = as_ints(greedy)
    n = accept_greedy(drafts, targets)
    trim_prompt_cache(cache, depth - n)
    draft.commit(n, None if new_hidden is None else new_hidden[:, : n + 1])
    result = StepResult(
        tuple(drafts),
        tuple(targets),
        n,
        (*drafts[:n], targets[n]),
        (t1 - t0) / 1e6,
        (t2 - t1) / 1e6,
    )
    return result, None if new_hidden is None else new_hidden[:, n : n + 1]


def plain_step(model: nn.Module, cache: list[Any], last: int) -> tuple[int, float]:
    """One greedy decode step (L = 1). Returns (next token, ms)."""
    x = mx.array([[last]])  # (1, 1)
    t0 = time.perf_counter_ns()
    logits = model(x, cache=cache)  # (1, 1, V)
    tok = mx.argmax(logits[0, -1])
    mx.eval(tok)
    ms = (time.perf_counter_ns() - t0) / 1e6
    return as_int(tok), ms
