"""Context text for real-weight runs: Python standard library sources, present wherever Python is."""

from __future__ import annotations

import functools
import inspect

MODULES = (
    "textwrap",
    "argparse",
    "json.decoder",
    "string",
    "fractions",
    "heapq",
    "bisect",
    "statistics",
    "shlex",
    "difflib",
)


@functools.cache
def context_text() -> str:
    """Deterministic text of a few hundred KB (the same on every machine with this Python)."""
    import importlib

    parts = []
    for name in MODULES:
        try:
            parts.append(inspect.getsource(importlib.import_module(name)))
        except (OSError, ImportError):
            continue
    return "\n\n".join(parts)
