"""`mlatui scan` and the gate forms: every known form is recognised in real runtime source, an
unknown one is named with its line, and the upstream fix's form applied to the installed mlx-lm
is read as fixed."""

import ast
import json
import textwrap
from pathlib import Path

import mlx_lm
import pytest

from mlatui.cli import main
from mlatui.gate.forms import GateForm, GateShapeError, SiteKind, find_mla_gate
from mlatui.gate.scan import SiteState, scan_tree

INSTALLED = Path(mlx_lm.__file__).parent
# every MLA family of the family table that mlx-lm itself ships, with its attention class
MLX_LM_GATED = {
    "deepseek_v3.py": "DeepseekV3Attention",
    "deepseek_v32.py": "DeepseekV32Attention",
    "glm4_moe_lite.py": "Glm4MoeLiteAttention",
    "kimi_linear.py": "KimiMLAAttention",
    "longcat_flash.py": "LongcatFlashMLA",
    "mistral4.py": "Mistral4Attention",
    "bailing_moe_v3.py": "BailingMLA",
    "bailing_hybrid.py": "MultiLatentAttention",
    "kimi_k3.py": "KimiK3MLAAttention",
}


def _gate_of(source: str):
    fn = ast.parse(textwrap.dedent(source)).body[0]
    return find_mla_gate(fn)


def test_three_forms_from_source():
    pre = _gate_of(
        """
        def __call__(self, x, mask=None, cache=None):
            if L == 1:
                q = self.embed_q(q)
            else:
                k = self.embed_q(kv_latent, transpose=False)
            if L == 1:
                o = self.unembed_out(o)
        """
    )
    threshold = _gate_of(
        """
        def __call__(self, x, mask=None, cache=None):
            if L <= self._max_absorbed:
                q = self.embed_q(q)
            else:
                k = self.embed_q(kv_latent, transpose=False)
        """
    )
    cache_aware = _gate_of(
        """
        def __call__(self, x, mask=None, cache=None):
            absorbed = L == 1 or L <= max_absorbed_queries(*self._absorbed_dims, latent_length(kv_latent))
            if absorbed:
                q = self.embed_q(q)
            else:
                k = self.embed_q(kv_latent, transpose=False)
        """
    )
    assert (pre.form, len(pre.sites), pre.length_name) == (GateForm.PRE_FIX, 2, "L")
    assert (threshold.form, threshold.attribute) == (GateForm.THRESHOLD, "_max_absorbed")
    assert cache_aware.form is GateForm.CACHE_AWARE and cache_aware.flag_assign is not None
    assert not pre.form.fixed and threshold.form.fixed and cache_aware.form.fixed


def test_unknown_gate_names_its_line():
    with pytest.raises(GateShapeError) as e:
        _gate_of(
            """
            def __call__(self, x):
                q = x
                if x.shape[1] < 4:
                    q = self.embed_q(q)
            """
        )
    assert e.value.line == 4 and "no known gate form" in str(e.value)


def test_scan_installed_mlx_lm_lists_every_family_gate():
    sites = scan_tree(INSTALLED)
    gates = {Path(s.path).name: s for s in sites if s.kind is SiteKind.MLA_GATE}
    assert set(MLX_LM_GATED) <= set(gates)
    for name, cls in MLX_LM_GATED.items():
        site = gates[name]
        assert site.cls == f"{cls}.__call__" and site.state is SiteState.PRE_FIX
        # file:line points at the gate itself
        line = (INSTALLED / "models" / name).read_text().splitlines()[site.line - 1]
        assert ("== 1" in line) and line.strip().startswith("if ")
    gather = [s for s in sites if s.kind is SiteKind.SPARSE_GATHER]
    assert [Path(s.path).name for s in gather] == ["deepseek_v32.py"]
    assert gates["glm4_moe_lite.py"].threshold == 398 and gates["deepseek_v3.py"].threshold == 170


def test_scan_reads_the_upstream_form_as_fixed(pr_form_tree):
    sites = scan_tree(pr_form_tree / "mlx_lm")
    assert {Path(s.path).name for s in sites if s.state is SiteState.FIXED} == set(MLX_LM_GATED)
    gates = [s for s in sites if s.kind is SiteKind.MLA_GATE]
    assert len(gates) == len(MLX_LM_GATED)
    assert {s.form for s in gates} == {GateForm.THRESHOLD.value}
    # the correctness guard is left at L == 1 by the fix too
    assert [s.state for s in sites if s.kind is SiteKind.SPARSE_GATHER] == [SiteState.LEFT_ALONE]


def test_scan_command_json_and_table(pr_form_tree, tmp_path, capsys):
    assert main(["scan", "--json", str(pr_form_tree / "mlx_lm" / "models" / "deepseek_v3.py")]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["form"] for r in rows] == ["fixed (threshold form)"]
    assert rows[0]["threshold"] == 170 and len(rows[0]["lines"]) == 2
    assert main(["scan", str(INSTALLED / "models" / "deepseek_v32.py")]) == 0
    out = capsys.readouterr().out
    assert (
        "deepseek_v32.py:217" in out
        and "left alone" in out
        and "2 sites: 1 pre-fix, 1 left alone" in out
    )
    assert main(["scan", str(tmp_path / "nope")]) == 2
    assert "no such file or folder" in capsys.readouterr().err


def test_latent_is_the_whole_cache_where_several_are_expanded():
    from mlatui.gate.forms import latent_name

    gate = _gate_of(
        """
        def _attend(self, q, latent, new_latent, length):
            if length <= DECODE_BLOCK_SIZE and not self.training:
                out = self.unembed_out(self.embed_q(q))
            else:
                previous = latent.shape[2] - length
                if previous == self.projected:
                    keys = self.embed_q(new_latent, transpose=False)
                else:
                    keys = self.embed_q(latent, transpose=False)
        """
    )
    assert gate.form is GateForm.THRESHOLD and gate.length_name == "length"
    assert latent_name(gate) == "latent"  # not the new tokens' latent: T comes from it


def test_fail_on_pre_fix_exits_1_on_the_installed_tree_and_0_on_the_pr_form(pr_form_tree, capsys):
    assert main(["scan", "--fail-on", "pre-fix", str(INSTALLED)]) == 1
    out, err = capsys.readouterr()
    assert "9 pre-fix" in out  # the table is printed in full first
    assert err.startswith("mlatui scan: 9 pre-fix sites (first: models/") and "exit 1" in err
    assert main(["scan", "--fail-on", "pre-fix", "--json", str(pr_form_tree / "mlx_lm")]) == 0
    out, err = capsys.readouterr()
    assert err == "" and all(json.loads(line)["state"] != "pre-fix" for line in out.splitlines())
    assert main(["scan", str(INSTALLED)]) == 0  # without --fail-on, whatever it found
    capsys.readouterr()
    assert main(["scan", "--fail-on", "not-recognised", str(INSTALLED)]) == 0
