"""Print the docs/performance.md tables of issue 9 from recordings, re-estimated with the current
estimator (mlatui.views.report.reestimate: the seeds the run used, so a rerun prints the same numbers).

    python docs/tables.py bias RUN.jsonl...     # A/A: stock/patched - 1 per pass, context, width
    python docs/tables.py sweep RUN.jsonl       # real patch: both arms, paired ratio, flatness
    python docs/tables.py l1 RUN.jsonl...       # the L = 1 check of every context
"""

from __future__ import annotations

import sys

from mlatui.stream.recorder import read_recording
from mlatui.views.report import reestimate


def _load(path):
    r = read_recording(path)
    return reestimate([r.header, *r.events])


def _ci(iv, digits=2, pct=False):
    if iv is None:
        return "-"
    if pct:
        return (
            f"{(iv.median - 1) * 100:+.2f}% [{(iv.low - 1) * 100:+.2f}, {(iv.high - 1) * 100:+.2f}]"
        )
    return f"{iv.median:.{digits}f} [{iv.low:.{digits}f}, {iv.high:.{digits}f}]"


def bias(paths):
    print("| run | pass | context | L | bias [95% CI] | CI contains 0 | quads |")
    print("|---|---|---:|---:|---:|:---:|---:|")
    for path in paths:
        for (phase, context), e in sorted(_load(path).items()):
            for width, iv in sorted(e.ratio.items()):
                ok = "yes" if iv.low <= 1 <= iv.high else "NO"
                tag = phase.rsplit("/", 1)[-1]
                print(
                    f"| {path.rsplit('/', 1)[-1]} | {tag} | {context} | {width} | {_ci(iv, pct=True)} | {ok} | {iv.n} |"
                )


def sweep(paths):
    print("| context | L | stock ms | patched ms | stock/patched | patched L / L=1 | L=1 check |")
    print("|---:|---:|---:|---:|---:|---:|---|")
    for path in paths:
        for (_, context), e in sorted(_load(path).items()):
            for width in sorted(e.ratio):
                print(
                    f"| {context} | {width} | {_ci(e.step_ms[('stock', width)])} | "
                    f"{_ci(e.step_ms[('patched', width)])} | {_ci(e.ratio[width], 3)} | "
                    f"{_ci(e.vs_l1.get(('patched', width)), 3) if width > 1 else '1'} | "
                    f"{e.control_outcome.value if width == 1 else ''} |"
                )
            m = e.marginal_ms
            if m:
                print(
                    f"| {context} | marginal L=2-L=1 | {_ci(m.get('stock'))} | {_ci(m.get('patched'))} | | | |"
                )


def l1(paths):
    print(
        "| run | phase | context | paired L=1 ratio [95% CI] | quads | rounds | outcome | drifting rounds |"
    )
    print("|---|---|---:|---:|---:|---:|---|---:|")
    for path in paths:
        for (phase, context), e in sorted(_load(path).items()):
            iv = e.control_ratio
            print(
                f"| {path.rsplit('/', 1)[-1]} | {phase} | {context} | {_ci(iv, 4)} | {iv.n} | "
                f"{e.rounds} | {e.control_outcome.value} | {e.drifting_rounds} |"
            )


if __name__ == "__main__":
    {"bias": bias, "sweep": sweep, "l1": l1}[sys.argv[1]](sys.argv[2:])
