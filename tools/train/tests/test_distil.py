"""The distillation objectives are the acceptance the two sampled rules compute."""

# isort: skip_file

import mlx.core as mx
import pytest

from tools.train.distil import RULE_OF_PART, parse, rule_terms


def _terms(lt, lq, t=1.0):
    return {k: float(v) for k, v in rule_terms(mx.array(lt), mx.array(lq), t).items()}


def test_a_draft_equal_to_the_target_is_always_accepted_by_rejection_sampling():
    logits = [[[2.0, 0.5, -1.0, 0.0]]]  # (1, 1, V)
    got = _terms(logits, logits)
    p = mx.softmax(mx.array(logits), axis=-1)
    assert got["rejection"] == pytest.approx(1.0, abs=1e-6)
    assert got["exact_match"] == pytest.approx(float((p * p).sum()), abs=1e-6)  # < 1: both sample
    assert got["kl_t1"] == pytest.approx(0.0, abs=1e-6)
    assert got["agree"] == 1.0


def test_disjoint_drafts_are_never_accepted_and_the_mode_reaches_the_exact_match_ceiling():
    target = [[[10.0, 9.0, -30.0, -30.0]]]
    far = [[[-30.0, -30.0, 10.0, 9.0]]]
    assert _terms(target, far)["rejection"] == pytest.approx(0.0, abs=1e-6)
    assert _terms(target, far)["agree"] == 0.0
    sharp = [[[40.0, 0.0, 0.0, 0.0]]]  # proposes the target's mode, always
    p_mode = float(mx.softmax(mx.array(target), axis=-1)[0, 0, 0])
    assert _terms(target, sharp)["exact_match"] == pytest.approx(p_mode, abs=1e-5)
    assert _terms(target, sharp)["exact_match"] > _terms(target, target)["exact_match"]


def test_temperature_applies_to_both_distributions():
    target, draft = [[[1.0, 0.0]]], [[[0.0, 1.0]]]
    cold, warm = _terms(target, draft, 0.5), _terms(target, draft, 2.0)
    assert cold["rejection"] < warm["rejection"]  # sharper p and q overlap less


def test_each_part_trains_for_its_own_rule():
    assert RULE_OF_PART == {"mtp": "rejection", "draft": "exact_match"}


@pytest.mark.parametrize("bad", [["--parts", "head"], ["--temperature", "0"]])
def test_bad_arguments_are_refused(bad, capsys):
    base = ["--model", "m", "--draft", "d", "--data", "x", "--out", "o"]
    with pytest.raises(SystemExit):
        parse(base + bad)
    assert "--" in capsys.readouterr().err
