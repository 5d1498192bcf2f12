"""A byte-level BPE tokenizer built offline with `tokenizers`, saved for transformers/mlx-lm."""

from __future__ import annotations

from pathlib import Path

from tools.train.corpus import EOT


def train_tokenizer(docs: list[str], vocab_size: int):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[EOT],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(docs, trainer=trainer)
    return tok


def save_tokenizer(tok, folder: Path, max_length: int) -> int:
    """The shipped tokenizer's files (mlatui.models.checkpoint.write_tokenizer); the end-of-text id."""
    from mlatui.models.checkpoint import write_tokenizer

    return write_tokenizer(tok, folder, EOT, max_length, pad=EOT)
