"""A random-weight MLA checkpoint on disk in mlx-lm format, for tests of the real loading path.

config.json + model.safetensors (mlx-lm's own save helpers) + a small BPE tokenizer trained
offline on an in-memory string (tokenizer.json + tokenizer_config.json), which transformers'
PreTrainedTokenizerFast and therefore `mlx_lm.load` read without any network.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tools.train.tokenizer import write_tokenizer

UNK, EOS = "<unk>", "</s>"
CORPUS = (
    "the absorbed path attends against the compressed latent while the materialised path "
    "expands every cached token into full keys and values before attending . "
    "speculative decoding verifies several draft tokens in one step and keeps the longest "
    "prefix that the target model agrees with . a patched model and a stock model share one "
    "copy of the weights and start from the same cache . "
) * 4


def tiny_tokenizer(folder: Path, vocab_size: int) -> int:
    """Trains a tiny BPE (<= vocab_size tokens) and saves it; returns the end-of-sequence id."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE(unk_token=UNK))
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=[UNK, EOS], show_progress=False
    )
    tok.train_from_iterator([CORPUS], trainer=trainer)
    if tok.get_vocab_size() > vocab_size:
        raise ValueError(f"tokenizer has {tok.get_vocab_size()} tokens > model vocab {vocab_size}")
    return write_tokenizer(tok, folder, EOS, 1 << 20, unk=UNK)


def save_random_checkpoint(
    folder: str | Path,
    family: str,
    size: str = "tiny",
    layers: int | None = None,
    bits: int | None = None,
    seed: int = 0,
    **overrides: Any,
) -> Path:
    """Writes a random-weight `family` model that `mlx_lm.load(folder)` loads. Returns the folder."""
    import mlx.core as mx
    from mlx_lm.utils import save_config, save_model

    from mlatui.config.model_inputs import text_config
    from mlatui.models.families import config_for
    from mlatui.models.loading import GROUP_SIZE
    from tests.random_models import build_model

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    config = config_for(family, size, layers, **overrides)
    model = build_model(family, size, layers, bits=bits, seed=seed, dtype=mx.float32, **overrides)
    eos = tiny_tokenizer(folder, text_config(config)["vocab_size"])
    config["eos_token_id"] = eos
    if bits:
        config["quantization"] = {"group_size": GROUP_SIZE, "bits": bits}
    save_model(folder, model)
    save_config(config, folder / "config.json")
    return folder
