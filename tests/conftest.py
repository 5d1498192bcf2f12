import mlatui  # noqa: F401, I001  (preloads the fast BLAS before mlx)
import pytest


@pytest.fixture
def tiny_checkpoint(tmp_path):
    """A tiny random deepseek_v3 checkpoint in mlx-lm format (config, safetensors, tokenizer)."""
    from mlatui.models.checkpoint import save_random_checkpoint

    return save_random_checkpoint(tmp_path / "tiny-dsv3", "deepseek_v3")
