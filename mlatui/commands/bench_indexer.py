"""`mlatui bench indexer`: the pooled-window sparse indexer, stock vs patched pooling."""

from __future__ import annotations

import argparse

HELP = "sparse indexer step ms, stock vs patched pooling (GLM-5.3-Flash geometry, random weights)"


def _ints(text: str, what: str) -> list[int]:
    from mlatui.cli import UserError

    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise UserError(
            f"--{what} takes comma-separated integers, e.g. 8192,32768; got {text!r}"
        ) from None
    if not values or any(v < 1 for v in values):
        raise UserError(f"--{what} needs at least one positive integer; got {text!r}")
    return values


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--contexts", default="8192,32768,131072", help="cache lengths (> 2048)")
    parser.add_argument(
        "--widths", default="1,2,4", help="new tokens per step; 1 is always run (control)"
    )
    parser.add_argument(
        "--layer-contexts",
        default=None,
        help="contexts for the whole sparse layer (default: same as --contexts; 'none' to skip)",
    )
    parser.add_argument("--reps", type=int, default=9, help="timed samples per arm (default 9)")
    parser.add_argument("--warmup", type=int, default=2, help="untimed samples per arm (default 2)")
    parser.add_argument(
        "--dtype",
        default=None,
        help="float32 | bfloat16 | float16 (default: float32 on CPU, bfloat16 on GPU)",
    )
    parser.add_argument("--out", default=None, help="write the records as JSONL here")
    parser.add_argument("--quiet", action="store_true", help="no per-sample progress on stderr")


def summary_table(records) -> str:
    from mlatui.records import markdown_table

    by = {(r.bench, r.context, r.width, r.arm): r for r in records}
    rows = []
    for bench, context, width in sorted({(r.bench, r.context, r.width) for r in records}):
        s = by[(bench, context, width, "stock")].stats.median
        p = by[(bench, context, width, "patched")].stats.median
        base = by.get((bench, context, 1, "patched"))
        ratio = p / base.stats.median if base else float("nan")
        ok = "yes" if by[(bench, context, width, "stock")].valid else "INVALID"
        rows.append((bench, context, width, s, p, s / p, ratio, ok))
    return markdown_table(
        (
            "bench",
            "context",
            "S",
            "stock ms",
            "patched ms",
            "stock/patched",
            "patched / patched S=1",
            "S=1 control",
        ),
        rows,
    )


def verdict(records) -> list[str]:
    """The issue's bar: patched S=2..4 within 1.5x of S=1 at every context; stock S=2 grows."""
    lines = []
    idx = {(r.context, r.width, r.arm): r.stats.median for r in records if r.bench == "indexer"}
    contexts = sorted({c for c, _, _ in idx})
    for c in contexts:
        base = idx.get((c, 1, "patched"))
        for w in (2, 3, 4):
            if (c, w, "patched") in idx and base:
                ratio = idx[(c, w, "patched")] / base
                lines.append(
                    f"T={c} S={w}: patched {ratio:.2f}x of S=1 ({'ok' if ratio <= 1.5 else 'OVER 1.5x'})"
                )
    s2 = [(c, idx[(c, 2, "stock")]) for c in contexts if (c, 2, "stock") in idx]
    if len(s2) > 1:
        grows = all(b[1] > a[1] for a, b in zip(s2, s2[1:], strict=False))
        trend = ", ".join(f"{c}: {ms:.2f} ms" for c, ms in s2)
        lines.append(f"stock S=2 by context: {trend} ({'grows' if grows else 'does NOT grow'})")
    return lines


def run(args: argparse.Namespace) -> int:
    import sys

    from mlatui.cli import UserError

    contexts = _ints(args.contexts, "contexts")
    widths = _ints(args.widths, "widths")
    if args.layer_contexts is None:
        layer_contexts = contexts
    elif args.layer_contexts.strip().lower() in ("none", ""):
        layer_contexts = []
    else:
        layer_contexts = _ints(args.layer_contexts, "layer-contexts")
    if args.reps < 1 or args.warmup < 0:
        raise UserError("--reps must be >= 1 and --warmup >= 0")
    if args.dtype not in (None, "float32", "bfloat16", "float16"):
        raise UserError(f"--dtype must be float32, bfloat16 or float16; got {args.dtype!r}")
    from mlatui.indexer import SparseMLAConfig

    topk = SparseMLAConfig().index_topk
    small = [c for c in [*contexts, *layer_contexts] if c <= topk]
    if small:
        raise UserError(
            f"contexts must be above index_topk ({topk}); the indexer is bypassed at {small[0]}"
        )

    from mlatui.indexer_bench import run_indexer_bench
    from mlatui.records import env_line, to_jsonl

    def emit(d: dict) -> None:
        if not args.quiet:
            tag = " (warm-up)" if d["warmup"] else ""
            print(
                f"{d['bench']} T={d['context']} S={d['width']} {d['arm']}: {d['ms']:.2f} ms{tag}",
                file=sys.stderr,
                flush=True,
            )

    records = run_indexer_bench(
        contexts,
        widths,
        args.reps,
        args.warmup,
        emit,
        layer_contexts=layer_contexts,
        dtype=args.dtype,
    )
    print(
        f"# mlatui bench indexer\n\n{env_line(records[0].env)}, dtype {records[0].settings['dtype']}, "
        f"reps {args.reps}, warm-up {args.warmup}, ABBA\n"
    )
    print(summary_table(records))
    print()
    for line in verdict(records):
        print(f"- {line}")
    for r in records:
        if not r.valid and r.width == 1 and r.arm == "stock":
            print(f"- {r.bench} T={r.context}: {r.note}")
    if args.out:
        with open(args.out, "w") as f:
            f.write(to_jsonl(records))
        print(f"\nwrote {len(records)} records to {args.out}")
    return 0
