"""`mlatui bench attention`: (a) forced absorbed vs materialised branch on one real-geometry
attention layer, (b) whole model stock vs patched step time at L = 1..4 with the L = 1 check."""

from __future__ import annotations

import argparse
import sys

HELP = "MLA attention: forced-branch sweep on one layer (a) and whole-model stock vs patched (b)"


def int_list(text: str) -> list[int]:
    from mlatui.cli import UserError

    try:
        out = [
            int(float(x[:-1]) * 1024) if x.lower().endswith("k") else int(x)
            for x in text.split(",")
            if x
        ]
    except ValueError:
        raise UserError(
            f"{text!r}: expected comma-separated integers, e.g. 1024,8192 or 1k,8k"
        ) from None
    if not out or min(out) < 1:
        raise UserError(f"{text!r}: expected positive integers")
    return out


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--family", required=True, help="MLA family, e.g. glm4_moe_lite, deepseek_v3"
    )
    parser.add_argument(
        "--contexts",
        type=int_list,
        default=[1024, 8192],
        help="cache lengths T (default 1024,8192)",
    )
    parser.add_argument(
        "--widths",
        type=int_list,
        default=[1, 2, 3, 4, 8, 16, 32, 64, 128, 256, 512],
        help="query widths L for part (a) (default 1,2,3,4,8,...,512)",
    )
    parser.add_argument(
        "--model-widths",
        type=int_list,
        default=[1, 2, 3, 4],
        help="widths for part (b) (default 1,2,3,4)",
    )
    parser.add_argument(
        "--bits", type=int, default=None, help="quantize weights (e.g. 4); default float32"
    )
    parser.add_argument(
        "--dtype",
        choices=("float32", "bfloat16", "float16"),
        default="float32",
        help="weights and activations (default float32: fastest on CPU; real checkpoints run bf16 on GPUs)",
    )
    parser.add_argument(
        "--layers",
        type=int,
        default=None,
        help="part (b): number of layers (default: the full model)",
    )
    parser.add_argument(
        "--random-weights",
        action="store_true",
        default=True,
        help="random weights at the family's real geometry (the only mode for now)",
    )
    parser.add_argument(
        "--reps", type=int, default=9, help="timed samples per arm (after one warm-up)"
    )
    parser.add_argument(
        "--out", metavar="FILE", help="append JSONL records (raw samples + env) here"
    )
    parser.add_argument("--part", choices=["a", "b", "both"], default="both")
    parser.add_argument("--size", choices=["full", "tiny"], default="full", help=argparse.SUPPRESS)


def run(args: argparse.Namespace) -> int:
    from mlatui.cli import UserError
    from mlatui.families import FAMILIES, family

    if args.family not in FAMILIES:
        raise UserError(f"unknown family {args.family!r}: use one of {', '.join(FAMILIES)}")
    fam = family(args.family)
    if args.size == "full" and fam.full is None and fam.name != "glm4_moe_lite":
        raise UserError(f"{args.family}: no public full-size config known; pick another family")
    if args.part in ("b", "both") and fam.hybrid:
        raise UserError(
            f"{args.family}: part (b) trims caches and its linear-attention cache cannot be trimmed; use --part a"
        )

    from mlatui import attnbench
    from mlatui.records import env_line, environment, markdown_table, to_jsonl

    env = environment()

    import mlx.core as mx

    dtype = {"float32": mx.float32, "bfloat16": mx.bfloat16, "float16": mx.float16}[args.dtype]

    def log(line: str) -> None:
        print(f"  {line}", file=sys.stderr, flush=True)

    print(
        f"# bench attention: {args.family} ({args.size} geometry, random weights, "
        f"{f'{args.bits}-bit weights, ' if args.bits else ''}{args.dtype})\n{env_line(env)}\n"
    )
    records = []
    if args.part in ("a", "both"):
        recs, summary = attnbench.forced_sweep(
            args.family,
            args.contexts,
            args.widths,
            args.reps,
            args.size,
            args.bits,
            env,
            log,
            dtype=dtype,
        )
        records += recs
        print("## (a) one attention layer, forced branch: median ms\n")
        by_key = {(r.context, r.width, r.arm): r for r in recs}
        rows = []
        for t in args.contexts:
            for w in args.widths:
                a, m = by_key[t, w, "absorbed"].stats, by_key[t, w, "materialised"].stats
                rows.append(
                    (
                        t,
                        w,
                        f"{a.median:.2f}",
                        f"{m.median:.2f}",
                        f"{m.median / a.median:.2f}x",
                        "absorbed" if a.median < m.median else "materialised",
                    )
                )
        print(
            markdown_table(
                ["cache T", "L", "absorbed ms", "materialised ms", "mat/abs", "faster"], rows
            )
        )
        print()
        for t, s in summary.items():
            measured = s["measured"]
            shown = (
                "never"
                if measured is None
                else (
                    f">= {measured} (largest width tried)"
                    if measured == max(args.widths)
                    else str(measured)
                )
            )
            print(
                f"T={t}: measured crossover (largest L where absorbed is faster): {shown}; formula: {s['formula']}"
            )
        print()
    if args.part in ("b", "both"):
        try:
            recs, summary = attnbench.model_sweep(
                args.family,
                args.contexts,
                args.model_widths,
                args.reps,
                args.size,
                args.layers,
                args.bits,
                env,
                log,
                dtype=dtype,
            )
        except ValueError as e:
            raise UserError(str(e)) from e
        except RuntimeError as e:
            if "GatherMM" in str(e):
                raise UserError(
                    f"{args.family}: MLX on CPU runs unquantized MoE experts in float32 only "
                    "(GatherMM); use --dtype float32 here (bf16 works on Metal and CUDA)"
                ) from e
            raise
        records += recs
        layers = f"{args.layers} layer(s)" if args.layers else "all layers"
        print(f"## (b) whole model ({layers}), stock vs patched step: median ms\n")
        rows = []
        for t, s in summary.items():
            med = s["medians"]
            for w in sorted({w for (_, w) in med}):
                st, pa = med["stock", w], med["patched", w]
                check = (
                    (f"L=1 diff {s['l1_diff_pct']:.1f}% {'ok' if s['valid'] else 'INVALID'}")
                    if w == 1
                    else ""
                )
                rows.append((t, w, f"{st:.2f}", f"{pa:.2f}", f"{st / pa:.2f}x", check))
        print(
            markdown_table(
                ["cache T", "L", "stock ms", "patched ms", "stock/patched", "check"], rows
            )
        )
        print()
    if args.out:
        with open(args.out, "a") as f:
            f.write(to_jsonl(records))
        print(f"{len(records)} records appended to {args.out}")
    return 0
