"""Models: family configs, random-weight builds, the sparse layers, the embedded model and loading.

This package's own code registers mlatui's mlx-lm model types (the embedded model):

`mlx_lm.utils._get_classes` resolves a config's `model_type` with
`importlib.import_module(f"mlx_lm.models.{model_type}")`, which consults `sys.modules` first.
Registering a module under that name makes `mlx_lm.load` / `load_model` build it through the
unchanged loader; no mlx-lm file is touched and nothing of mlx-lm is replaced.
"""

from __future__ import annotations

import importlib
import sys

MODEL_TYPES = ("mlatui_mla",)


def register() -> list[str]:
    """Make mlatui's model types loadable by `mlx_lm.load`. Idempotent; returns the types."""
    import mlx_lm.models

    for name in MODEL_TYPES:
        key = f"mlx_lm.models.{name}"
        if key not in sys.modules:
            module = importlib.import_module(f"mlatui.models.{name}")
            sys.modules[key] = module
            setattr(mlx_lm.models, name, module)
    return list(MODEL_TYPES)
