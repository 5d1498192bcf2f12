"""A copy of the installed mlx-lm with the upstream fix's gate form applied, for tests and for
measuring the fixed runtime before it is released.

The upstream form: `self._max_absorbed = max_absorbed_queries(r, nope, v)` set in `__init__`,
and both MLA gates `if L <= self._max_absorbed:` (the helper lives in `models/mla.py`). Only
the gates that guard embed_q/unembed_out change; deepseek_v32's sparse gather stays `L == 1`.

    python tests/pr_form.py DEST      # writes DEST/mlx_lm; run with PYTHONPATH=DEST
"""

from __future__ import annotations

import ast
import shutil
import sys
from pathlib import Path

HELPER = '''

def max_absorbed_queries(kv_lora_rank, qk_nope_head_dim, v_head_dim, cache_len=None):
    """Largest query count for which the absorbed MLA path is cheaper (per head: absorbed
    ~ L*r*d + 2*L*T*r, materialised ~ T*r*d + L*T*d, d = nope + v)."""
    d = qk_nope_head_dim + v_head_dim
    denom = 2 * kv_lora_rank - d
    if cache_len is not None and cache_len > 0:
        denom += kv_lora_rank * d / cache_len
    if denom <= 0:
        return 1
    return max(1, int(kv_lora_rank * d / denom))
'''


def _guards_markers(node: ast.If) -> bool:
    calls = {
        n.func.attr
        for n in ast.walk(ast.Module(body=[*node.body, *node.orelse], type_ignores=[]))
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
    }
    return bool(calls & {"embed_q", "unembed_out"})


def _gates(fn: ast.FunctionDef) -> list[tuple[ast.If, str]]:
    out = []
    for n in ast.walk(fn):
        t = n.test if isinstance(n, ast.If) else None
        if (
            isinstance(n, ast.If)
            and isinstance(t, ast.Compare)
            and isinstance(t.left, ast.Name)
            and isinstance(t.ops[0], ast.Eq)
            and isinstance(t.comparators[0], ast.Constant)
            and t.comparators[0].value == 1
            and _guards_markers(n)
        ):
            out.append((n, t.left.id))
    return out


def apply_pr_form(source: str) -> tuple[str, int]:
    """`source` with every MLA class's gates in the upstream form; (new source, gates changed)."""
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    edits: list[tuple[int, str, str | None]] = []  # (0-based line, kind, text)
    for cls in (n for n in tree.body if isinstance(n, ast.ClassDef)):
        methods = {f.name: f for f in cls.body if isinstance(f, ast.FunctionDef)}
        call, init = methods.get("__call__"), methods.get("__init__")
        gates = _gates(call) if call is not None else []
        if not gates or init is None:
            continue
        for node, length in gates:
            edits.append((node.lineno - 1, "gate", length))
        last = init.body[-1]
        indent = " " * last.col_offset
        text = (
            f"{indent}self._max_absorbed = max_absorbed_queries(\n"
            f"{indent}    self.kv_lora_rank, self.qk_nope_head_dim, self.v_head_dim\n"
            f"{indent})\n"
        )
        edits.append((last.end_lineno or last.lineno, "insert", text))
    for index, kind, text in sorted(edits, key=lambda e: e[0], reverse=True):
        if kind == "gate":
            lines[index] = lines[index].replace(
                f"if {text} == 1:", f"if {text} <= self._max_absorbed:", 1
            )
        else:
            assert text is not None
            lines.insert(index, text)
    changed = sum(1 for _, kind, _ in edits if kind == "gate")
    if not changed:
        return source, 0
    head = "from .mla import max_absorbed_queries\n"
    out = "".join(lines)
    first_import = next(
        n
        for n in tree.body
        if isinstance(n, ast.Import) or (isinstance(n, ast.ImportFrom) and n.module != "__future__")
    ).lineno
    out_lines = out.splitlines(keepends=True)
    out_lines.insert(first_import - 1, head)
    return "".join(out_lines), changed


def write_pr_form_copy(dest: Path, source_root: Path | None = None) -> dict[str, int]:
    """DEST/mlx_lm: a copy of `source_root` (default: the installed mlx_lm) in the upstream form.
    Returns file -> gates changed."""
    if source_root is None:
        import mlx_lm

        source_root = Path(mlx_lm.__file__).parent
    target = dest / "mlx_lm"
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(source_root, target, ignore=shutil.ignore_patterns("__pycache__"))
    mla = target / "models" / "mla.py"
    if "def max_absorbed_queries" not in mla.read_text():
        mla.write_text(mla.read_text() + HELPER)
    changed = {}
    for path in sorted((target / "models").glob("*.py")):
        new, n = apply_pr_form(path.read_text())
        if n:
            path.write_text(new)
            changed[path.name] = n
    return changed


if __name__ == "__main__":
    for name, n in write_pr_form_copy(Path(sys.argv[1])).items():
        print(f"{name}: {n} gates")
