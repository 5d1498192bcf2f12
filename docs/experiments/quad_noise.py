"""How noisy a recording's paired quads are: per phase, context and width, the number of A B B A
quads, the spread (sd) of log(stock pair sum / patched pair sum) and its median, and the median
within-quad range. A ±0.5% confidence interval on the median needs roughly
(1.25 * 1.96 * sd / 0.005) ** 2 quads; the last column says how many.

    python docs/experiments/quad_noise.py RECORDING.jsonl [...]
"""

from __future__ import annotations

import json
import math
import statistics
import sys
from collections import defaultdict


def quads(steps: list[dict]) -> list[tuple[float, float]]:
    """(log ratio, log max/min) of each complete quad, in recorded order per (round, width)."""
    out = []
    for i in range(0, len(steps) - 3, 4):
        g = steps[i : i + 4]
        a = [s["ms"] for s in g if s["arm"] == "stock"]
        b = [s["ms"] for s in g if s["arm"] == "patched"]
        if len(a) == 2 and len(b) == 2 and len({s["rep"] for s in g}) == 1:
            ms = [s["ms"] for s in g]
            out.append((math.log(sum(a) / sum(b)), math.log(max(ms) / min(ms))))
    return out


def main(paths: list[str]) -> None:
    print(
        "| file | phase | context | L | quads | sd log-ratio | median | within-quad range | quads for ±0.5% |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for path in paths:
        cells: dict[tuple[str, int, int], list[dict]] = defaultdict(list)
        for line in open(path, encoding="utf-8"):
            if '"type":"step"' in line:
                s = json.loads(line)
                cells[(s["phase"], s["context"], s["width"])].append(s)
        for (phase, context, width), steps in sorted(cells.items()):
            q = quads(steps)
            if len(q) < 3:
                continue
            sd = statistics.pstdev(r for r, _ in q)
            need = math.ceil((1.25 * 1.96 * sd / 0.005) ** 2)
            print(
                f"| {path.rsplit('/', 1)[-1]} | {phase} | {context} | {width} | {len(q)} | {sd:.3f} | "
                f"{statistics.median(r for r, _ in q):+.4f} | {statistics.median(w for _, w in q):.3f} | {need} |"
            )


if __name__ == "__main__":
    main(sys.argv[1:])
