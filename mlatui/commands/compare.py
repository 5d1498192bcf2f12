"""`mlatui compare A.jsonl B.jsonl [--dump]`: two recorded runs side by side (no MLX needed)."""

from __future__ import annotations

import argparse

HELP = "two recorded runs side by side: the key figure of both, shared figures with B/A, both verdicts (no MLX needed)"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("a", metavar="A.jsonl", help="the first recording (e.g. before a patch)")
    parser.add_argument("b", metavar="B.jsonl", help="the second recording (e.g. after it)")
    parser.add_argument(
        "--dump",
        action="store_true",
        help="no terminal UI: print the header diff, both verdicts and the shared table as markdown",
    )
    parser.add_argument(
        "--skip-bad",
        action="store_true",
        help="leave out lines that do not fit the schema and report how many (default: stop at the first)",
    )
    parser.add_argument(
        "--out-dir",
        default=None,
        help="where e/s write the comparison and screenshots (default: .)",
    )


def run(args: argparse.Namespace) -> int:
    import sys

    from mlatui.views.compare import compare_files

    cmp = compare_files(args.a, args.b, skip_bad=args.skip_bad)
    for run in cmp.runs:
        for note in run.notes:
            print(f"mlatui: warning: {note}", file=sys.stderr)
    if args.dump:
        from mlatui.views.compare import compare_markdown

        print(compare_markdown(cmp), end="")
        return 0
    from mlatui.widgets.compare_app import CompareApp

    CompareApp(cmp, out_dir=args.out_dir).run()
    return 0
