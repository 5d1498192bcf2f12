"""An mlx-vlm sparse model's own indexer, as the run states it at load: 0.6.17's glm5_next pools
at S == 1 only (file:line of the gate), 0.7.10's pools at any width, so no comparison applies."""

import pytest
import vlm_sources
from random_models import vlm_config

from mlatui.models import vlm
from mlatui.models.vlm import indexer_notices
from tests.random_models import build_model


@pytest.fixture(scope="session")
def vlm_dir(tmp_path_factory):
    return tmp_path_factory.getbasetemp() / "vlm"


def _glm5_next(version, vlm_dir):
    source = vlm_sources.source(version, vlm_dir)
    return vlm.language_model(vlm_config("glm5_next"), source), source


def test_the_fixed_glm5_next_indexer_is_said_to_need_no_comparison(vlm_dir):
    model, _ = _glm5_next(vlm_sources.CURRENT, vlm_dir)
    (fact,) = indexer_notices(model)
    assert fact.startswith("mlx-vlm 0.7.10 Glm5NextIndexer: already pools incrementally")
    assert "up to 8 tokens" in fact and "no stock-vs-fixed indexer to compare" in fact


def test_the_pre_fix_glm5_next_indexer_names_its_gate(vlm_dir):
    model, source = _glm5_next(vlm_sources.PRE_FIX, vlm_dir)
    (fact,) = indexer_notices(model)
    gate_file = source.root / "models" / "glm5_next" / "language.py"
    line = int(fact.split(f"{gate_file}:")[1].split(")")[0])
    assert "only at S == 1" in fact
    gate = "".join(gate_file.read_text().splitlines()[line - 1 : line + 1])
    assert gate.split() == ["if", "(", "S", "==", "1"]


def test_models_without_a_runtime_pooled_indexer_say_nothing():
    assert indexer_notices(build_model("deepseek_v32")) == []  # no pooling in mlx-lm's
    assert indexer_notices(build_model("deepseek_v3")) == []
