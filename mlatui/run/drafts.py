"""Speculative decoding: draft sources (a separate draft model, or an MTP head, mlatui/run/mtp.py)
and the speculative step, gpt-fast style: the step is pure (draft, verify, accept, roll back) and
returns plain numbers; counting acceptance per position happens outside, in the phases.

State convention shared by the sources and the step: the target's cache covers every token
except the last emitted one (`last`), which is fed first in the next verify. A draft source keeps
its own cache aligned the same way.
"""

from __future__ import annotations

import random
import time
from abc import ABC, abstractmethod
from typing import Any

import mlx.core as mx
import mlx.nn as nn
from mlx_lm.models.cache import can_trim_prompt_cache, make_prompt_cache, trim_prompt_cache

from mlatui.models.mx_typed import as_float, as_int


class DraftSource(ABC):
    name: str = "draft"
    needs_hidden: bool = False  # True: the target forward must also return hidden states

    @abstractmethod
    def prefill(self, tokens: mx.array, hidden: mx.array | None = None) -> None:
        """Consume the context: `tokens` (1, T) = everything but `last`; `hidden` (1, T, D) the
        target's hidden states at those positions (MTP heads only)."""

    @abstractmethod
    def propose(self, last: int, k: int, hidden: mx.array | None = None) -> list[int]:
        """Greedy-draft k tokens following `last`. `hidden` (1, 1, D): the target's hidden state
        at the position before `last` (MTP heads only)."""

    @abstractmethod
    def commit(self, accepted: int, hidden: mx.array | None = None) -> None:
        """The verify accepted `accepted` of the k drafts: roll back the rest. `hidden`
        (1, accepted + 1, D): target hidden at positions last, d1..d_accepted (MTP only)."""

    def target_forward(
        self, model: nn.Module, inputs: mx.array, cache: list[Any]
    ) -> tuple[mx.array, mx.array | None]:
        """Target logits (1, L, V) and, if needs_hidden, hidden states (1, L, D)."""
        return model(inputs, cache=cache), None

    def reset(self) -> None:  # noqa: B027 - optional hook; stateless sources need nothing
        """Forget all state (a new context follows)."""

    def sync_arrays(self) -> list[mx.array]:
        """Arrays to include in the sync point after drafting."""
        return []


class DraftModelSource(DraftSource):
    """A separate small model sharing the target's tokenizer (mlx-lm's `--draft-model`)."""

    def __init__(self, model: nn.Module, name: str = "draft-model"):
        self.model = model
        self.name = name
        self.cache: list[Any] | None = None
        self.pending: list[int] = []  # accepted tokens not yet in the draft cache
        self._fed = 0
        self._last_draft = 0

    @property
    def caches(self) -> list[Any]:
        if self.cache is None:
            raise RuntimeError(f"draft model {self.name}: no cache yet (prefill it first)")
        return self.cache

    def reset(self) -> None:
        self.cache = make_prompt_cache(self.model)
        if not can_trim_prompt_cache(self.cache):
            raise ValueError(
                f"draft model {self.name}: its cache cannot be trimmed, so it cannot roll back rejected drafts"
            )
        self.pending = []

    def prefill(self, tokens: mx.array, hidden: mx.array | None = None) -> None:
        self.reset()
        step = 512
        for start in range(0, tokens.shape[1], step):
            self.model(tokens[:, start : start + step], cache=self.cache)
            mx.eval([c.state for c in self.caches])

    def propose(self, last: int, k: int, hidden: mx.array | None = None) -> list[int]:
        feed = self.pending + [last]
        self.pending = []
        drafts: list[int] = []
        y = mx.array([feed])  # (1, len(feed))
        for i in range(k):
            logits = self.model(y, cache=self.cache)
            tok = mx.argmax(logits[:, -1, :], axis=-1)
            drafts.append(as_int(tok))
            if i + 1 < k:
                y = tok[None]  # (1, 1)
        self._fed = k  # cache now holds last, d1..d_{k-1}
        self._last_draft = drafts[-1]
        return drafts

    def commit(self, accepted: int, hidden: mx.array | None = None) -> None:
        keep = accepted + 1  # last, d1..d_accepted
        if keep <= self._fed:
            trim_prompt_cache(self.caches, self._fed - keep)
        else:  # every draft accepted: d_k was never fed
            self.pending = [self._last_draft]
        self._fed = 0


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


def plain_step(model: nn.Module, cache: list[Any], last: int) -> tuple[int, float]:
    """One greedy decode step (L = 1). Returns (next token, ms)."""
    x = mx.array([[last]])  # (1, 1)
    t0 = time.perf_counter_ns()
    logits = model(x, cache=cache)  # (1, 1, V)
    tok = mx.argmax(logits[0, -1])
    mx.eval(tok)
    ms = (time.perf_counter_ns() - t0) / 1e6
    return as_int(tok), ms
