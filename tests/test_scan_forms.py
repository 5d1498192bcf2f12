"""Hand-written gate forms (tests/handwritten_gates.py): `mlatui scan` reports every path of a
method as its own site with its lines and resolved threshold, leaves gathers alone, names what it
cannot read; the gate patch runs such a runtime with counters, pre-fix against installed."""

from __future__ import annotations

import ast
import copy
import json
import textwrap
from pathlib import Path

import mlx.core as mx
import pytest
from mlx_lm.models.cache import make_prompt_cache

from mlatui.cli import main
from mlatui.gate import mla
from mlatui.gate.forms import GateForm, GateShapeError, SiteKind, read_method
from mlatui.gate.scan import SiteState, module_constants, scan_tree
from mlatui.models import family_configs
from tests import handwritten_gates
from tests.random_models import build_model
from tests.test_mla import F32_TOL

HANDWRITTEN = Path(handwritten_gates.__file__)
SOURCE = HANDWRITTEN.read_text().splitlines()
PROMPT_T = 40


def _line_of(text: str, after: int = 0) -> int:
    """1-based line of the first source line at or after `after` that holds `text`."""
    return next(i + 1 for i, line in enumerate(SOURCE) if i + 1 >= after and text in line)


def _sites(cls: str):
    return [s for s in scan_tree(HANDWRITTEN) if s.cls == f"{cls}.__call__"]


def test_flagged_paths_each_a_site_with_lines_and_thresholds():
    sites = _sites("FlaggedPathsAttention")
    start = _line_of("class FlaggedPathsAttention")
    by_line = {s.line: s for s in sites}
    decode = by_line[_line_of("if L == 1:", start)]
    fast = by_line[_line_of("use_blockwise = (", start)]
    wide = by_line[_line_of("if self.chunked and L > 16:", start)]
    gate = by_line[_line_of("absorbed = L <= ABSORBED_MAX_L", start)]
    assert len(sites) == 4
    assert (decode.kind, decode.state, decode.form) == (
        SiteKind.ABSORBED_PATH,
        SiteState.LEFT_ALONE,  # the method absorbs wider steps elsewhere: not pre-fix
        "L == 1",
    )
    assert fast.kind is SiteKind.ABSORBED_PATH and fast.state is SiteState.FIXED
    assert "L > 1 and (kv_latent.shape[2] >= BLOCKWISE_MIN_T or L <= ABSORBED_MAX_L)" in fast.form
    assert fast.lines == (fast.line, _line_of("if use_blockwise:", start))
    assert (fast.fixed_at, fast.threshold) == (8, 398)
    assert (wide.kind, wide.fixed_at) == (SiteKind.MATERIALISED_PATH, 16)
    assert gate.kind is SiteKind.MLA_GATE and gate.form.startswith(GateForm.THRESHOLD.value)
    assert (gate.fixed_at, gate.threshold) == (8, 398)
    assert gate.lines == (gate.line + 1, _line_of("if absorbed:", gate.line + 2))


def test_topk_chain_gather_left_alone_paths_and_direct_gate():
    sites = _sites("TopkChainAttention")
    start = _line_of("class TopkChainAttention")
    kinds = {s.line: s.kind for s in sites}
    gather = _line_of("if L == 1:", _line_of("def __call__", start))
    assert kinds == {
        gather: SiteKind.SPARSE_GATHER,
        _line_of("elif L <= 8:", gather): SiteKind.ABSORBED_PATH,  # via self._few_rows
        _line_of("else:", gather + 9): SiteKind.MIXED_PATH,
        _line_of("if L <= 8:", gather + 10): SiteKind.MLA_GATE,
    }
    gate = next(s for s in sites if s.kind is SiteKind.MLA_GATE)
    assert len(gate.lines) == 2 and gate.fixed_at == 8 and gate.state is SiteState.FIXED
    assert next(s for s in sites if s.line == gather).state is SiteState.LEFT_ALONE


def _read(source: str):
    return read_method(ast.parse(textwrap.dedent(source)).body[0])


def test_unrecognised_names_its_lines_and_condition():
    with pytest.raises(GateShapeError) as e:
        _read(
            """
            def __call__(self, x, cache=None):
                B, L, D = x.shape
                if x.shape[1] < 4:
                    q = self.embed_q(q)
                if x.shape[1] < 4:
                    o = self.unembed_out(o)
            """
        )
    assert e.value.lines == (4, 6)
    assert "lines 4, 6" in str(e.value) and "`if x.shape[1] < 4:`" in str(e.value)
    with pytest.raises(GateShapeError) as e:
        _read(
            """
            def __call__(self, x, cache=None):
                B, L, D = x.shape
                if L == 1:
                    q = self.embed_q(q)
                else:
                    k = self.embed_q(kv, transpose=False)
                if L <= 8:
                    q = self.embed_q(q)
                else:
                    k = self.embed_q(kv, transpose=False)
            """
        )
    said = str(e.value)
    assert "`L == 1` (line 4)" in said and "`L <= 8` (line 8)" in said and e.value.lines == (4, 8)


def test_constants_resolve_from_the_module_and_a_sibling(tmp_path):
    (tmp_path / "pkg" / "fam").mkdir(parents=True)
    (tmp_path / "pkg" / "blocks.py").write_text("DECODE_ROWS = 6\n")
    model = tmp_path / "pkg" / "fam" / "model.py"
    model.write_text("from ..blocks import DECODE_ROWS as ROWS\nOWN = 3\nFLAG = True\n")
    assert module_constants(model) == {"ROWS": 6, "OWN": 3}


def test_scan_json_paths_relative_to_an_absolute_root(tmp_path, capsys, monkeypatch):
    tree = tmp_path / "vendored" / "runtime"
    tree.mkdir(parents=True)
    (tree / "attention.py").write_text(HANDWRITTEN.read_text())
    monkeypatch.chdir(tmp_path)
    assert main(["scan", "--json", "vendored"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert {r["root"] for r in rows} == {str(tmp_path / "vendored")}
    assert {r["path"] for r in rows} == {"runtime/attention.py"}
    assert main(["scan", "vendored"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"## vendored ({tmp_path / 'vendored'})\n")
    assert "| vendored/runtime/attention.py:" in out and "fixed at 8; formula 398" in out
    one = tree / "one.py"
    one.write_text(
        "class A:\n    def f(self, x):\n        if L == 1:\n            q = self.embed_q(q)\n"
    )
    assert main(["scan", str(one)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"## {one}\n") and "\n1 site: 1 pre-fix\n" in out


# ---- the gate patch on the hand-written classes ----------------------------------------------


def _model_with(cls: type, sparse: bool | None = None):
    model = build_model("deepseek_v3", layers=1)
    reference = mla.twin(model)
    for _, attn in mla.mla_modules(model):
        attn.__class__ = cls
        if sparse is not None:
            attn.sparse = sparse
    return reference, model


def _prefilled(model):
    cache = make_prompt_cache(model)
    mx.random.seed(3)
    prompt = mx.random.randint(0, family_configs.VOCAB_TINY, (1, PROMPT_T))
    mx.eval(model(prompt, cache=cache), [c.state for c in cache])
    return cache


def _counts_and_parity(cls: type, threshold: str, widths, sparse: bool | None = None):
    reference, model = _model_with(cls, sparse)
    arm = mla.twin(model)
    mla.patch_model(arm, threshold)
    counters = mla.branch_counters(arm)
    cache = _prefilled(reference)
    for i, width in enumerate(widths):
        mx.random.seed(20 + i)
        step = mx.random.randint(0, family_configs.VOCAB_TINY, (1, width))
        want, got = (
            reference(step, cache=copy.deepcopy(cache)),
            arm(step, cache=copy.deepcopy(cache)),
        )
        assert mx.allclose(want, got, atol=F32_TOL, rtol=F32_TOL).item(), (threshold, width)
    return counters.snapshot()


WIDTHS = (1, 4, 12, 20)


def test_flagged_paths_run_counted_installed_and_pre_fix():
    cls = handwritten_gates.FlaggedPathsAttention
    assert mla.gate_forms(cls) == {"__call__": GateForm.THRESHOLD}
    installed = _counts_and_parity(cls, "installed", WIDTHS)
    assert installed == {"absorbed": {1: 1, 4: 1}, "materialised": {12: 1, 20: 1}}
    assert _counts_and_parity(cls, "stock", WIDTHS) == {
        "absorbed": {1: 1},
        "materialised": {4: 1, 12: 1, 20: 1},
    }
    # the formula (170 for deepseek_v3) absorbs through the fast path at 12 and 20 too
    assert _counts_and_parity(cls, "formula", WIDTHS) == {
        "absorbed": {1: 1, 4: 1, 12: 1, 20: 1},
        "materialised": {},
    }


@pytest.mark.parametrize("sparse", [True, False])
def test_topk_chain_runs_counted_installed_and_pre_fix(sparse):
    cls = handwritten_gates.TopkChainAttention
    installed = _counts_and_parity(cls, "installed", WIDTHS, sparse)
    assert installed == {"absorbed": {1: 1, 4: 1}, "materialised": {12: 1, 20: 1}}
    stock = _counts_and_parity(cls, "stock", WIDTHS, sparse)
    assert stock == {"absorbed": {1: 1}, "materialised": {4: 1, 12: 1, 20: 1}}


def test_a_single_file_takes_its_family_from_its_folder(tmp_path, capsys):
    """mlx-vlm's layout: the folder, not the file, names the family (glm4_moe_lite: 398)."""
    one = tmp_path / "glm4_moe_lite" / "language.py"
    one.parent.mkdir()
    one.write_text(
        "class Attention:\n"
        "    def __call__(self, x, kv):\n"
        "        B, L, D = x.shape\n"
        "        if L == 1:\n"
        "            q = self.embed_q(x)\n"
        "        else:\n"
        "            k = self.embed_q(kv, transpose=False)\n"
    )
    assert main(["scan", "--json", str(one)]) == 0
    (row,) = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert (row["root"], row["path"], row["threshold"]) == (str(one), "language.py", 398)


def _handwritten_tree(dest: Path) -> Path:
    """The installed mlx_lm's models folder, its deepseek_v3 attention replaced by the
    hand-written FlaggedPathsAttention (its source appended to the module, the name rebound)."""
    import inspect
    import shutil

    import mlx_lm

    models = dest / "mlx_lm" / "models"
    shutil.copytree(Path(mlx_lm.__file__).parent / "models", models)
    constants = "\n".join(
        line for line in SOURCE if line.startswith(("ABSORBED_MAX_L =", "BLOCKWISE_MIN_T ="))
    )
    file = models / "deepseek_v3.py"
    file.write_text(
        file.read_text()
        + f"\n\n{constants}\n\n\n"
        + inspect.getsource(handwritten_gates._Projections)
        + "\n\n"
        + inspect.getsource(handwritten_gates.FlaggedPathsAttention)
        + "\n\nDeepseekV3Attention = FlaggedPathsAttention\n"
    )
    return dest


def test_a_handwritten_tree_runs_as_an_arm_counted_pre_fix_against_installed(tmp_path):
    from mlatui.gate.policy import Gates
    from mlatui.run.arms import build_arms, build_sources, copy_cache

    tree = _handwritten_tree(tmp_path)
    model = build_model("deepseek_v3", layers=1)
    sources = build_sources(model, {"patched": str(tree)})
    stock, patched = build_arms(
        model, Gates.parse("installed", None, "installed"), sources=sources.models
    )
    assert stock.counted and patched.counted
    assert patched.report.forms == {"FlaggedPathsAttention": GateForm.THRESHOLD.value}
    base = _prefilled(model)
    for i, width in enumerate(WIDTHS):
        stock.cache, patched.cache = copy_cache(base), copy_cache(base)
        mx.random.seed(40 + i)
        step = mx.random.randint(0, family_configs.VOCAB_TINY, (1, width))
        a, b = stock.model(step, cache=stock.caches), patched.model(step, cache=patched.caches)
        assert mx.allclose(a, b, atol=F32_TOL, rtol=F32_TOL).item(), width
    # the installed mlx-lm (pre-fix) materialises every wide step; the hand-written runtime as
    # installed absorbs up to its constant 8, through its fast path
    assert stock.counters.snapshot() == {"absorbed": {1: 1}, "materialised": {4: 1, 12: 1, 20: 1}}
    assert patched.counters.snapshot() == {
        "absorbed": {1: 1, 4: 1},
        "materialised": {12: 1, 20: 1},
    }
