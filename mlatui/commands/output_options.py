"""The two flags that let a command past a refusal, each for one thing: `--overwrite` replaces
an output file that already exists, `--force` runs what the memory estimate says will not fit.
One never implies the other: replacing yesterday's recording must not switch off the memory
guard."""

from __future__ import annotations

import argparse


def add_overwrite(parser: argparse.ArgumentParser, what: str = "--out file") -> None:
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help=f"replace an existing {what} (without it an existing file is refused; the memory "
        "estimate still applies)",
    )


def add_force(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--force",
        action="store_true",
        help="run even where the memory estimate says it will not fit (existing outputs are "
        "still refused: --overwrite)",
    )


def _expectation(text: str):
    from mlatui.views.expect import parse

    try:
        return parse(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def add_expect(parser: argparse.ArgumentParser) -> None:
    """`--expect`, checked against the summary's CIs (mlatui.views.expect has the grammar)."""
    parser.add_argument(
        "--expect",
        action="append",
        type=_expectation,
        default=[],
        metavar="ASSERTION",
        help="an assertion on a measured ratio, e.g. 'stock/patched@L=2,32K >= 5' (RATIO@L=WIDTH,"
        "CONTEXT OP BOUND; RATIO stock/patched or patched/stock, OP >= > <= <); repeatable. One "
        "line each on stderr; exit 1 when the whole 95%% CI misses it, 3 when the CI straddles "
        "it or the context's L = 1 check did not pass, 0 when every one holds for the whole CI",
    )


def check_expectations(summary, expectations) -> tuple[list, int | None]:
    """Each assertion checked on `summary`, its line printed on stderr; (the results as the JSON
    document carries them, the exit status they decide, None when none were given)."""
    import sys

    from mlatui.views.expect import check, exit_status
    from mlatui.views.summary_doc import ExpectationDoc, figure

    results = [check(summary, e) for e in expectations]
    for r in results:
        print(r.line, file=sys.stderr)
    docs = [
        ExpectationDoc(r.expectation.text, r.outcome.value, figure(r.measured, "×"), r.line)
        for r in results
    ]
    return docs, exit_status(results) if results else None


def print_summary(summary, format_name: str, expected: list | None = None, end: str = "\n") -> None:
    """The one summary as markdown, CSV or the JSON document (the `e` export's three files);
    `end` after markdown and CSV (the document ends its own line)."""
    from mlatui.views.export import summary_csv, summary_markdown
    from mlatui.views.summary_doc import document, document_json

    if format_name == "json":
        print(document_json(document(summary, expected)), end="")
    else:
        print({"md": summary_markdown, "csv": summary_csv}[format_name](summary), end=end)
