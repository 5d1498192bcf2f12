"""An arm whose model code comes from another source tree: the PR-form copy of mlx-lm as arm B
against the installed code as arm A (parity, shared weights, counters, caches of its own
classes), refusals in one line, the header's provenance, a short bench end to end."""

from __future__ import annotations

import gc
import shutil
from pathlib import Path

import mlx.core as mx
import pytest
from mlx.utils import tree_flatten
from random_models import vlm_config

from mlatui.config.arm_settings import ArmSourceError, parse_arm_sources
from mlatui.config.run_plan import resolve_plan
from mlatui.config.scenario import ScenarioRecord
from mlatui.gate.policy import Gates, Variant
from mlatui.models import tree_model
from mlatui.run.arms import (
    SourceArmError,
    build_arms,
    build_sources,
    copy_cache,
    merge_source_settings,
    source_arms_text,
    swap_caches,
)
from mlatui.stream.run_settings import ArmSlot, ArmSource, RunSettings
from tests.random_models import build_model
from tests.test_mla import F32_TOL

CONTEXT_T = 40
INSTALLED_BOTH = Gates.parse("installed", None, "installed")


def _source_arms(tree: Path, bits: int | None = None):
    model = build_model("deepseek_v3", bits=bits)
    sources = build_sources(model, {"patched": str(tree)})
    stock, patched = build_arms(model, INSTALLED_BOTH, sources=sources.models)
    return model, sources, stock, patched


def _prefilled(model, arms, tokens):
    """Prefill with the loaded (installed, uninstrumented) model; each arm takes a copy."""
    base = tree_model.make_cache(model)
    model(mx.array([tokens]), cache=base)
    mx.eval([c.state for c in base])
    for arm in arms:
        arm.cache = copy_cache(base)


def test_pr_form_tree_parity_with_installed(pr_form_tree):
    model, _, stock, patched = _source_arms(pr_form_tree)
    assert type(patched.model).__module__.startswith("_mlatui_src_")
    assert type(stock.model).__module__ == "mlx_lm.models.deepseek_v3"
    # token ids inside the tiny vocabulary: MLX's embedding lookup does not check bounds, and an
    # id past the table reads whatever memory follows it (NaN, or different values per call)
    vocab = model.args.vocab_size
    tokens = [int(t) for t in mx.random.randint(0, vocab, (CONTEXT_T + 8,), key=mx.random.key(1))]
    for width in (1, 2, 3, 4, 8):
        _prefilled(model, (stock, patched), tokens[:CONTEXT_T])
        step = mx.array([tokens[CONTEXT_T : CONTEXT_T + width]])
        a = stock.model(step, cache=stock.caches)
        b = patched.model(step, cache=patched.caches)
        mx.eval(a, b)
        if width == 1:
            assert mx.array_equal(a, b).item(), "L = 1 must take the same branch: bit-identical"
        else:
            diff = mx.abs(a - b).max().item()
            assert diff <= F32_TOL, f"L = {width}: max |diff| {diff}"
    # the installed code materialises at L >= 2, the PR's form absorbs (its threshold is 170)
    assert set(stock.counters.materialised) == {2, 3, 4, 8}
    assert set(patched.counters.absorbed) == {1, 2, 3, 4, 8} and not patched.counters.materialised
    assert patched.counted and patched.report.forms == {
        "DeepseekV3Attention": "fixed (threshold form)"
    }


@pytest.mark.parametrize("bits", [None, 4])
def test_source_model_holds_the_loaded_arrays(pr_form_tree, bits):
    model, sources, _, patched = _source_arms(pr_form_tree, bits)
    loaded = tree_flatten(model.parameters())
    built = tree_flatten(sources.models[Variant.PATCHED].parameters())
    assert [k for k, _ in built] == [k for k, _ in loaded]
    assert all(x is y for (_, x), (_, y) in zip(built, loaded, strict=True))
    armed = tree_flatten(patched.model.parameters())
    assert all(x is y for (_, x), (_, y) in zip(armed, loaded, strict=True))
    if bits:
        assert any(k.endswith(".scales") for k, _ in built)


def test_source_arm_caches_are_its_own_classes_and_swap_keeps_them(pr_form_tree):
    model, _, stock, patched = _source_arms(pr_form_tree)
    _prefilled(model, (stock, patched), list(range(16)))
    own = type(tree_model.make_cache(patched.model)[0])
    assert type(patched.caches[0]) is own and own.__module__.startswith("_mlatui_src_")
    assert type(stock.caches[0]).__module__ == "mlx_lm.models.cache"
    keys_stock = stock.caches[0].keys
    swap_caches(stock.caches, patched.caches)
    assert patched.caches[0].keys is keys_stock and type(patched.caches[0]) is own
    assert type(stock.caches[0]).__module__ == "mlx_lm.models.cache"


def _small_tree(pr_form_tree: Path, dest: Path) -> Path:
    """Just the models folder of the PR-form copy (what a model build imports)."""
    shutil.copytree(
        pr_form_tree / "mlx_lm" / "models",
        dest / "mlx_lm" / "models",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    return dest


def test_tree_whose_model_adds_a_parameter_is_refused(pr_form_tree, tmp_path):
    tree = _small_tree(pr_form_tree, tmp_path / "adds")
    file = tree / "mlx_lm" / "models" / "deepseek_v3.py"
    text = file.read_text()
    anchor = "        self._max_absorbed = max_absorbed_queries("
    assert anchor in text
    file.write_text(text.replace(anchor, "        self.gate_bias = mx.zeros((4,))\n" + anchor, 1))
    model = build_model("deepseek_v3")
    with pytest.raises(SourceArmError) as e:
        build_sources(model, {"patched": str(tree)})
    message = str(e.value)
    assert "\n" not in message
    assert "adds parameter model.layers.0.self_attn.gate_bias (4,)" in message


def test_tree_with_an_unrecognised_gate_runs_uncounted(pr_form_tree, tmp_path):
    tree = _small_tree(pr_form_tree, tmp_path / "odd")
    file = tree / "mlx_lm" / "models" / "deepseek_v3.py"
    text = file.read_text()
    assert text.count("if L <= self._max_absorbed:") == 2
    file.write_text(text.replace("if L <= self._max_absorbed:", "if self._absorb(L):"))
    file.write_text(
        file.read_text()
        + "\n\ndef _absorb(self, length):\n    return length <= self._max_absorbed\n\n\n"
        + "DeepseekV3Attention._absorb = _absorb\n"
    )
    model, sources, stock, patched = _source_arms(tree)
    assert stock.counted and not patched.counted
    bare = {slot: ArmSlot(gate="installed") for slot in ("stock", "patched")}
    settings = merge_source_settings(bare, sources, model)
    assert settings["patched"].counters == "no counters (unrecognised code)"
    assert "gate not recognised" in settings["patched"].label
    _prefilled(model, (stock, patched), list(range(16)))
    out = patched.model(mx.array([[1, 2]]), cache=patched.caches)  # runs as the tree wrote it
    mx.eval(out)
    assert patched.counters.total() == (0, 0)
    # a run with it: not failed closed, said so
    from mlatui.config.run_plan import RunConfig
    from mlatui.run import engine
    from mlatui.stream.events import LogMessage

    events: list = []
    config = RunConfig(
        scenario="tests/fixtures/tiny.toml",
        random_weights=True,
        arm_sources={"patched": str(tree)},
        overrides={"reps": 2, "only_phases": ["sweep"], "contexts": [32], "widths": [1, 2]},
    )
    assert engine.run(resolve_plan(config), events.append) == "completed"
    said = [e.message for e in events if isinstance(e, LogMessage) and e.level == "warning"]
    assert any("no counters (unrecognised code); it runs as the tree wrote it" in m for m in said)


def test_not_a_package_is_one_line(tmp_path):
    (tmp_path / "notes.txt").write_text("hi")
    for given in ([f"B={tmp_path}"], [f"B={tmp_path / 'missing'}"], ["B"], ["C=/tmp"]):
        with pytest.raises(ArmSourceError) as e:
            parse_arm_sources(given)
        assert "\n" not in str(e.value)
    with pytest.raises(ArmSourceError, match="not an mlx-lm or mlx-vlm source tree"):
        parse_arm_sources([f"B={tmp_path}"])
    model = build_model("deepseek_v3")
    with pytest.raises(SourceArmError, match="not an mlx-lm or mlx-vlm source tree"):
        build_sources(model, {"stock": str(tmp_path)})


def test_arm_names_and_arms_text(pr_form_tree):
    assert parse_arm_sources([f"b={pr_form_tree}"]) == {"patched": str(pr_form_tree)}
    assert parse_arm_sources([f"stock={pr_form_tree}/mlx_lm"]) == {
        "stock": f"{pr_form_tree}/mlx_lm"
    }
    assert source_arms_text(None, {"patched": "x"}) == "installed,installed"
    assert source_arms_text("pre-fix,installed", {"patched": "x"}) == "stock,installed"
    with pytest.raises(SourceArmError, match="give installed for that slot"):
        source_arms_text("installed,formula", {"patched": "x"})


def test_scenario_arm_sources(tmp_path):
    from mlatui.config.scenario import ScenarioError, load_scenario

    base = Path("tests/fixtures/tiny.toml").read_text()
    path = tmp_path / "s.toml"
    path.write_text(base + '\n[arms]\nb_source = "trees/pr"\n')
    s = load_scenario(path)
    assert s.arms is None and s.arm_sources == (("patched", str(tmp_path / "trees/pr")),)
    path.write_text(base + '\n[arms]\na = "pre-fix"\nb = "installed"\nb_source = "/x"\n')
    s = load_scenario(path)
    assert s.arms == "stock,installed" and s.arm_sources == (("patched", "/x"),)
    path.write_text(base + "\n[arms]\nb_source = 3\n")
    with pytest.raises(
        ScenarioError,
        match="arms.b_source: expected a non-empty string, got 3 — an mlx-lm or mlx-vlm source tree",
    ):
        load_scenario(path)


def _loaded(which: str):
    if which == "embedded":
        from mlx_lm import load

        import mlatui.models
        from mlatui.models import embedded

        mlatui.models.register()
        model, _ = load(str(embedded.MODEL_PATH))
        mx.eval(model.parameters())
        return model
    return build_model("deepseek_v3", hidden_size=256, intermediate_size=1024)


@pytest.mark.parametrize("which", ["deepseek_v3", "embedded"])
def test_two_trees_hold_one_copy_of_the_weights(pr_form_tree, which):
    """MLX active memory with two arms from two trees within 5% of one arm's."""
    gc.collect()
    mx.clear_cache()
    before = mx.get_active_memory()
    model = _loaded(which)
    build_arms(model, INSTALLED_BOTH)
    one_arm = mx.get_active_memory() - before
    sources = build_sources(model, {"patched": str(pr_form_tree)})
    arms = build_arms(model, INSTALLED_BOTH, sources=sources.models)
    gc.collect()
    two_trees = mx.get_active_memory() - before
    assert arms[1].source and arms[1].counted
    assert one_arm > 1e6
    assert abs(two_trees - one_arm) <= 0.05 * one_arm, (one_arm, two_trees)
    if which == "embedded":  # dense layers from the tree, mlatui's sparse attention kept
        _prefilled(model, arms, list(range(1, 33)))
        step = mx.array([[5]])
        a, b = arms[0].model(step, cache=arms[0].caches), arms[1].model(step, cache=arms[1].caches)
        assert mx.array_equal(a, b).item()


def test_bench_runs_end_to_end_with_a_source_arm(pr_form_tree):
    from mlatui.config.run_plan import RunConfig
    from mlatui.run import engine
    from mlatui.stream.events import RunHeader, Step
    from mlatui.views.run_meta import header_fields, is_patch_review

    events: list = []
    config = RunConfig(
        scenario="tests/fixtures/tiny.toml",
        random_weights=True,
        arm_sources={"patched": str(pr_form_tree)},
        overrides={"reps": 2, "only_phases": ["sweep"], "contexts": [64]},
    )
    assert engine.run(resolve_plan(config), events.append) == "completed"
    header = next(e for e in events if isinstance(e, RunHeader))
    arms = header.settings.arms
    assert header.settings.arm_source("patched") == arms["patched"].source
    assert arms["patched"].source is not None and arms["patched"].source.given == str(pr_form_tree)
    assert arms["stock"].source is not None and arms["stock"].source.installed
    assert is_patch_review(header.settings)
    fields = {f.key: f.value for f in header_fields(header)}
    assert "models/deepseek_v3.py" in fields["code_diff"] and "prefill" in fields
    wide = [e for e in events if isinstance(e, Step) and e.width == 2 and e.phase == "sweep"]
    assert all(e.absorbed_calls > 0 for e in wide if e.arm == "patched")
    assert all(e.materialised_calls > 0 for e in wide if e.arm == "stock")


@pytest.mark.parametrize("family", ["glm4_moe_lite", "glm5_next"])
def test_mlx_vlm_pre_fix_release_against_the_fixed_one(tmp_path_factory, family):
    """mlx-vlm 0.6.17 loaded, 0.7.10 as arm B: glm4_moe_lite shares every parameter (L = 1
    bit-identical, L = 2-8 within F32_TOL); 0.7.10 rewrote glm5_next, which is refused naming
    its first difference."""
    import vlm_sources

    from mlatui.models import vlm

    folder = tmp_path_factory.mktemp("vlm")
    old = vlm_sources.source(vlm_sources.PRE_FIX, folder)
    new = vlm_sources.unpacked(vlm_sources.CURRENT, folder)
    mx.random.seed(0)
    model = vlm.language_model(vlm_config(family), old)
    model.set_dtype(mx.float32)
    mx.eval(model.parameters())
    if family == "glm5_next":
        with pytest.raises(SourceArmError, match=r"cannot share the loaded weights: .*q_proj"):
            build_sources(model, {"patched": str(new)})
        return
    sources = build_sources(model, {"patched": str(new)})
    stock, patched = build_arms(model, INSTALLED_BOTH, sources=sources.models)
    assert stock.report.forms != patched.report.forms  # pre-fix against cache-aware
    tokens = list(range(3, 3 + CONTEXT_T + 8))
    for width in (1, 2, 4, 8):
        _prefilled(model, (stock, patched), tokens[:CONTEXT_T])
        step = mx.array([tokens[CONTEXT_T : CONTEXT_T + width]])
        a, b = stock.model(step, cache=stock.caches), patched.model(step, cache=patched.caches)
        mx.eval(a, b)
        if width == 1:
            assert mx.array_equal(a, b).item()
        else:
            assert mx.abs(a - b).max().item() <= F32_TOL


def _header(stock_files: dict, patched_files: dict, given: str = "/src/pr"):
    from mlatui.stream.events import DeviceInfo, RunHeader, Thresholds

    def src(files, where):
        return ArmSource(given=where, package="mlx-lm", version="0.32.2", path="/p", files=files)

    settings = RunSettings(
        arms={
            "stock": ArmSlot(gate="installed", source=src(stock_files, "installed")),
            "patched": ArmSlot(gate="installed", source=src(patched_files, given)),
        }
    )
    return RunHeader(
        6,
        "0",
        "0",
        "0",
        "3",
        "linux",
        DeviceInfo(),
        "m",
        "deepseek_v3",
        {},
        Thresholds(),
        ScenarioRecord(name="?"),
        "none",
        True,
        "2026-01-01T00:00:00",
        settings,
    )


def test_exports_and_compare_say_what_code_ran():
    from mlatui.views.run_meta import code_difference, header_fields, l1_words

    installed = {"models/deepseek_v3.py": "a" * 16, "models/base.py": "b" * 16}
    patch = {**installed, "models/deepseek_v3.py": "c" * 16}
    review = _header(installed, patch)
    fields = {f.key: f.value for f in header_fields(review)}
    assert "models/deepseek_v3.py cccccccc" in fields["code_patched"]
    assert fields["code_diff"] == "the arms ran different code in models/deepseek_v3.py"
    assert l1_words(review.settings, "invalid") == "does this patch change plain decode? it does"
    same = _header(installed, installed, given="installed")
    assert "code_patched" not in {f.key for f in header_fields(same)}  # no tree: no code fields
    assert l1_words(same.settings, "invalid") == ""
    said = code_difference(same, review)
    assert said is not None and "patched slot: models/deepseek_v3.py" in said
    assert "same model files" in (code_difference(review, review) or "")


def test_provenance_of_a_checkout_names_its_commit_and_dirtiness(pr_form_tree, tmp_path):
    import subprocess

    tree = _small_tree(pr_form_tree, tmp_path / "checkout")

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "-C", str(tree), "-c", "user.name=t", "-c", "user.email=t@t", *args],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()

    git("init", "-q")
    git("add", ".")
    git("commit", "-qm", "fix")
    model = build_model("deepseek_v3")
    runtime = tree_model.open_tree(str(tree))
    built = tree_model.model_from_tree(runtime, model)
    said = tree_model.provenance(built, runtime)
    assert said["commit"] == git("rev-parse", "HEAD") and said["dirty"] is False
    assert said["files"]["models/deepseek_v3.py"] == tree_model._sha256(
        tree / "mlx_lm" / "models" / "deepseek_v3.py"
    )
    (tree / "mlx_lm" / "models" / "deepseek_v3.py").write_text("# edited\n", encoding="utf-8")
    assert tree_model.provenance(built, runtime)["dirty"] is True
    assert tree_model.provenance(model)["given"] == "installed"


def test_git_runs_only_for_a_source_arm_in_a_checkout(pr_form_tree, tmp_path, monkeypatch):
    """Not for the installed runtime, nor for a tree outside a repository: on a Mac without the
    Command Line Tools, `git` pops up an installation dialog."""
    import subprocess

    ran: list = []
    real_run = subprocess.run

    def run(cmd, *a, **k):
        if cmd[0] == "git":
            ran.append(cmd)
        return real_run(cmd, *a, **k)

    tree = _small_tree(pr_form_tree, tmp_path / "plain-folder")
    assert not tree_model.in_git_checkout(tree)
    model = build_model("deepseek_v3")
    runtime = tree_model.open_tree(str(tree))
    built = tree_model.model_from_tree(runtime, model)
    monkeypatch.setattr(subprocess, "run", run)
    assert "commit" not in tree_model.provenance(built, runtime)
    assert "commit" not in tree_model.provenance(model)
    assert ran == []
    (tmp_path / ".git").mkdir()  # a repository above the tree: git is asked
    assert tree_model.in_git_checkout(tree)
    tree_model.provenance(built, runtime)
    assert ran
