"""A tiny DeepSeek-V3 checkpoint, MTP head included, whose greedy text loops by construction.

Every layer's output projections (attention o_proj, MLP and expert down_proj) are zero, so the
residual stream at every position is the token's embedding, and the output head maps token t to
the next one of its 4-token cycle (4k, 4k+1, 4k+2, 4k+3): whatever the context, greedy decoding
emits one 4-token phrase over and over (31% distinct 4-grams in a 16-token block). The MTP head's
eh_proj passes the next token's embedding on, so it drafts the cycle too and every draft is
accepted: the symptom the looping-text guard exists for, without depending on what a trained
model happens to do with greedy text. Loaded through the real checkpoint path (`mlx_lm.load`,
the MTP head from its sidecar by mlatui.run.drafts)."""

from __future__ import annotations

from pathlib import Path

import mlx.core as mx
from test_mtp import save_checkpoint

from tests.checkpoints import tiny_tokenizer

VOCAB, HIDDEN, CYCLE = 512, 64, 4


def next_in_cycle(token: int) -> int:
    return token - token % CYCLE + (token + 1) % CYCLE


def _loop(weights: dict[str, mx.array], embed: mx.array) -> dict[str, mx.array]:
    out = {}
    for name, w in weights.items():
        if name.endswith(("o_proj.weight", "down_proj.weight")):
            w = mx.zeros_like(w)  # the layer adds nothing to the residual stream
        elif name.endswith("norm.weight"):  # enorm, hnorm, the final norms: no noise
            w = mx.ones_like(w)
        elif name.endswith("eh_proj.weight"):  # (D, 2D) on [enorm(next token), hnorm(hidden)]
            w = mx.concatenate([mx.eye(HIDDEN), mx.zeros((HIDDEN, HIDDEN))], axis=1)
        out[name] = w
    if "lm_head.weight" in out:
        # the row of next_in_cycle(t) is t's embedding: t's own residual scores it highest
        source = [0] * VOCAB
        for t in range(VOCAB):
            source[next_in_cycle(t)] = t
        out["lm_head.weight"] = embed[mx.array(source)]  # (V, D)
    return out


def save_looping_checkpoint(folder: Path) -> Path:
    """Writes the looping model (config, weights, MTP sidecar, a tiny tokenizer) to `folder`."""
    save_checkpoint(  # no shared_head.head: the MTP head reads the target's lm_head
        folder,
        "deepseek_v3",
        "sidecar",
        overrides={"vocab_size": VOCAB, "hidden_size": HIDDEN},
    )
    main = mx.load(str(folder / "model.safetensors"))
    embed = main["model.embed_tokens.weight"]
    # random 64-d embeddings are near orthogonal: each scores itself highest, so the head's
    # argmax of a token's own (normalised) embedding is next_in_cycle of it
    normed = embed / mx.linalg.norm(embed, axis=-1, keepdims=True)  # (V, D)
    own = mx.argmax(normed @ embed.T, axis=-1)  # (V,)
    assert bool(mx.all(own == mx.arange(VOCAB)).item()), "embeddings not separable: reseed"
    for name in ("model.safetensors", "mtp.safetensors"):
        weights = _loop(mx.load(str(folder / name)), embed)
        mx.save_safetensors(str(folder / name), weights, metadata={"format": "pt"})
    tiny_tokenizer(folder, VOCAB)
    return folder
