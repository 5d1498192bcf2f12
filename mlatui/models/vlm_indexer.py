"""What an mlx-vlm sparse model's own indexer does, read from its installed source, said once at load.

mlatui's indexer comparison (stock pooling at S == 1 only vs the fix at any S) runs on mlatui's
own sparse layers. An mlx-vlm model brings its own indexer: mlx-vlm 0.6.17's glm5_next still has
the `S == 1` pool gate; 0.7.10's pools every complete window incrementally at any step width
(a PoolingCache) and attends absorbed for steps up to its decode block (8 tokens), so there is no
stock-vs-fixed indexer pair to compare there. The run says which, instead of showing a missing
comparison as a zero gain.
"""

from __future__ import annotations

import ast
import inspect
import sys
import textwrap
from typing import Any

from mlatui.gate.forms import indexer_pool_gates
from mlatui.models.source_tree import runtime_of


def _pool_gate_lines(cls: type) -> tuple[str, list[int]] | None:
    """(file, lines of `if S == 1 and ... _pool ...` gates) of the class's methods; None when its
    source cannot be read."""
    try:
        source = textwrap.dedent(inspect.getsource(cls))
        filename = inspect.getsourcefile(cls) or cls.__module__
        first = inspect.getsourcelines(cls)[1]
    except (OSError, TypeError):
        return None
    lines = [
        gate.lineno + first - 1
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.FunctionDef)
        for gate in indexer_pool_gates(node)
    ]
    return filename, sorted(set(lines))


def indexer_notices(model: Any) -> list[str]:
    """One line per pooled-indexer class of a runtime (not mlatui's own): pre-fix (its S == 1
    pool gate, file:line) or already incremental at any width (the comparison does not apply)."""
    said: set[type] = set()
    out = []
    for _, module in model.named_modules():
        cls = type(module)
        if (
            cls in said
            or cls.__module__.startswith("mlatui.")
            or not hasattr(module, "index_kpool")
        ):
            continue
        said.add(cls)
        runtime, version, _ = runtime_of(cls.__module__)
        where = f"{runtime} {version} {cls.__name__}"
        found = _pool_gate_lines(cls)
        if found is None:
            out.append(f"{where}: its source cannot be read; what its indexer pools is not known")
        elif found[1]:
            at = ", ".join(f"{found[0]}:{n}" for n in found[1])
            out.append(
                f"{where}: pools the indexer's windows incrementally only at S == 1 ({at}); every "
                "verify step re-pools the whole cache. The indexer phase measures mlatui's own "
                "sparse layers, not this runtime's"
            )
        else:
            block = getattr(sys.modules.get(cls.__module__), "DECODE_BLOCK_SIZE", None)
            absorbed = f", and attends absorbed for steps up to {block} tokens" if block else ""
            out.append(
                f"{where}: already pools incrementally at any step width (no S == 1 gate){absorbed}: "
                "the indexer fix is in this runtime, so there is no stock-vs-fixed indexer to compare"
            )
    return out
