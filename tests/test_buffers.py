"""A module's lazily built plain-attribute arrays are evaluated on the loading thread."""

import threading

import mlx.core as mx
import mlx.nn as nn
from mlx_lm.models.rope_utils import initialize_rope

from mlatui.models.mx_typed import evaluate_buffers

YARN = {"type": "deepseek_yarn", "factor": 8.0, "original_max_position_embeddings": 4096,
        "beta_fast": 32, "beta_slow": 1, "mscale": 1.0, "mscale_all_dim": 0.0}  # fmt: skip


class Holder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.rope = initialize_rope(32, 10000.0, True, YARN, 32768)


def _apply_on_another_thread(module: Holder) -> list[Exception]:
    errors: list[Exception] = []

    def work() -> None:
        try:
            mx.eval(module.rope(mx.ones((1, 1, 4, 32))))
        except Exception as e:  # noqa: BLE001 - the test reports what the thread raised
            errors.append(e)

    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    return errors


def test_a_lazy_yarn_rope_fails_on_another_thread_unless_its_buffers_are_evaluated() -> None:
    assert _apply_on_another_thread(Holder()), "MLX no longer ties a lazy graph to its thread"
    settled = Holder()
    evaluate_buffers(settled, None)
    assert _apply_on_another_thread(settled) == []


def test_the_embedded_model_runs_on_a_worker_thread() -> None:
    from mlatui.models.embedded import load_embedded
    from mlatui.models.loading import Loaded

    model, _, draft = load_embedded()
    loaded = Loaded(model, None, "embedded", "mlatui_mla", None, False)
    loaded.draft_model = draft
    evaluate_buffers(loaded.model, loaded.draft_model)
    errors: list[Exception] = []

    def work() -> None:
        try:
            mx.eval(model(mx.array([[1, 2, 3]])), draft(mx.array([[1, 2, 3]])))
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    assert errors == []
