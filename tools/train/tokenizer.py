"""A byte-level BPE tokenizer built offline with `tokenizers`, saved for transformers/mlx-lm."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

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
    """The shipped tokenizer's files (write_tokenizer); the end-of-text id."""
    return write_tokenizer(tok, folder, EOT, max_length, pad=EOT)


def write_tokenizer(
    tok: Any,
    folder: Path,
    eos: str,
    max_length: int,
    unk: str | None = None,
    pad: str | None = None,
) -> int:
    """tokenizer.json + the tokenizer_config.json that transformers' PreTrainedTokenizerFast (and
    so mlx_lm.load) reads offline; returns the end-of-sequence id."""
    folder.mkdir(parents=True, exist_ok=True)
    tok.save(str(folder / "tokenizer.json"))
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "eos_token": eos,
        "bos_token": None,
        "unk_token": unk,
        "pad_token": pad,
        "model_max_length": max_length,
        "clean_up_tokenization_spaces": False,
    }
    (folder / "tokenizer_config.json").write_text(json.dumps(config, indent=2) + "\n")
    return tok.token_to_id(eos)
